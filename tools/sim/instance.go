package sim

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/eosflow/eosflow/config"
	"github.com/eosflow/eosflow/eos"
	"github.com/eosflow/eosflow/sink/pgsink"
	"github.com/eosflow/eosflow/state"
	"github.com/eosflow/eosflow/state/pebble"
	"github.com/eosflow/eosflow/tools/chaos"
	"github.com/eosflow/eosflow/topology"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"
	"go.uber.org/zap"
)

// Pipelines the harness runs, by name.
const (
	Stateless   = "upper"
	CountMemory = "count-memory"
	CountPebble = "count-pebble" // its stores on a crashable in-memory filesystem
	DedupAfter  = "dedup-after"  // a side effect behind topology.Dedup, marked after it ran
	DedupBefore = "dedup-before" // … marked before it runs, under a lease
	Windowed    = "windowed"     // counts per key and tumbling window, final results only, in pebble
	StreamJoin  = "join"         // a stream-stream join of two topics within an event-time span, in pebble
	Timers      = "timers"       // a stream-time and a wall-clock timer per task, counting their firings in pebble
	// PgSink is package pgsink writing a row per record into Postgres,
	// each batch's offsets in its database transaction. It runs only
	// with a database (Config.Postgres).
	PgSink = "pg-sink"
)

// Pipelines lists what Explore accepts.
var Pipelines = []string{Stateless, CountMemory, CountPebble, DedupAfter, DedupBefore, Windowed, StreamJoin, Timers}

const (
	stateDir = "/state" // on the members' in-memory filesystems only
	appID    = "sim"
	input    = "sim-in"
	payments = "sim-payments" // the join's second input; input holds its orders
	output   = "sim-out"
	fired    = "sim-fired" // the timer pipeline's firings
)

// instance is one incarnation of one member of the app: a runner whose
// every connection goes through its own wire.
type instance struct {
	idx    int
	wire   *wire
	runner member
	done   chan error // Run's result
	cancel context.CancelFunc
}

// member is what an instance runs: an eos.Runner, or a Postgres sink.
type member interface {
	Run(context.Context) error
	Close() error
}

// start builds and runs the idx-th member on a fresh wire.
func (s *sim) start(idx int) (*instance, error) {
	in := &instance{idx: idx, done: make(chan error, 1)}
	w := newWire()
	w.onRequest = func(key int16) (action, int) { return s.onRequest(idx, w, key) }
	w.onLost, w.onLate = s.strike, s.late
	in.wire = w
	s.mu.Lock()
	s.wires = append(s.wires, w)
	s.mu.Unlock()
	// Heartbeats every 200 ms tell a member of a rebalance well within
	// a side effect's answer (midEffect). The sink is done with its input
	// in under half a second: every 50 ms, its heartbeats reach the
	// occurrences a schedule strikes early.
	hb := 200 * time.Millisecond
	if s.sched.Pipeline == PgSink {
		hb = 50 * time.Millisecond
	}
	opts := []kgo.Opt{kgo.Dialer(in.wire.dial), kgo.MetadataMinAge(100 * time.Millisecond), kgo.HeartbeatInterval(hb)}
	if s.sched.TxnV1 {
		opts = append(opts, kgo.MaxVersions(txnV1()))
	}
	log := s.hearing.logger(s.log, w)
	if s.sched.Pipeline != PgSink {
		log = watchRestores(log, func() { s.onRestored(idx, w) })
	}
	log = log.With(zap.Int("instance", idx), zap.Int64("incarnation", incarnations.Add(1)))
	r, err := s.member(idx, w, log, opts)
	if err != nil {
		return nil, fmt.Errorf("instance %d: %w", idx, err)
	}
	in.runner = r
	ctx, cancel := context.WithCancel(context.Background())
	in.cancel = cancel
	go func() { in.done <- r.Run(ctx) }()
	return in, nil
}

// member builds member idx: a runner of the pipeline, or the sink.
func (s *sim) member(idx int, w *wire, log *zap.Logger, opts []kgo.Opt) (member, error) {
	if s.sched.Pipeline == PgSink {
		return s.startSink(idx, w, log, []pgsink.Option{pgsink.ClientOpts(opts...)})
	}
	top, err := s.topology(idx, w)
	if err != nil {
		return nil, err
	}
	return eos.New(s.config(idx), top, eos.Logger(log), eos.ClientOpts(opts...))
}

