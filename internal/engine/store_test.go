package engine_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/eosflow/eosflow/internal/store"

	"github.com/eosflow/eosflow/codec"
	"github.com/eosflow/eosflow/internal/engine"
	"github.com/eosflow/eosflow/processor"
	"github.com/eosflow/eosflow/state"
	"github.com/eosflow/eosflow/state/pebble"
	"github.com/eosflow/eosflow/topology"
	"github.com/twmb/franz-go/pkg/kgo"
)

// memStores provides memory stores opened per store and task in a
// temporary directory, and records which ones user code asked for.
type memStores struct {
	t      *testing.T
	dir    string
	stores map[string]*store.Store
	asked  []string
}

func newMemStores(t *testing.T) *memStores {
	return &memStores{t: t, dir: t.TempDir(), stores: map[string]*store.Store{}}
}

func (m *memStores) get(name string, task state.Task) (*store.Store, error) {
	key := name + "@" + task.String()
	m.asked = append(m.asked, key)
	if s := m.stores[key]; s != nil {
		return s, nil
	}
	s, err := store.Open(state.Memory(), m.dir, name, task)
	if err != nil {
		return nil, err
	}
	m.t.Cleanup(func() { _ = s.Close() })
	m.stores[key] = s
	return s, nil
}

// reassign closes every store, as the runtime does on revoke; the next
// ask opens new ones.
func (m *memStores) reassign() {
	for k, s := range m.stores {
		_ = s.Close()
		delete(m.stores, k)
	}
}

// The engine asks for the stores of the current record's task, and
// StoreSpecs lists the declared stores, each with the one topic whose
// partitions are its tasks.
func TestStoresOfTheRecordsTask(t *testing.T) {
	top := topology.New()
	a := topology.Source(top, "ta", codec.String(), topology.Named("a"))
	b := topology.Source(top, "tb", codec.String(), topology.Named("b"))
	top.AddStore("notes", pebble.New())
	noted := topology.Process(b, "note", func(ctx processor.Context[string], r processor.Record[string]) error {
		s, err := ctx.Store("notes")
		if err != nil {
			return err
		}
		ctx.Emit(r)
		return s.Put(r.Key, []byte(r.Value))
	}, topology.UseStores("notes"))
	topology.To(noted, "out-b", codec.String())
	counts := topology.Count(topology.GroupByKey(a, "g"), "counts", state.Memory())
	topology.ToTable(counts, "out-a", codec.JSON[int64]())

	m := newMemStores(t)
	e, err := engine.New(top, engine.Stores(m.get))
	if err != nil {
		t.Fatal(err)
	}
	var specs []string
	for _, s := range e.StoreSpecs() {
		specs = append(specs, fmt.Sprintf("%s:%s:%s", s.Name, s.Engine, s.Source))
	}
	if want := []string{"notes:pebble:tb", "counts:memory:ta"}; !slices.Equal(specs, want) {
		t.Fatalf("StoreSpecs: %v, want %v", specs, want)
	}
	for _, r := range []*kgo.Record{
		{Topic: "ta", Partition: 2, Key: []byte("k")},
		{Topic: "tb", Partition: 5, Key: []byte("k"), Value: []byte("v")},
		{Topic: "ta", Partition: 0, Key: []byte("k")},
	} {
		if got, err := e.Process(context.Background(), r, func(*kgo.Record) {}); got != engine.Processed || err != nil {
			t.Fatalf("%v: %v", got, err)
		}
	}
	if want := []string{"counts@ta/2", "notes@tb/5", "counts@ta/0"}; !slices.Equal(m.asked, want) {
		t.Fatalf("stores asked for: %v, want %v", m.asked, want)
	}
}

