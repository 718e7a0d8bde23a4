package engine_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/eosflow/eosflow/internal/store"

	"github.com/eosflow/eosflow/codec"
	"github.com/eosflow/eosflow/internal/engine"
	"github.com/eosflow/eosflow/processor"
	"github.com/eosflow/eosflow/state"
	"github.com/eosflow/eosflow/topology"
	"github.com/twmb/franz-go/pkg/kgo"
)

// ticker counts records per key in the store "counts" and, on its
// timer, emits "key=count" for every key of the task, then "@now".
type ticker struct {
	kind     processor.TimerKind
	interval time.Duration
	fail     func(now time.Time) error // when it returns an error, the callback fails after writing
}

func (p *ticker) Init(ctx processor.InitContext) error {
	return processor.Schedule(ctx, p.kind, p.interval, p.tick)
}

func (p *ticker) Process(ctx processor.Context[string], r processor.Record[string]) error {
	st, err := ctx.Store("counts")
	if err != nil {
		return err
	}
	b, _, err := st.Get(r.Key)
	if err != nil {
		return err
	}
	return st.Put(r.Key, append(b, 'x'))
}

func (p *ticker) tick(ctx processor.Context[string], now time.Time) error {
	st, err := ctx.Store("counts")
	if err != nil {
		return err
	}
	for e, err := range st.Prefix(nil) {
		if err != nil {
			return err
		}
		if string(e.Key) == "fired" {
			continue
		}
		ctx.Emit(processor.Record[string]{Key: e.Key, Value: fmt.Sprintf("%s=%d", e.Key, len(e.Value))})
	}
	if err := st.Put([]byte("fired"), []byte(now.String())); err != nil {
		return err
	}
	if p.fail != nil {
		if err := p.fail(now); err != nil {
			return err
		}
	}
	ctx.Emit(processor.Record[string]{Value: fmt.Sprintf("@%d", now.UnixMilli())})
	return nil
}

func (p *ticker) Close() error { return nil }

func tickerTop(p *ticker, policy topology.ErrorPolicy) *topology.Topology {
	top := topology.New()
	top.AddStore("counts", state.Memory())
	in := topology.Source(top, "in", codec.String())
	counted := topology.ProcessWith(in, "count", func() processor.Processor[string, string] { return p },
		topology.UseStores("counts"), topology.Timers())
	topology.To(counted, "out", codec.String())
	top.OnError("count", policy)
	return top
}

// fired collects what the timer steps of one call did.
type fired struct {
	out   []*kgo.Record
	begun []int64
	done  []engine.Outcome
}

func (f *fired) begin(in *kgo.Record) context.Context {
	f.begun = append(f.begun, in.Offset)
	return context.Background()
}
func (f *fired) emit(r *kgo.Record)      { f.out = append(f.out, r) }
func (f *fired) settle(o engine.Outcome) { f.done = append(f.done, o) }

func (f *fired) values() []string {
	var s []string
	for _, r := range f.out {
		s = append(s, string(r.Value))
	}
	return s
}

func at(offset, ms int64, key string) *kgo.Record {
	return &kgo.Record{Topic: "in", Partition: 1, Offset: offset, Key: []byte(key), Value: []byte("v"), Timestamp: time.UnixMilli(ms)}
}

// A stream-time timer fires right after the record that moves the task's
// stream time past a multiple of its interval, once however many it
// passes; a task's first record and records that do not advance stream
// time fire nothing. The callback sees the task's store with the record,
// and its outputs carry the task and the record's offset, stamped with
// the stream time.
func TestStreamTimeTimerFiresWhenStreamTimePassesAMultiple(t *testing.T) {
	m := newMemStores(t)
	e, err := engine.New(tickerTop(&ticker{kind: processor.StreamTime, interval: 10 * time.Second}, topology.Fail()), engine.Stores(m.get))
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		r    *kgo.Record
		want []string
	}{
		{at(0, 9_000, "a"), nil}, // first record: sets stream time
		{at(1, 9_999, "b"), nil},
		{at(2, 10_000, "a"), []string{"a=2", "b=1", "@10000"}},
		{at(3, 4_000, "c"), nil}, // out of order: stream time stays
		{at(4, 19_999, "c"), nil},
		{at(5, 45_000, "b"), []string{"a=2", "b=2", "c=2", "@45000"}}, // passes 20s, 30s and 40s: once
		{at(6, 45_000, "b"), nil},
	}
	for _, s := range steps {
		if _, err := e.Process(context.Background(), s.r, func(*kgo.Record) {}); err != nil {
			t.Fatal(err)
		}
		f := &fired{}
		got, err := e.StreamTime(s.r, f.begin, f.emit, f.settle)
		if got != engine.Processed || err != nil {
			t.Fatalf("offset %d: StreamTime %v %v", s.r.Offset, got, err)
		}
		if !slices.Equal(f.values(), s.want) {
			t.Fatalf("offset %d at %dms: fired %v, want %v", s.r.Offset, s.r.Timestamp.UnixMilli(), f.values(), s.want)
		}
		for _, o := range f.out {
			if o.Topic != "out" || !o.Timestamp.Equal(s.r.Timestamp) {
				t.Fatalf("output %s to %s at %v, want to out at the stream time %v", o.Value, o.Topic, o.Timestamp, s.r.Timestamp)
			}
		}
		for _, b := range f.begun {
			if b != s.r.Offset {
				t.Fatalf("a step began with offset %d, want the record's %d", b, s.r.Offset)
			}
		}
	}
	st, _ := m.get(topology.TimerStore("count"), state.Task{Topic: "in", Partition: 1})
	if b, ok, _ := st.Get([]byte("s")); !ok || len(b) != 8 {
		t.Fatalf("the timer store holds no stream time: %q %v", b, ok)
	}
}

