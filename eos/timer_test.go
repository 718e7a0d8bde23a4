package eos_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/eosflow/eosflow/codec"
	"github.com/eosflow/eosflow/config"
	"github.com/eosflow/eosflow/internal/conformance"
	"github.com/eosflow/eosflow/internal/kafkatest"
	"github.com/eosflow/eosflow/processor"
	"github.com/eosflow/eosflow/state"
	"github.com/eosflow/eosflow/topology"
	"github.com/twmb/franz-go/pkg/kgo"
)

type timedRecord struct {
	partition int32
	key       string
	ts        time.Time
}

func produceTimed(t *testing.T, env *kafkatest.Env, topic string, recs []timedRecord) {
	t.Helper()
	cl := env.Client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	for _, r := range recs {
		cl.Produce(context.Background(), &kgo.Record{Topic: topic, Partition: r.partition, Key: []byte(r.key), Value: []byte("v"), Timestamp: r.ts}, nil)
	}
	if err := cl.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// tickTopology emits, every interval of wall-clock time and for each task
// of in, "<instance> <now ms>" keyed by the task's partition: a Process
// node remembers the task's partition from its records, which the timer
// reads from the store.
func tickTopology(in, out, instance string, interval time.Duration) *topology.Topology {
	top := topology.New("ticks")
	top.AddStore("partition", state.Memory())
	src := topology.Source(top, "in", in, codec.String())
	ticked := topology.ProcessWith(src, "tick", func() processor.Processor[string, string] { return &ticker{instance, interval} },
		topology.UseStores("partition"), topology.Timers())
	topology.To(ticked, "out", out, codec.String())
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
	at        int64
}

func parseTicks(t *testing.T, recs []*kgo.Record) []tick {
	var out []tick
	for _, r := range recs {
		f := strings.Fields(string(r.Value))
		if len(f) != 2 {
			t.Fatalf("output %q is not a tick", r.Value)
		}
		at, _ := strconv.ParseInt(f[1], 10, 64)
		out = append(out, tick{partition: string(r.Key), instance: f[0], at: at})
	}
	return out
}

// A wall-clock timer fires while no input arrives: the instance begins
// transactions of its own for it, and the firings are visible to a
// read_committed reader, per task, never closer together than the
// interval.
func TestWallClockTimerFiresWithoutInput(t *testing.T) {
	env := kafkatest.Fake(t)
	env.CreateTopics(t, 2, "in", "out")
	produceTimed(t, env, "in", []timedRecord{{0, "a", time.Now()}, {1, "b", time.Now()}})
	cfg := env.Config("app", "a", config.ExactlyOnce)
	cfg.StateDir = t.TempDir()
	const interval = 250 * time.Millisecond
	x := conformance.Start(t, cfg, tickTopology("in", "out", "a", interval))
	x.WaitCommitted(t, 2, 60*time.Second)
	committed := x.R.Stats().Committed
	time.Sleep(3 * time.Second)
	s := x.R.Stats()
	x.Stop() // the ticks end, so that the reader finds them all
	if err := x.Wait(t, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	if s.RecordsIn != 2 {
		t.Fatalf("%d records in, want the 2 seeded", s.RecordsIn)
	}
	if s.Committed < committed+8 {
		t.Fatalf("%d transactions committed in 3s without input, want at least 8 of timer firings", s.Committed-committed)
	}
	got := parseTicks(t, conformance.Drain(t, env, "out", 16))
	last := map[string]int64{}
	count := map[string]int{}
	for _, tk := range got {
		if prev, ok := last[tk.partition]; ok && tk.at-prev < interval.Milliseconds() {
			t.Fatalf("task %s fired at %d and %d, closer than the interval %s", tk.partition, prev, tk.at, interval)
		}
		last[tk.partition] = tk.at
		count[tk.partition]++
	}
	if count["0"] < 5 || count["1"] < 5 {
		t.Fatalf("read_committed ticks per task %v, want at least 5 each in 3s at %s", count, interval)
	}
	t.Logf("ticks per task %v in %d transactions", count, s.Committed-committed)
}

// A task's timers stop when it is revoked: once a second instance fires
// for a task, the first never does again, while it keeps firing for the
// tasks it kept.
func TestWallClockTimersStopOnRevoke(t *testing.T) {
	env := kafkatest.Fake(t)
	env.CreateTopics(t, 4, "in", "out")
	var seed []timedRecord
	for p := int32(0); p < 4; p++ {
		seed = append(seed, timedRecord{p, fmt.Sprint("k", p), time.Now()})
	}
	produceTimed(t, env, "in", seed)
	const interval = 100 * time.Millisecond
	start := func(instance string) *conformance.Run {
		cfg := env.Config("app", instance, config.ExactlyOnce)
		cfg.StateDir = t.TempDir()
		return conformance.Start(t, cfg, tickTopology("in", "out", instance, interval))
	}
	a := start("a")
	a.WaitCommitted(t, 4, 60*time.Second)
	time.Sleep(500 * time.Millisecond)
	b := start("b")
	conformance.WaitAssigned(t, env, "app", "b")
	time.Sleep(3 * time.Second)
	afterB := time.Now().UnixMilli()
	time.Sleep(time.Second)
	a.Stop()
	b.Stop()
	if err := a.Wait(t, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	if err := b.Wait(t, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	got := parseTicks(t, conformance.Drain(t, env, "out", 40))
	bSeen := map[string]bool{}
	var aKept, bTook bool
	for _, tk := range got {
		switch tk.instance {
		case "b":
			bSeen[tk.partition], bTook = true, true
		case "a":
			if bSeen[tk.partition] {
				t.Fatalf("instance a fired for task %s at %d, after b took it over", tk.partition, tk.at)
			}
			if tk.at > afterB {
				aKept = true
			}
		}
	}
	if !bTook || !aKept {
		t.Fatalf("b fired for %v, a fired after b settled in: %v; want both to own tasks", bSeen, aKept)
	}
	t.Logf("%d ticks; b took %v", len(got), bSeen)
}

// A wall-clock timer of a task whose partition has no committed offset
// waits for the task's first records: a transaction without one could not
// be fenced by the group's generation. Once a record commits, it fires.
func TestWallClockTimerWaitsForACommittedOffset(t *testing.T) {
	env := kafkatest.Fake(t)
	env.CreateTopics(t, 1, "in", "out")
	cfg := env.Config("app", "a", config.ExactlyOnce)
	cfg.StateDir = t.TempDir()
	x := conformance.Start(t, cfg, tickTopology("in", "out", "a", 100*time.Millisecond))
	conformance.WaitAssigned(t, env, "app", "a")
	time.Sleep(1500 * time.Millisecond)
	if s := x.R.Stats(); s.Committed != 0 || s.RecordsOut != 0 {
		t.Fatalf("stats %+v before any input: a timer fired in a transaction nothing fences", s)
	}
	produceTimed(t, env, "in", []timedRecord{{0, "a", time.Now()}})
	x.WaitCommitted(t, 1, 60*time.Second)
	conformance.Until(t, 30*time.Second, "ticks after the first record", func() bool { return x.R.Stats().RecordsOut >= 5 })
}
