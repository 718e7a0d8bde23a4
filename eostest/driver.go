package eostest

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/eosflow/eosflow/internal/engine"
	"github.com/eosflow/eosflow/internal/graph"
	"github.com/eosflow/eosflow/state"
	"github.com/eosflow/eosflow/topology"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Driver runs one topology on the runtime's engine, in process, with
// in-memory topics and stores. It is not safe for concurrent use.
type Driver struct {
	tb     testing.TB // nil for a driver from Open
	eng    *engine.Engine
	ctx    context.Context // what user code sees; Close ends it
	cancel context.CancelFunc
	now    time.Time // the wall clock

	topics  map[string]*topic
	sources map[string]bool // topics the topology reads, repartition topics included
	keyHash kgo.TopicPartitioner
	scratch kgo.Record // for keyHash, which takes a record

	st stores
	gl *globals // the global tables, by name and topic

	// The open batch: the outputs it made, the tasks whose records it
	// took (for wall-clock timers), and whether Batch holds it open.
	pending []*kgo.Record
	taken   []state.Task
	inBatch bool
	doomed  error // a record of the open Batch failed: it aborts
	// feedback holds committed records written to topics the topology
	// reads, each to be taken in a batch of its own.
	feedback []*kgo.Record

	streamTimers bool
	wallSources  map[string]bool
	consumed     map[state.Task]bool // tasks with a committed record
	stats        Stats
	closed       bool

	emitFn  func(*kgo.Record)
	beginFn func(*kgo.Record) context.Context
	doneFn  func(engine.Outcome)
}

// Stats counts the outcomes of the records of the batches that
// committed, fed-back records (from repartition topics) included, as
// eos.Stats counts them.
type Stats struct {
	Processed    uint64 // records every node handled
	DeadLettered uint64 // records written to a dead-letter topic
	Skipped      uint64 // records dropped by a Skip policy (late records too)
	Retries      uint64 // calls retried under a Retry policy
	TimerFirings uint64 // timer firings (one whose error a Skip policy dropped included)
	// Expired entries (unmatched join records, final window results)
	// whose emission failed, dropped or dead-lettered by the policy of
	// the node that failed.
	ExpiriesSkipped      uint64
	ExpiriesDeadLettered uint64
}

// New is Open for tests: it fails tb if the topology cannot run, and
// closes the driver when the test ends. Mistakes of the test itself (a
// topic the topology does not read, a codec that cannot encode or decode
// what it is given) fail tb too.
func New(tb testing.TB, top *topology.Topology, opts ...Option) *Driver {
	tb.Helper()
	d, err := Open(top, opts...)
	if err != nil {
		tb.Fatalf("eostest: %v", err)
	}
	d.tb = tb
	tb.Cleanup(func() {
		if err := d.Close(); err != nil {
			tb.Errorf("eostest: closing the driver: %v", err)
		}
	})
	return d
}

// Open validates top, lays out its topics and starts its nodes (their
// Init). Close it when done. Where a driver from New fails its test on a
// mistake of the caller, one from Open panics.
func Open(top *topology.Topology, opts ...Option) (*Driver, error) {
	c := newConfig(opts)
	d := &Driver{now: c.start, topics: map[string]*topic{}, sources: map[string]bool{},
		keyHash: kgo.StickyKeyPartitioner(nil).ForTopic(""), st: newStores(),
		wallSources: map[string]bool{}, consumed: map[state.Task]bool{}}
	d.emitFn, d.beginFn, d.doneFn = d.emit, d.begin, d.done
	eng, err := engine.New(top, engine.AppID(c.appID), engine.Logger(c.log), engine.Stores(d.store), engine.Globals(func(name string) (graph.GlobalStore, error) { return d.gl.table(name) }),
		engine.Partitions(d.partitionCount), engine.OutputLimits(d.limits), engine.Sleep(noSleep))
	if err != nil {
		return nil, err
	}
	d.eng = eng
	d.gl = newGlobals(eng.GlobalSpecs())
	if err := d.layout(top, c); err != nil {
		return nil, err
	}
	d.ctx, d.cancel = context.WithCancel(context.Background())
	if err := eng.Start(d.ctx); err != nil {
		d.cancel()
		return nil, err
	}
	d.streamTimers = eng.HasStreamTimers()
	for _, topic := range eng.WallClockSources() {
		d.wallSources[topic] = true
	}
	return d, nil
}

// noSleep is the engine's retry wait: retries happen at once.
func noSleep(ctx context.Context, _ time.Duration) error { return ctx.Err() }

// Close stops the topology's nodes (their Close) and drops every store;
// it is idempotent.
func (d *Driver) Close() error {
	if d.closed {
		return nil
	}
	d.closed = true
	d.cancel()
	return errors.Join(d.eng.Close(), d.st.close())
}

// Now is the driver's wall-clock time, which only AdvanceWallClock moves.
func (d *Driver) Now() time.Time { return d.now }

// Stats returns the outcomes counted so far.
func (d *Driver) Stats() Stats { return d.stats }

// failf reports a mistake of the caller: it fails the test of a driver
// from New, and panics in one from Open.
func (d *Driver) failf(format string, args ...any) {
	msg := fmt.Sprintf("eostest: "+format, args...)
	if d.tb != nil {
		d.tb.Helper()
		d.tb.Fatal(msg)
	}
	panic(msg)
}

// helper marks the caller as a test helper, for a driver from New.
func (d *Driver) helper() {
	if d.tb != nil {
		d.tb.Helper()
	}
}

// usable fails unless the driver can take calls.
func (d *Driver) usable(call string) {
	if d.closed {
		d.failf("%s on a closed driver", call)
	}
}

// join returns the one error of errs, or all of them joined, or nil.
func join(errs ...error) error {
	var first error
	n := 0
	for _, err := range errs {
		if err != nil {
			if n == 0 {
				first = err
			}
			n++
		}
	}
	if n <= 1 {
		return first
	}
	return errors.Join(errs...)
}
