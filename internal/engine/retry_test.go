package engine_test

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/eosflow/eosflow/codec"
	"github.com/eosflow/eosflow/internal/engine"
	"github.com/eosflow/eosflow/processor"
	"github.com/eosflow/eosflow/state"
	"github.com/eosflow/eosflow/topology"
	"github.com/twmb/franz-go/pkg/kgo"
)

// bump adds one to key's count in store name and returns the new count.
func bump(ctx processor.Context[string], name string, key []byte) (int, error) {
	kv, err := processor.KV(ctx, name, codec.Bytes(), codec.JSON[int]())
	if err != nil {
		return 0, err
	}
	n, _, err := kv.Get(key)
	if err != nil {
		return 0, err
	}
	return n + 1, kv.Put(key, n+1)
}

// failing fails its first *n calls, after the store write.
func failing(n *int) error {
	if *n > 0 {
		*n--
		return errors.New("fails after writing")
	}
	return nil
}

// A node retried under Retry starts each attempt from the state its first
// attempt found, not over the writes of the attempts that failed: a count
// made by a Process node that fails after writing is made once. The
// writes of the record's earlier nodes stay, since a retry calls only the
// failing node again, and only the last attempt's emits go on.
func TestRetryStartsFromTheFirstAttemptsState(t *testing.T) {
	for _, tc := range []struct {
		name                  string
		countFails, noteFails int
	}{{"first node fails once", 1, 0}, {"second node fails once", 0, 1}, {"both fail twice", 2, 2}} {
		t.Run(tc.name, func(t *testing.T) {
			countFails, noteFails := tc.countFails, tc.noteFails
			top := topology.New()
			top.AddStore("counts", state.Memory())
			top.AddStore("notes", state.Memory())
			in := topology.Source(top, "in", codec.String())
			counted := topology.Process(in, "count", func(ctx processor.Context[string], r processor.Record[string]) error {
				n, err := bump(ctx, "counts", r.Key)
				if err != nil {
					return err
				}
				ctx.Emit(processor.Record[string]{Key: r.Key, Value: strconv.Itoa(n)})
				return failing(&countFails)
			}, topology.UseStores("counts"))
			noted := topology.Process(counted, "note", func(ctx processor.Context[string], r processor.Record[string]) error {
				n, err := bump(ctx, "notes", r.Key)
				if err != nil {
					return err
				}
				ctx.Emit(processor.Record[string]{Key: r.Key, Value: r.Value + "," + strconv.Itoa(n)})
				return failing(&noteFails)
			}, topology.UseStores("notes"))
			topology.To(noted, "out", codec.String())
			top.OnError("count", topology.Retry(3, time.Millisecond, topology.Fail()))
			top.OnError("note", topology.Retry(3, time.Millisecond, topology.Fail()))
			m := newMemStores(t)
			e, err := engine.New(top, engine.Stores(m.get), engine.Sleep(func(context.Context, time.Duration) error { return nil }))
			if err != nil {
				t.Fatal(err)
			}
			var out []string
			for range 2 {
				got, err := e.Process(context.Background(), &kgo.Record{Topic: "in", Key: []byte("k"), Value: []byte("v")},
					func(r *kgo.Record) { out = append(out, string(r.Value)) })
				if got != engine.Processed || err != nil {
					t.Fatalf("outcome %v, error %v", got, err)
				}
			}
			if want := []string{"1,1", "2,2"}; !slices.Equal(out, want) {
				t.Errorf("outputs %q, want %q: each count made once", out, want)
			}
			for _, name := range []string{"counts", "notes"} {
				st, _ := m.get(name, state.Task{Topic: "in"})
				if v, _, _ := st.Get([]byte("k")); string(v) != "2" {
					t.Errorf("store %s holds %s for k after two records, want 2", name, v)
				}
			}
			if countFails != 0 || noteFails != 0 {
				t.Fatalf("failures left unused: count %d, note %d", countFails, noteFails)
			}
		})
	}
}

// retriedTicks counts the firings of its stream-time timer in the store
// "counts", failing after the write as often as fails says.
type retriedTicks struct{ fails int }

func (p *retriedTicks) Init(ctx processor.InitContext) error {
	return processor.Schedule(ctx, processor.StreamTime, time.Second, p.tick)
}

func (p *retriedTicks) Process(processor.Context[string], processor.Record[string]) error { return nil }

func (p *retriedTicks) tick(ctx processor.Context[string], _ time.Time) error {
	n, err := bump(ctx, "counts", []byte("ticks"))
	if err != nil {
		return err
	}
	ctx.Emit(processor.Record[string]{Value: "ticks=" + strconv.Itoa(n)})
	return failing(&p.fails)
}

func (p *retriedTicks) Close() error { return nil }

// A timer callback retried under Retry starts each attempt from the state
// its first attempt found, as a Process function does.
func TestRetriedTimerStartsFromTheFirstAttemptsState(t *testing.T) {
	p := &retriedTicks{fails: 2}
	top := topology.New()
	top.AddStore("counts", state.Memory())
	in := topology.Source(top, "in", codec.String())
	ticked := topology.ProcessWith(in, "tick", func() processor.Processor[string, string] { return p },
		topology.UseStores("counts"), topology.Timers())
	topology.To(ticked, "out", codec.String())
	top.OnError("tick", topology.Retry(3, time.Millisecond, topology.Fail()))
	m := newMemStores(t)
	e, err := engine.New(top, engine.Stores(m.get), engine.Sleep(func(context.Context, time.Duration) error { return nil }))
	if err != nil {
		t.Fatal(err)
	}
	f := &fired{}
	for _, r := range []*kgo.Record{at(0, 500, "a"), at(1, 1500, "a")} {
		if got, err := e.Process(context.Background(), r, func(*kgo.Record) {}); got != engine.Processed || err != nil {
			t.Fatalf("offset %d: %v %v", r.Offset, got, err)
		}
		if got, err := e.StreamTime(r, f.begin, f.emit, f.settle); got != engine.Processed || err != nil {
			t.Fatalf("offset %d: StreamTime %v %v", r.Offset, got, err)
		}
	}
	if want := []string{"ticks=1"}; !slices.Equal(f.values(), want) || p.fails != 0 {
		t.Fatalf("fired %q with %d failures left, want %q after two failed attempts", f.values(), p.fails, want)
	}
	st, _ := m.get("counts", state.Task{Topic: "in", Partition: 1})
	if v, _, _ := st.Get([]byte("ticks")); string(v) != "1" {
		t.Fatalf("store counts holds %s ticks after one firing, want 1", v)
	}
}