// A firing that fails is settled by the node's policy: Skip drops it
// (its store writes are the caller's to undo, as done says) while stream
// time stays advanced, so the next record of the same interval fires
// nothing; Fail is a *processor.TimerError naming node, kind and task.
// DeadLetter skips too: a timer has no record to dead-letter.
func TestStreamTimeTimerFailureGoesToPolicy(t *testing.T) {
	boom := errors.New("boom")
	for _, tc := range []struct {
		name   string
		policy topology.ErrorPolicy
		want   engine.Outcome
	}{{"skip", topology.Skip(), engine.Skipped}, {"dead-letter", topology.DeadLetter("dlq"), engine.Skipped}, {"fail", topology.Fail(), engine.Failed}} {
		t.Run(tc.name, func(t *testing.T) {
			m := newMemStores(t)
			p := &ticker{kind: processor.StreamTime, interval: time.Second, fail: func(time.Time) error { return boom }}
			e, err := engine.New(tickerTop(p, tc.policy), engine.Stores(m.get))
			if err != nil {
				t.Fatal(err)
			}
			for i, r := range []*kgo.Record{at(0, 500, "a"), at(1, 1500, "a"), at(2, 1600, "a")} {
				if _, err := e.Process(context.Background(), r, func(*kgo.Record) {}); err != nil {
					t.Fatal(err)
				}
				f := &fired{}
				got, err := e.StreamTime(r, f.begin, f.emit, f.settle)
				switch i {
				case 0, 2:
					if got != engine.Processed || len(f.out) != 0 {
						t.Fatalf("offset %d: %v %v, outputs %v; want nothing fired", r.Offset, got, err, f.values())
					}
				case 1:
					ret := engine.Processed // a skipped firing lets the batch go on
					if tc.want == engine.Failed {
						ret = engine.Failed
					}
					if got != ret || len(f.out) != 0 || !slices.Equal(f.done, []engine.Outcome{engine.Processed, tc.want}) {
						t.Fatalf("failing firing: %v %v, outputs %v, done %v; want %v, no outputs, and steps done [Processed %v]", got, err, f.values(), f.done, ret, tc.want)
					}
					var te *processor.TimerError
					if tc.want == engine.Failed {
						if !errors.As(err, &te) || !errors.Is(err, boom) || te.Node != "count" || te.Kind != processor.StreamTime || te.Topic != "in" || te.Partition != 1 {
							t.Fatalf("error %v, want a TimerError of node count, stream time, task in/1, wrapping boom", err)
						}
						if !strings.Contains(err.Error(), "stream-time timer every 1s") {
							t.Fatalf("error %q does not name the timer", err)
						}
						return
					}
					if err != nil {
						t.Fatal(err)
					}
				}
			}
		})
	}
}