// txnV1 caps the requests whose newer versions carry KIP-890's second
// transaction protocol, so the client speaks the first.
func txnV1() *kversion.Versions {
	v := kversion.Stable()
	v.SetMaxKeyVersion(int16(kmsg.Produce), 11)
	v.SetMaxKeyVersion(int16(kmsg.EndTxn), 4)
	v.SetMaxKeyVersion(int16(kmsg.TxnOffsetCommit), 4)
	return v
}

// config is the runtime's config for member idx: small batches and short
// intervals, so that a few hundred records make many transactions.
func (s *sim) config(idx int) config.Config {
	c := config.Default()
	c.Brokers = s.fake.ListenAddrs()
	c.AppID = appID
	c.InstanceID = memberID(idx)
	c.Guarantee = s.cfg.Guarantee
	c.CommitInterval = 10 * time.Millisecond
	c.AdaptiveCommit = s.sched.Adaptive
	c.MaxBatchRecords = 25
	c.SessionTimeout = 6 * time.Second
	c.RebalanceTimeout = 3 * time.Second
	c.TransactionTimeout = 5 * time.Second
	c.ConnectTimeout = 2 * time.Second
	c.RecoveryTimeout = 10 * time.Second
	c.LogLevel = "info"
	c.StateDir = stateDir
	return c
}

// topology is the pipeline member idx runs, its user code reporting each
// record to the schedule.
func (s *sim) topology(idx int, w *wire) (*topology.Topology, error) {
	before := func() { s.onRecord(idx, w) }
	switch s.sched.Pipeline {
	case Stateless:
		return chaos.Pipeline(input, output, before), nil
	case CountMemory:
		return chaos.CountPipeline(input, output, s.engine(idx, w, state.Memory()), before), nil
	case CountPebble:
		return chaos.CountPipeline(input, output, s.pebble(idx, w), before), nil
	case DedupAfter:
		return s.dedupTopology(idx, w, chaos.DedupAfter)
	case DedupBefore:
		return s.dedupTopology(idx, w, chaos.DedupBefore)
	case Windowed:
		return chaos.WindowedPipeline(input, output, s.pebble(idx, w), before), nil
	case StreamJoin:
		return chaos.JoinPipeline(input, payments, output, s.pebble(idx, w), before), nil
	case Timers:
		return chaos.TimerPipeline(input, output, fired, s.pebble(idx, w), before, func() { s.onUser(idx, w, Timer) }), nil
	}
	return nil, fmt.Errorf("sim: unknown pipeline %q (one of %v)", s.sched.Pipeline, Pipelines)
}

// engine is e with member idx's writes reaching point Apply.
func (s *sim) engine(idx int, w *wire, e state.Engine) state.Engine {
	return applyEngine{e, func() error { return s.onApply(idx, w) }, func(store string, task state.Task, inherited []int64, at int64) {
		if w.isDead() {
			return // a crashed incarnation's late write reaches no disk that counts
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		s.trusts = append(s.trusts, fmt.Sprintf("member %d, store %s of %s applied a batch on End's word at changelog offset %d while the batches an earlier incarnation applied so, at %v, were never read back as committed",
			idx, store, task, at, inherited))
	}}
}

// pebble is the pebble engine on member idx's crashable disk, its writes
// reaching point Apply.
func (s *sim) pebble(idx int, w *wire) state.Engine {
	return s.engine(idx, w, pebble.New(pebble.FS(s.disk(idx)), pebble.MemTableSize(256<<10)))
}

// stop ends an incarnation: cleanly with Close, or as a crash (every
// connection cut first, so nothing it does after reaches the broker). It
// returns Run's result, or an error naming the hang past bound.
func (in *instance) stop(crash bool, bound time.Duration) error {
	if crash {
		in.wire.kill()
		in.cancel()
	} else {
		go in.runner.Close()
	}
	select {
	case err := <-in.done:
		in.cancel()
		return err
	case <-time.After(bound):
		return &HangError{Instance: in.idx, Crash: crash, Bound: bound}
	}
}

// HangError is a Run that did not return within its bound after a crash or
// a Close.
type HangError struct {
	Instance int
	Crash    bool
	Bound    time.Duration
}

// Error names the member, what it was asked, and the bound it missed.
func (e *HangError) Error() string {
	how := "Close"
	if e.Crash {
		how = "a crash (its connections cut, its context cancelled)"
	}
	return fmt.Sprintf("instance %d: Run did not return within %v of %s", e.Instance, e.Bound, how)
}

// incarnations numbers the incarnations of this process's runs, so that a
// log tells a crashed member's remains from its successor.
var incarnations atomic.Int64