// Without a store provider, an aggregation fails the batch with an error
// saying so, whatever its policy; once the record's context has ended the
// record is interrupted instead (a revoke may have closed the store).
func TestStoresMissing(t *testing.T) {
	top := topology.New()
	in := topology.Source(top, "in", codec.String())
	counts := topology.Count(topology.GroupByKey(in, "g"), "counts", state.Memory())
	topology.ToTable(counts, "out", codec.JSON[int64]())
	top.OnError("counts", topology.Skip())
	e, err := engine.New(top)
	if err != nil {
		t.Fatal(err)
	}
	r := &kgo.Record{Topic: "in", Key: []byte("k")}
	got, err := e.Process(context.Background(), r, func(*kgo.Record) {})
	if got != engine.Failed || !strings.Contains(fmt.Sprint(err), `node "counts": store "counts": this engine has no stores`) {
		t.Fatalf("outcome %v, error %v", got, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if got, err := e.Process(ctx, r, func(*kgo.Record) {}); got != engine.Interrupted || err != nil {
		t.Fatalf("after the context ended: outcome %v, error %v; want Interrupted", got, err)
	}
}

// processor.KV reuses its view of a task's store from record to record,
// makes a new one when the runtime reopened the store (a reassignment),
// and never hands out a view made with other codecs.
func TestKVViews(t *testing.T) {
	funcCodec := codec.Func[int64]{
		EncodeFunc: func(v int64) ([]byte, error) { return []byte(fmt.Sprint(v)), nil },
		DecodeFunc: func(b []byte) (v int64, err error) { _, err = fmt.Sscan(string(b), &v); return v, err },
	}
	// wrapped's type can be compared, but not its values: its field
	// holds a codec.Func.
	type wrapped struct{ codec.Codec[int64] }
	type views struct{ json, fn, json2, w1, w2 *state.KV[string, int64] }
	var seen []views
	top := topology.New()
	in := topology.Source(top, "in", codec.String())
	top.AddStore("s", state.Memory()).AddStore("w", state.Memory())
	out := topology.Process(in, "p", func(ctx processor.Context[string], r processor.Record[string]) error {
		var v views
		var err error
		if v.json, err = processor.KV(ctx, "s", state.StringKey(), codec.JSON[int64]()); err != nil {
			return err
		}
		if v.fn, err = processor.KV(ctx, "s", state.StringKey(), codec.Codec[int64](funcCodec)); err != nil {
			return err
		}
		if v.json2, err = processor.KV(ctx, "s", state.StringKey(), codec.JSON[int64]()); err != nil {
			return err
		}
		if v.w1, err = processor.KV(ctx, "w", state.StringKey(), codec.Codec[int64](wrapped{funcCodec})); err != nil {
			return err
		}
		if v.w2, err = processor.KV(ctx, "w", state.StringKey(), codec.Codec[int64](wrapped{funcCodec})); err != nil {
			return err
		}
		seen = append(seen, v)
		return v.json.Put(r.Value, 1)
	}, topology.UseStores("s", "w"))
	topology.To(out, "out", codec.String())
	m := newMemStores(t)
	e, err := engine.New(top, engine.Stores(m.get))
	if err != nil {
		t.Fatal(err)
	}
	send := func() {
		t.Helper()
		if got, err := e.Process(context.Background(), &kgo.Record{Topic: "in", Value: []byte("x")}, func(*kgo.Record) {}); got != engine.Processed || err != nil {
			t.Fatalf("%v: %v", got, err)
		}
	}
	send()
	send()
	m.reassign()
	send()
	if seen[0].json == seen[0].fn || seen[0].fn == seen[1].fn || seen[0].w1 == seen[0].w2 {
		t.Fatal("a view made with other codecs was reused")
	}
	if seen[0].json2 != seen[0].json || seen[1].json != seen[0].json || seen[1].json2 != seen[0].json {
		t.Fatal("views are not reused while store and codecs stay the same")
	}
	if seen[2].json == seen[1].json || seen[2].json.Store() == seen[1].json.Store() {
		t.Fatal("a view of a closed store was reused after the store was reopened")
	}
	if _, ok, err := seen[2].json.Get("x"); !ok || err != nil {
		t.Fatalf("the new view does not see the write: %v %v", ok, err)
	}
}

// A store error that user code returns is the node's error, so its
// policy applies.
func TestProcessStoreErrorUnderPolicy(t *testing.T) {
	top := topology.New()
	in := topology.Source(top, "in", codec.String())
	top.AddStore("s", state.Memory())
	out := topology.Process(in, "p", func(ctx processor.Context[string], r processor.Record[string]) error {
		_, err := ctx.Store("s")
		return err
	}, topology.UseStores("s"))
	topology.To(out, "out", codec.String())
	top.OnError("p", topology.DeadLetter("dlq"))
	e, err := engine.New(top, engine.Stores(func(string, state.Task) (*store.Store, error) { return nil, errors.New("no disk") }))
	if err != nil {
		t.Fatal(err)
	}
	var dl []*kgo.Record
	got, err := e.Process(context.Background(), &kgo.Record{Topic: "in"}, func(r *kgo.Record) { dl = append(dl, r) })
	if got != engine.DeadLettered || err != nil || len(dl) != 1 {
		t.Fatalf("outcome %v error %v outputs %d", got, err, len(dl))
	}
	d, _ := processor.ParseDeadLetter(dl[0].Headers)
	if d.Node != "p" || d.Error != "no disk" {
		t.Fatalf("dead letter %+v", d)
	}
}
