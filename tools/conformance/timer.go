package conformance

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/eosflow/eosflow/codec"
	"github.com/eosflow/eosflow/config"
	"github.com/eosflow/eosflow/eos"
	"github.com/eosflow/eosflow/processor"
	"github.com/eosflow/eosflow/state"
	"github.com/eosflow/eosflow/tools/kafkatest"
	"github.com/eosflow/eosflow/topology"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// perKeyCounts counts records per key in the store "counts" and, every
// interval of stream time, emits "key=count@now" for every key of the
// task.
type perKeyCounts struct{ interval time.Duration }

func (p perKeyCounts) Init(ctx processor.InitContext) error {
	return processor.Schedule(ctx, processor.StreamTime, p.interval, p.emit)
}

func (p perKeyCounts) Process(ctx processor.Context[string], r processor.Record[string]) error {
	kv, err := processor.KV(ctx, "counts", codec.String(), codec.JSON[int]())
	if err != nil {
		return err
	}
	n, _, err := kv.Get(string(r.Key))
	if err != nil {
		return err
	}
	return kv.Put(string(r.Key), n+1)
}

func (p perKeyCounts) emit(ctx processor.Context[string], now time.Time) error {
	kv, err := processor.KV(ctx, "counts", codec.String(), codec.JSON[int]())
	if err != nil {
		return err
	}
	for e, err := range kv.All() {
		if err != nil {
			return err
		}
		ctx.Emit(processor.Record[string]{Key: []byte(e.Key), Value: fmt.Sprintf("%s=%d@%d", e.Key, e.Value, now.UnixMilli())})
	}
	return nil
}

func (perKeyCounts) Close() error { return nil }

// perKeyCountsTopology counts the records of each key of in (a memory
// store "counts") and, each time a task's stream time passes a multiple
// of interval, writes "key=count@stream-time-ms" for every key of the task
// to out: the stream-time timer whose outputs StreamTimeTimerExactlyOnce
// compares with expectedFirings.
func perKeyCountsTopology(in, out string, interval time.Duration) *topology.Topology {
	top := topology.New()
	top.AddStore("counts", state.Memory())
	src := topology.Source(top, in, codec.String(), topology.Named("in"))
	counts := topology.ProcessWith(src, "per-key", func() processor.Processor[string, string] { return perKeyCounts{interval} },
		topology.UseStores("counts"), topology.Timers())
	topology.To(counts, out, codec.String(), topology.Named("out"))
	return top
}

// timerSeed makes n records over keys keys (each in one partition), with
// event times rising by 300ms and one in ten out of order by up to 2s.
func timerSeed(n, keys int, partitions int32) []eventRecord {
	rng := rand.New(rand.NewPCG(11, 13))
	base := eventBase()
	var recs []eventRecord
	for i := 0; i < n; i++ {
		k := rng.IntN(keys)
		ts := base.Add(time.Duration(i) * 300 * time.Millisecond)
		if rng.IntN(10) == 0 {
			ts = ts.Add(-time.Duration(rng.IntN(2000)) * time.Millisecond)
		}
		recs = append(recs, eventRecord{partition: int32(k) % partitions, key: fmt.Sprintf("k%02d", k), ts: ts})
	}
	return recs
}

// expectedFirings computes in plain Go what perKeyCountsTopology emits:
// per partition in order, after each record is counted, stream time moving
// from one multiple of interval past another emits every key's count.
// The outputs are sorted; firings counts the timer firings.
func expectedFirings(recs []eventRecord, interval time.Duration) (out []string, firings int) {
	type part struct {
		started bool
		stream  int64
		counts  map[string]int
	}
	parts := map[int32]*part{}
	iv := interval.Milliseconds()
	for _, r := range recs {
		p := parts[r.partition]
		if p == nil {
			p = &part{counts: map[string]int{}}
			parts[r.partition] = p
		}
		p.counts[r.key]++
		ts := r.ts.UnixMilli()
		if !p.started {
			p.started, p.stream = true, ts
			continue
		}
		if ts <= p.stream {
			continue
		}
		fire := p.stream/iv != ts/iv
		p.stream = ts
		if fire {
			firings++
			for k, c := range p.counts {
				out = append(out, fmt.Sprintf("%s=%d@%d", k, c, ts))
			}
		}
	}
	slices.Sort(out)
	return out, firings
}

