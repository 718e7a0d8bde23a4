package eos

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/eosflow/eosflow/config"
	"github.com/eosflow/eosflow/internal/graph"
	"github.com/eosflow/eosflow/internal/kafkautil"
	"github.com/eosflow/eosflow/internal/runcfg"
	"github.com/eosflow/eosflow/state"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/plugin/kzap"
	"go.uber.org/zap"
)

// globalTables keeps the topology's global tables: each one store for
// all partitions of its topic (a lookup is one read), filled read_committed from the start of the
// topic before the first batch (start), then kept current by a reader
// goroutine whose fetches the stream loop applies between batches
// (apply), so that no batch sees half of an update. The topic is the
// tables' only source of truth: no changelog, no task, and the stores are
// rebuilt at every start.
type globalTables struct {
	cfg         config.Config
	log         *zap.Logger
	extra       []kgo.Opt
	clientLevel func() kgo.LogLevel
	admin       func() *kgo.Client
	// bound is how long start waits for a global topic to answer, and
	// then for its read to make progress, before Run fails.
	bound   time.Duration
	tables  []*globalTable
	byName  map[string]*globalTable
	byTopic map[string]*globalTable

	cl      *kgo.Client
	lag     *globalLag         // how far the read got; the loader's, then the reader's
	warned  time.Time          // when a retriable fetch error was last logged
	updates chan []globalFetch // the reader's fetches, applied by apply
	failed  chan error         // the reader's fatal error, once
	cancel  context.CancelFunc
	wg      sync.WaitGroup
}

// globalTable is one global table: one backend for all partitions of its
// topic.
type globalTable struct {
	spec  graph.Global
	store state.Backend   // nil until open
	next  map[int32]int64 // the next offset to apply, per partition
	// applied counts the records applied, for Stats.GlobalRecords.
	applied *atomic.Uint64
	held    map[int32]*txnHold // the fetching side's records held back, per partition
}

// globalFetch is what the reader fetched of one partition of a global
// topic: the writes and the offset after the last record.
type globalFetch struct {
	table  *globalTable
	part   int32
	writes []state.Write
	next   int64
}

// newGlobalTables is the keeper of r's global tables.
func newGlobalTables(r *Runner, specs []graph.Global) *globalTables {
	g := &globalTables{cfg: r.cfg, log: r.log.Named("global"), extra: r.extra, clientLevel: r.clientLogLevel,
		admin: func() *kgo.Client { return r.admin }, bound: max(r.cfg.ConnectTimeout, r.waits.stall),
		byName: map[string]*globalTable{}, byTopic: map[string]*globalTable{}}
	for _, s := range specs {
		t := &globalTable{spec: s, next: map[int32]int64{}, applied: &r.counts.globalRecords,
			held: map[int32]*txnHold{}}
		g.tables = append(g.tables, t)
		g.byName[s.Name], g.byTopic[s.Topic] = t, t
	}
	return g
}

// table is the global table called name, for the engine's joins.
func (g *globalTables) table(name string) (graph.GlobalStore, error) {
	if g == nil || g.byName[name] == nil {
		return nil, fmt.Errorf("no global table %q is kept here", name)
	}
	return g.byName[name], nil
}

// Get returns key's row: the last record applied under key, whatever its
// partition (the default partitioner keeps a key's records in one).
func (t *globalTable) Get(key []byte) ([]byte, bool, error) {
	return t.store.Get(key)
}

// topics lists the global topics, sorted.
func (g *globalTables) topics() []string {
	out := make([]string, 0, len(g.tables))
	for _, t := range g.tables {
		out = append(out, t.spec.Topic)
	}
	slices.Sort(out)
	return out
}

// start opens the stores, reads every global topic read_committed up to
// its last stable offset as it is now, and starts the reader that keeps
// the stores current. It fails, naming the topic and the fix, if a topic
// does not exist or cannot be read within the bound.
func (g *globalTables) start(ctx context.Context) error {
	if g == nil {
		return nil
	}
	starts, ends, err := g.ends(ctx)
	if err != nil {
		return err
	}
	g.lag = newGlobalLag(starts, time.Now())
	consume := map[string]map[int32]kgo.Offset{}
	for _, t := range g.tables {
		if err := t.open(runcfg.StateDir(g.cfg)); err != nil {
			return err
		}
		consume[t.spec.Topic] = map[int32]kgo.Offset{}
		for p := range ends[t.spec.Topic] {
			t.next[p] = starts[t.spec.Topic][p]
			consume[t.spec.Topic][p] = kgo.NewOffset().AtStart()
		}
	}
	opts, err := kafkautil.ConnOptions(g.cfg, g.extra...)
	if err != nil {
		return err
	}
	opts = append(opts, kgo.ConsumePartitions(consume), kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.KeepControlRecords(),
		kgo.KeepRetryableFetchErrors(), kgo.FetchMaxWait(globalFetchWait),
		kgo.WithLogger(kzap.New(g.log.Named("kgo"), kzap.LevelFn(g.clientLevel))))
	if g.cl, err = kgo.NewClient(opts...); err != nil {
		return err
	}
	if err := g.restore(ctx, ends); err != nil {
		return err
	}
	rctx, cancel := context.WithCancel(ctx)
	g.cancel, g.updates, g.failed = cancel, make(chan []globalFetch, 16), make(chan error, 1)
	g.wg.Add(1)
	go g.read(rctx)
	return nil
}