// A wall-clock timer that never fired for a task is due at once; after a
// firing it is due an interval later, and a call before then fires
// nothing. Its firing is recorded in the task's timer store, so another
// engine reading the same (committed) store agrees; a task of a topic
// without timers has none.
func TestWallClockTimerFiresEveryIntervalPerTask(t *testing.T) {
	m := newMemStores(t)
	e, err := engine.New(tickerTop(&ticker{kind: processor.WallClock, interval: time.Minute}, topology.Fail()), engine.Stores(m.get))
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := e.WallClockSources(); !slices.Equal(got, []string{"in"}) {
		t.Fatalf("WallClockSources %v, want [in]", got)
	}
	task := state.Task{Topic: "in", Partition: 1}
	storeOf := func(name string) (*store.Store, error) { return m.get(name, task) }
	next, ok, err := e.NextWallClock(task, storeOf)
	if err != nil || !ok || !next.IsZero() {
		t.Fatalf("NextWallClock before any firing: %v %v %v, want due at once", next, ok, err)
	}
	if _, ok, _ := e.NextWallClock(state.Task{Topic: "other", Partition: 1}, storeOf); ok {
		t.Fatal("a task of a topic without timers has a wall-clock timer")
	}
	if _, err := e.Process(context.Background(), at(0, 1, "a"), func(*kgo.Record) {}); err != nil {
		t.Fatal(err)
	}
	t0 := time.UnixMilli(1_700_000_000_000)
	for _, s := range []struct {
		now  time.Time
		want []string
	}{
		{t0, []string{"a=1", fmt.Sprintf("@%d", t0.UnixMilli())}},
		{t0.Add(time.Minute - time.Millisecond), nil},
		{t0.Add(time.Minute), []string{"a=1", fmt.Sprintf("@%d", t0.Add(time.Minute).UnixMilli())}},
		{t0.Add(5 * time.Minute), []string{"a=1", fmt.Sprintf("@%d", t0.Add(5*time.Minute).UnixMilli())}}, // missed ones: once
	} {
		f := &fired{}
		n, got, err := e.WallClock(task, s.now, f.begin, f.emit, f.settle)
		if got != engine.Processed || err != nil || n != min(1, len(s.want)) {
			t.Fatalf("WallClock at %v: %d fired, %v %v", s.now, n, got, err)
		}
		if !slices.Equal(f.values(), s.want) {
			t.Fatalf("WallClock at +%s: fired %v, want %v", s.now.Sub(t0), f.values(), s.want)
		}
		for _, o := range f.out {
			if o.Timestamp.UnixMilli() != s.now.UnixMilli() {
				t.Fatalf("output stamped %v, want now %v", o.Timestamp, s.now)
			}
		}
		for _, b := range f.begun {
			if b != -1 {
				t.Fatalf("a wall-clock step began with offset %d, want -1", b)
			}
		}
		if len(s.want) > 0 {
			next, _, _ := e.NextWallClock(task, storeOf)
			if !next.Equal(time.UnixMilli(s.now.UnixMilli()).Add(time.Minute)) {
				t.Fatalf("after firing at %v, next due %v, want an interval later", s.now, next)
			}
		}
	}
	// A second engine, as a task's next owner, reads the same store.
	e2, err := engine.New(tickerTop(&ticker{kind: processor.WallClock, interval: time.Minute}, topology.Fail()), engine.Stores(m.get))
	if err != nil {
		t.Fatal(err)
	}
	if err := e2.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	if next, _, _ := e2.NextWallClock(task, storeOf); !next.Equal(t0.Add(6 * time.Minute)) {
		t.Fatalf("the next owner finds the timer due at %v, want %v", next, t0.Add(6*time.Minute))
	}
}

// Schedule refuses what cannot work, with the fix: a node without
// topology.Timers, a callback of another output type, a bad interval or
// kind, and an InitContext the runtime did not make.
func TestScheduleErrors(t *testing.T) {
	build := func(init func(processor.InitContext) error, opts ...topology.ProcessOption) error {
		top := topology.New()
		in := topology.Source(top, "in", codec.String())
		out := topology.ProcessWith(in, "node", func() processor.Processor[string, string] { return initOnly(init) }, opts...)
		topology.To(out, "out", codec.String())
		e, err := engine.New(top, engine.Stores(newMemStores(t).get))
		if err != nil {
			return err
		}
		return e.Start(context.Background())
	}
	tick := func(processor.Context[string], time.Time) error { return nil }
	for _, tc := range []struct {
		name string
		err  error
		want string
	}{
		{"no Timers option", build(func(ctx processor.InitContext) error {
			return processor.Schedule(ctx, processor.WallClock, time.Second, tick)
		}), "add topology.Timers() to its ProcessWith options"},
		{"wrong type", build(func(ctx processor.InitContext) error {
			return processor.Schedule(ctx, processor.WallClock, time.Second, func(processor.Context[int], time.Time) error { return nil })
		}, topology.Timers()), "func(processor.Context[string], time.Time) error"},
		{"interval", build(func(ctx processor.InitContext) error {
			return processor.Schedule(ctx, processor.StreamTime, 1500*time.Microsecond, tick)
		}, topology.Timers()), "whole number of milliseconds"},
		{"kind", build(func(ctx processor.InitContext) error {
			return processor.Schedule(ctx, 0, time.Second, tick)
		}, topology.Timers()), "pass processor.StreamTime or processor.WallClock"},
		{"foreign context", processor.Schedule(fakeInit{context.Background()}, processor.WallClock, time.Second, tick), "call it from your Processor's Init"},
	} {
		if tc.err == nil || !strings.Contains(tc.err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one saying %q", tc.name, tc.err, tc.want)
		}
	}
}

type initOnly func(processor.InitContext) error

func (f initOnly) Init(ctx processor.InitContext) error { return f(ctx) }
func (f initOnly) Process(processor.Context[string], processor.Record[string]) error {
	return nil
}
func (f initOnly) Close() error { return nil }

type fakeInit struct{ context.Context }

func (fakeInit) Node() string { return "fake" }