// diff lists a few entries in only one of the sorted a and b.
func diff(a, b []string) []string {
	var d []string
	for i, j := 0, 0; (i < len(a) || j < len(b)) && len(d) < 6; {
		switch {
		case j >= len(b) || i < len(a) && a[i] < b[j]:
			d = append(d, "extra "+a[i])
			i++
		case i >= len(a) || b[j] < a[i]:
			d = append(d, "missing "+b[j])
			j++
		default:
			i, j = i+1, j+1
		}
	}
	return d
}

// errVeto is the batch failure StreamTimeTimerExactlyOnce injects with
// eos.BeforeCommit.
var errVeto = errors.New("conformance: injected commit veto")

// vetoes fails every every-th batch of input records a runner ends, until
// limit batches were failed in all. A veto aborts the batch and stops
// the runner that ended it, so each runner gets its own option.
type vetoes struct {
	every, limit int
	fired        atomic.Int32
}

// option returns a BeforeCommit option for one runner.
func (v *vetoes) option() eos.Option {
	batches := 0 // BeforeCommit runs on the runner's one consuming goroutine
	return eos.BeforeCommit(func(_ context.Context, b eos.BatchInfo) error {
		if b.Records == 0 {
			return nil
		}
		batches++
		if batches%v.every == 0 && int(v.fired.Load()) < v.limit {
			v.fired.Add(1)
			return errVeto
		}
		return nil
	})
}

// StreamTimeTimerExactlyOnce: a stream-time timer that emits per-key
// counts every 10 s of event time produces exactly the outputs computed
// from the input in plain Go, each once, across aborted batches and
// restarts. On every broker a BeforeCommit veto aborts every 4th batch of
// a runner, 3 times in all, after the batch's firings were produced; the
// vetoed runner stops, and the next one restores stream time and counts
// from the changelogs and redoes the batch, neither repeating nor skipping
// a firing. Half way the pipeline also stops cleanly and restarts on the
// rest of the input. On the embedded broker the first 3 EndTxn requests
// fail as well, a different path: franz-go aborts the transaction by
// reloading its producer id and reports an abort, and the same runner
// asks the broker whether the batch's offsets landed, then redoes it.
func StreamTimeTimerExactlyOnce(t *testing.T, env *kafkatest.Env) {
	const n, partitions, batch, interval = 1500, 3, 100, 10 * time.Second
	recs := timerSeed(n, 20, partitions)
	want, firings := expectedFirings(recs, interval)
	names := topics(t, env, partitions, "in", "out")
	in, out := names[0], names[1]
	cfg := env.Config(env.Name("timed"), "a", config.ExactlyOnce)
	cfg.MaxBatchRecords = batch
	cfg.StateDir = t.TempDir()
	var endTxn *kfake.FaultHandle
	if env.Fake != nil {
		endTxn = env.Fake.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.EndTxn}, Err: kerr.UnknownServerError, Count: 3})
	}
	veto := &vetoes{every: 4, limit: 3}

	var runs []*Run
	var restoring []bool // whether a runner started after records committed
	committed := func() (in uint64) {
		for _, x := range runs {
			in += x.R.Stats().RecordsIn
		}
		return in
	}
	// runUntil starts runners, a new one after each veto, until target
	// input records committed, and returns the one running then.
	runUntil := func(target uint64) *Run {
		for {
			restoring = append(restoring, committed() > 0)
			x := Start(t, cfg, perKeyCountsTopology(in, out, interval), veto.option())
			runs = append(runs, x)
			var err error
			stopped := false
			for deadline := time.Now().Add(90 * time.Second); !stopped && committed() < target; {
				if time.Now().After(deadline) {
					var stats []string
					for i, x := range runs {
						stats = append(stats, fmt.Sprintf("runner %d: %+v", i+1, x.R.Stats()))
					}
					t.Fatalf("timed out after 90s with %d of %d records committed and %d vetoes; %s",
						committed(), target, veto.fired.Load(), strings.Join(stats, "; "))
				}
				select {
				case err = <-x.errc:
					stopped = true
				case <-time.After(10 * time.Millisecond):
				}
			}
			if !stopped {
				return x
			}
			if !errors.Is(err, errVeto) {
				t.Fatalf("runner %d stopped with %v, want the injected veto", len(runs), err)
			}
			if s := x.R.Stats(); s.Aborted == 0 {
				t.Fatalf("runner %d stopped on a veto but aborted no batch: %+v", len(runs), s)
			}
		}
	}
	produceEvents(t, env, in, recs[:n/2])
	x := runUntil(n / 2)
	x.Stop()
	if err := x.Wait(t, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	produceEvents(t, env, in, recs[n/2:])
	runUntil(n)

	var aborted, fired uint64
	for i, x := range runs {
		s := x.R.Stats()
		aborted += s.Aborted
		fired += s.TimerFirings
		t.Logf("runner %d: %+v", i+1, s)
		if restoring[i] && s.Restored == 0 {
			t.Fatalf("runner %d restored nothing, yet its memory store started empty after counts had committed", i+1)
		}
	}
	if got := veto.fired.Load(); got != int32(veto.limit) {
		t.Fatalf("%d batches vetoed, want %d: the faults did not exercise a redo", got, veto.limit)
	}
	faults := veto.limit
	if endTxn != nil {
		if endTxn.Hits() != 3 {
			t.Fatalf("%d of 3 injected EndTxn failures happened", endTxn.Hits())
		}
		faults += endTxn.Hits()
	}
	if aborted < uint64(faults) {
		t.Fatalf("%d batches aborted across the runners, want at least the %d failed", aborted, faults)
	}
	if c := committed(); c != n {
		t.Fatalf("%d input records committed across %d runners, want %d", c, len(runs), n)
	}
	if fired != uint64(firings) {
		t.Fatalf("Stats.TimerFirings sum to %d across %d runners, want the %d firings that committed: a firing of an aborted batch counts only when it is redone", fired, len(runs), firings)
	}
	var got []string
	for _, r := range Drain(t, env, out, len(want)) {
		got = append(got, string(r.Value))
	}
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Fatalf("%d outputs, want %d; first differences: %v", len(got), len(want), diff(got, want))
	}
	t.Logf("%d firings' outputs exact across %d runners, %d aborted batches", len(want), len(runs), aborted)
}