// open opens the backend of t under dir, empty: a store left by an
// earlier run is wiped, as the topic is read again whole. It lives where
// a task store of the topic's partition 0 would.
func (t *globalTable) open(dir string) error {
	b, err := t.spec.Engine.Open(dir, t.spec.Name, state.Task{Topic: t.spec.Topic, Partition: 0})
	if err != nil {
		return fmt.Errorf("eos: opening the store of global table %q: %w", t.spec.Name, err)
	}
	pos, err := b.Position()
	if err == nil && pos.Offset != state.NoOffset {
		w, ok := b.(state.Wiper)
		if !ok {
			err = fmt.Errorf("the store holds data of an earlier run and engine %s cannot empty it; delete it from %s", t.spec.Engine, dir)
		} else {
			err = w.Wipe()
		}
	}
	if err != nil {
		_ = b.Close()
		return fmt.Errorf("eos: global table %q: %w", t.spec.Name, err)
	}
	t.store = b
	return nil
}

// close stops the reader and closes the client and the stores. It is safe
// on a keeper that never started.
func (g *globalTables) close() {
	if g == nil {
		return
	}
	if g.cancel != nil {
		g.cancel()
	}
	g.wg.Wait()
	if g.cl != nil {
		g.cl.Close()
	}
	for _, t := range g.tables {
		if t.store == nil {
			continue
		}
		if err := t.store.Close(); err != nil {
			g.log.Warn("closing a global table's store", zap.String("table", t.spec.Name), zap.Error(err))
		}
	}
}

// apply applies what the reader fetched so far, without waiting for more:
// the stream loop calls it between batches. It returns the reader's
// error, if one stopped it.
func (g *globalTables) apply() error {
	if g == nil || g.updates == nil {
		return nil
	}
	for {
		select {
		case err := <-g.failed:
			return err
		case fs := <-g.updates:
			for _, f := range fs {
				if err := f.table.applyFetch(f); err != nil {
					return err
				}
			}
		default:
			return nil
		}
	}
}

// applyFetch writes f to its partition's store.
func (t *globalTable) applyFetch(f globalFetch) error {
	if f.next <= t.next[f.part] {
		return nil
	}
	at := state.Position{Offset: f.next - 1, Checked: f.next - 1}
	if err := t.store.Apply(f.writes, at); err != nil {
		return fmt.Errorf("eos: applying records %s/%d up to offset %d to global table %q: %w", t.spec.Topic, f.part, f.next-1, t.spec.Name, err)
	}
	t.next[f.part] = f.next
	t.applied.Add(uint64(len(f.writes)))
	return nil
}

// fetched groups fs by global partition, each transaction's records
// held back until its marker comes (see txnHold); control records
// (transaction markers) only move the offset.
func (g *globalTables) fetched(fs kgo.Fetches) []globalFetch {
	var out []globalFetch
	fs.EachPartition(func(p kgo.FetchTopicPartition) {
		t := g.byTopic[p.Topic]
		if t == nil || len(p.Records) == 0 {
			return
		}
		g.lag.heard(p.Topic, p.Partition, p.Records[len(p.Records)-1].Offset+1, time.Now())
		if t.held[p.Partition] == nil {
			t.held[p.Partition] = &txnHold{}
		}
		if writes, next, ok := t.held[p.Partition].take(p.Records); ok {
			out = append(out, globalFetch{table: t, part: p.Partition, writes: writes, next: next})
		}
	})
	return out
}

// fetchErr is the first error of fs that no retry cures, or nil; the
// retriable ones are logged.
func (g *globalTables) fetchErr(fs kgo.Fetches) error {
	var fatal error
	fs.EachError(func(topic string, p int32, err error) {
		// A poll that timed out empty is no error: the load polls with a
		// deadline, and its bound is what ends a read that never moves.
		if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, kgo.ErrClientClosed) {
			return
		}
		if kerr.IsRetriable(err) {
			g.lag.heard(topic, p, 0, time.Now())
			if time.Since(g.warned) >= 5*time.Second {
				g.warned = time.Now()
				g.log.Warn("reading a global table's topic, retrying", zap.String("topic", topic), zap.Int32("partition", p), zap.Error(err))
			}
			return
		}
		switch {
		case fatal != nil:
		case p < 0: // the client's own error, of no one partition
			topics := g.topics()
			fatal = fmt.Errorf("eos: reading global table topics %s: %w; check that they exist and this app may read them "+
				"(`eosctl topic describe %s`)", strings.Join(topics, ", "), err, strings.Join(topics, " "))
		default:
			fatal = fmt.Errorf("eos: reading global table topic %s/%d: %w; check that the topic exists and this app may read it "+
				"(`eosctl topic describe %s`)", topic, p, err, topic)
		}
	})
	return fatal
}

// globalTopicsHint names the topics and the fix for a read that failed.
func globalTopicsHint(topics []string) string {
	return fmt.Sprintf("create the global tables' topics (%s) or fix their names in the topology, and check with `eosctl topic describe %s`",
		strings.Join(topics, ", "), strings.Join(topics, " "))
}

// listEnds lists the last stable offsets of the global topics once.
func listEnds(ctx context.Context, adm *kadm.Client, topics []string) (kadm.ListedOffsets, error) {
	ends, err := adm.ListCommittedOffsets(ctx, topics...)
	if err == nil {
		err = ends.Error()
	}
	return ends, err
}