// tickTopology emits, every interval of wall-clock time and for each task
// of in, "<instance> <now ms>" keyed by the task's partition: a Process
// node remembers the task's partition from its records (and emits
// nothing), which the timer reads from the store.
func tickTopology(in, out, instance string, interval time.Duration) *topology.Topology {
	top := topology.New()
	top.AddStore("partition", state.Memory())
	src := topology.Source(top, in, codec.String(), topology.Named("in"))
	ticked := topology.ProcessWith(src, "tick", func() processor.Processor[string, string] { return &ticker{instance, interval} },
		topology.UseStores("partition"), topology.Timers())
	topology.To(ticked, out, codec.String(), topology.Named("out"))
	return top
}

type ticker struct {
	instance string
	interval time.Duration
}

func (p *ticker) Init(ctx processor.InitContext) error {
	return processor.Schedule(ctx, processor.WallClock, p.interval, p.tick)
}

func (p *ticker) Process(ctx processor.Context[string], r processor.Record[string]) error {
	st, err := ctx.Store("partition")
	if err != nil {
		return err
	}
	return st.Put([]byte("p"), []byte(strconv.Itoa(int(r.Partition))))
}

func (p *ticker) tick(ctx processor.Context[string], now time.Time) error {
	st, err := ctx.Store("partition")
	if err != nil {
		return err
	}
	part, _, err := st.Get([]byte("p"))
	if err != nil {
		return err
	}
	ctx.Emit(processor.Record[string]{Key: part, Value: fmt.Sprintf("%s %d", p.instance, now.UnixMilli())})
	return nil
}

func (*ticker) Close() error { return nil }

// tick is one parsed output of tickTopology.
type tick struct {
	partition string
	instance  string
	at        int64 // the firing's wall-clock time, in ms
}

// readTicks drains out, read_committed, and parses its records as ticks,
// failing t unless it holds exactly want of them: what the runners
// reported as committed.
func readTicks(t *testing.T, env *kafkatest.Env, out string, want uint64) []tick {
	t.Helper()
	recs := Drain(t, env, out, int(want))
	if uint64(len(recs)) != want {
		t.Fatalf("read_committed saw %d ticks, the runners committed %d", len(recs), want)
	}
	var ticks []tick
	for _, r := range recs {
		f := strings.Fields(string(r.Value))
		if len(f) != 2 {
			t.Fatalf("output %q is not a tick", r.Value)
		}
		at, err := strconv.ParseInt(f[1], 10, 64)
		if err != nil {
			t.Fatalf("output %q is not a tick: %v", r.Value, err)
		}
		ticks = append(ticks, tick{partition: string(r.Key), instance: f[0], at: at})
	}
	return ticks
}

// produceNow writes one record now to each of partitions of topic, so
// that every task has a committed offset and knows its partition.
func produceNow(t *testing.T, env *kafkatest.Env, topic string, partitions ...int32) {
	t.Helper()
	var recs []eventRecord
	for _, p := range partitions {
		recs = append(recs, eventRecord{p, fmt.Sprint("k", p), time.Now()})
	}
	produceEvents(t, env, topic, recs)
}

// WallClockTimerFiresWithoutInput: a wall-clock timer fires while no input
// arrives: the instance begins transactions of its own for it, and the
// firings are visible to a read_committed reader, per task, never closer
// together than the interval, and often enough: at least a third of the
// intervals in the time watched.
func WallClockTimerFiresWithoutInput(t *testing.T, env *kafkatest.Env) {
	const interval, watch = 250 * time.Millisecond, 4 * time.Second
	names := topics(t, env, 2, "in", "out")
	in, out := names[0], names[1]
	produceNow(t, env, in, 0, 1)
	cfg := env.Config(env.Name("ticks"), "a", config.ExactlyOnce)
	cfg.StateDir = t.TempDir()
	x := Start(t, cfg, tickTopology(in, out, "a", interval))
	x.WaitCommitted(t, 2, 60*time.Second)
	before := x.R.Stats()
	from := time.Now().UnixMilli()
	time.Sleep(watch)
	to := time.Now().UnixMilli()
	x.Stop() // the ticks end, so that the reader finds them all
	if err := x.Wait(t, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	s := x.R.Stats()
	if s.RecordsIn != 2 {
		t.Fatalf("%d records in, want the 2 seeded", s.RecordsIn)
	}
	if s.Committed <= before.Committed {
		t.Fatalf("no transaction committed in %s without input: stats %+v", watch, s)
	}
	last := map[string]int64{}
	watched := map[string]int{}
	for _, tk := range readTicks(t, env, out, s.RecordsOut) {
		if tk.instance != "a" || (tk.partition != "0" && tk.partition != "1") {
			t.Fatalf("tick %+v: not of instance a's tasks 0 and 1", tk)
		}
		if prev, ok := last[tk.partition]; ok && tk.at-prev < interval.Milliseconds() {
			t.Fatalf("task %s fired at %d and %d, closer than the interval %s", tk.partition, prev, tk.at, interval)
		}
		last[tk.partition] = tk.at
		if tk.at >= from && tk.at <= to {
			watched[tk.partition]++
		}
	}
	least := int(watch / interval / 3)
	if watched["0"] < least || watched["1"] < least {
		t.Fatalf("ticks per task in %s without input %v, want at least %d each at %s", watch, watched, least, interval)
	}
	t.Logf("ticks per task in %s %v (at most %d each), in %d transactions", watch, watched, watch/interval, s.Committed-before.Committed)
}

// WallClockTimersStopOnRevoke: a task's timers stop when it is revoked:
// once a second instance fires for a task, the first never does again,
// while it keeps firing for the tasks it kept, within 20 s (200
// intervals) of the second's first firing. The rebalance aborts a timer
// transaction of the first instance, whose kept tasks then restore from
// their changelogs before they fire again.
func WallClockTimersStopOnRevoke(t *testing.T, env *kafkatest.Env) {
	const interval = 100 * time.Millisecond
	names := topics(t, env, 4, "in", "out")
	in, out := names[0], names[1]
	produceNow(t, env, in, 0, 1, 2, 3)
	app := env.Name("ticks")
	start := func(instance string) *Run {
		cfg := env.Config(app, instance, config.ExactlyOnce)
		cfg.StateDir = t.TempDir()
		return Start(t, cfg, tickTopology(in, out, instance, interval))
	}
	a := start("a")
	a.WaitCommitted(t, 4, 60*time.Second)
	Until(t, 30*time.Second, "a's first ticks", func() bool { return a.R.Stats().RecordsOut >= 8 })
	joined := time.Now()
	b := start("b")
	WaitAssigned(t, env, app, "b")
	assigned := time.Now()
	Until(t, 60*time.Second, "b's first ticks", func() bool { return b.R.Stats().RecordsOut > 0 })
	took, late := time.Since(joined), time.Since(assigned)
	// The assignment ends b's idle poll, which would otherwise wait up
	// to 5 s (the idle check) before the new tasks' timers are looked at.
	if late > 3*time.Second {
		t.Errorf("b's first timer fired %s after it was assigned tasks, due every %s; want it within 3s", late.Round(time.Millisecond), interval)
	}
	// Ticks of a fired after settled prove that it kept tasks: it
	// commits a firing within a few intervals of its time.
	settled := time.Now().UnixMilli()
	aOut := a.R.Stats().RecordsOut
	Until(t, 20*time.Second, "more ticks of both", func() bool {
		return a.R.Stats().RecordsOut >= aOut+10 && b.R.Stats().RecordsOut >= 10
	})
	resumed := time.Now().UnixMilli() - settled
	a.Stop()
	b.Stop()
	if err := a.Wait(t, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	if err := b.Wait(t, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	ticks := readTicks(t, env, out, a.R.Stats().RecordsOut+b.R.Stats().RecordsOut)
	bSeen := map[string]bool{}
	aKept := map[string]bool{}
	for _, tk := range ticks {
		switch tk.instance {
		case "b":
			bSeen[tk.partition] = true
		case "a":
			if bSeen[tk.partition] {
				t.Fatalf("instance a fired for task %s at %d, after b took it over", tk.partition, tk.at)
			}
			if tk.at > settled {
				aKept[tk.partition] = true
			}
		default:
			t.Fatalf("tick %+v of no instance", tk)
		}
	}
	if len(bSeen) == 0 || len(aKept) == 0 {
		t.Fatalf("b fired for %v, a fired after b settled in for %v; want both to own tasks", bSeen, aKept)
	}
	t.Logf("%d ticks; b took %v and first fired %s after it started, %s after its assignment; a kept %v; 10 more ticks of each within %dms", len(ticks), bSeen, took.Round(time.Millisecond), late.Round(time.Millisecond), aKept, resumed)
}

// WallClockTimerWaitsForACommittedOffset: a wall-clock timer of a task
// whose partition has no committed offset waits for the task's first
// records: a transaction without one could not be fenced by the group's
// generation. Once a record commits, it fires.
func WallClockTimerWaitsForACommittedOffset(t *testing.T, env *kafkatest.Env) {
	names := topics(t, env, 1, "in", "out")
	in, out := names[0], names[1]
	app := env.Name("ticks")
	cfg := env.Config(app, "a", config.ExactlyOnce)
	cfg.StateDir = t.TempDir()
	x := Start(t, cfg, tickTopology(in, out, "a", 100*time.Millisecond))
	WaitAssigned(t, env, app, "a")
	time.Sleep(1500 * time.Millisecond)
	if s := x.R.Stats(); s.Committed != 0 || s.RecordsOut != 0 {
		t.Fatalf("stats %+v before any input: a timer fired in a transaction nothing fences", s)
	}
	produceNow(t, env, in, 0)
	x.WaitCommitted(t, 1, 60*time.Second)
	Until(t, 30*time.Second, "ticks after the first record", func() bool { return x.R.Stats().RecordsOut >= 5 })
}
