package topology_test

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
	"github.com/eosflow/eosflow/state/pebble"
	"github.com/eosflow/eosflow/topology"
	"github.com/twmb/franz-go/pkg/kgo"
)

// rig runs records through a topology on one engine whose stores are
// opened per store and task with the engine the topology declares, in a
// temporary directory, as the runtime would open them on assignment.
type rig struct {
	t      *testing.T
	e      *engine.Engine
	stores map[string]*store.Store // by store and task
	opened []string                // store@task, in the order opened
	offset int64                   // the next changelog offset, shared for simplicity
	ts     time.Time               // the timestamp of the records sent
}

func newRig(t *testing.T, top *topology.Topology, opts ...engine.Option) *rig {
	t.Helper()
	r := &rig{t: t, stores: map[string]*store.Store{}}
	dir := t.TempDir()
	provide := func(name string, task state.Task) (*store.Store, error) {
		key := name + "@" + task.String()
		if s := r.stores[key]; s != nil {
			return s, nil
		}
		for _, spec := range r.e.StoreSpecs() {
			if spec.Name != name {
				continue
			}
			if spec.Source != task.Topic {
				return nil, fmt.Errorf("store %q: task %s is not a partition of its source %q", name, task, spec.Source)
			}
			s, err := store.Open(spec.Engine, dir, name, task)
			if err != nil {
				return nil, err
			}
			t.Cleanup(func() { _ = s.Close() })
			r.stores[key] = s
			r.opened = append(r.opened, key)
			return s, nil
		}
		return nil, fmt.Errorf("store %q is not declared", name)
	}
	opts = append([]engine.Option{
		engine.AppID(rigApp),
		engine.Sleep(func(context.Context, time.Duration) error { return nil }),
		engine.Stores(provide),
	}, opts...)
	e, err := engine.New(top, opts...)
	if err != nil {
		t.Fatalf("engine.New: %v", err)
	}
	r.e = e
	return r
}

// rigApp is the application id of a rig.
const rigApp = "app"

// rigPartitions is the partition count of every repartition topic in a
// rig.
const rigPartitions = 2

// send processes one record and returns its outcome and its outputs as
// "topic:key=value". Outputs to a repartition topic are not returned but
// processed next, from the partition Kafka's partitioner gives their
// keys, as the runtime reads them back after a commit.
func (r *rig) send(topic string, partition int32, key, value string) (engine.Outcome, []string, error) {
	r.t.Helper()
	var k []byte
	if key != "" {
		k = []byte(key)
	}
	var out []string
	var again []*kgo.Record
	got, err := r.e.Process(context.Background(), &kgo.Record{Topic: topic, Partition: partition, Key: k, Value: []byte(value), Timestamp: r.ts}, func(o *kgo.Record) {
		if strings.HasPrefix(o.Topic, rigApp+"-") && strings.HasSuffix(o.Topic, "-repartition") {
			again = append(again, o)
			return
		}
		out = append(out, fmt.Sprintf("%s:%s=%s", o.Topic, o.Key, o.Value))
	})
	for _, o := range again {
		if err != nil {
			break
		}
		var more []string
		got, more, err = r.send(o.Topic, repartitionOf(o.Key), string(o.Key), string(o.Value))
		out = append(out, more...)
	}
	return got, out, err
}

// repartitionOf is the partition of key in a repartition topic of the rig.
func repartitionOf(key []byte) int32 {
	return int32(kgo.StickyKeyPartitioner(nil).ForTopic("").Partition(&kgo.Record{Key: key}, rigPartitions))
}

// must processes one record that must succeed.
func (r *rig) must(topic string, partition int32, key, value string) []string {
	r.t.Helper()
	got, out, err := r.send(topic, partition, key, value)
	if err != nil || got != engine.Processed {
		r.t.Fatalf("%s/%d %s=%s: outcome %v, error %v", topic, partition, key, value, got, err)
	}
	return out
}

// commit does what the runtime does after End reports a commit: each
// store's changes get changelog offsets and go to its engine.
func (r *rig) commit() {
	r.t.Helper()
	for _, key := range r.opened {
		s := r.stores[key]
		if n := len(s.Changes()); n > 0 {
			r.offset += int64(n)
			if err := s.Commit(r.offset - 1); err != nil {
				r.t.Fatal(err)
			}
		}
	}
}

// abort does what the runtime does on every abort path.
func (r *rig) abort() {
	for _, s := range r.stores {
		s.Abort()
	}
}

// get reads key from store name of topic/partition, as the batch sees it.
func (r *rig) get(name, topic string, partition int32, key string) (string, bool) {
	r.t.Helper()
	s := r.stores[name+"@"+state.Task{Topic: topic, Partition: partition}.String()]
	if s == nil {
		return "", false
	}
	v, ok, err := s.Get([]byte(key))
	if err != nil {
		r.t.Fatal(err)
	}
	return string(v), ok
}

func splitWords(_ context.Context, _ []byte, line string) ([]topology.KV[string], error) {
	var out []topology.KV[string]
	for _, w := range strings.Fields(line) {
		out = append(out, topology.KV[string]{Key: []byte(w), Value: w})
	}
	return out, nil
}

func wordCount(engine state.Engine) *topology.Topology {
	top := topology.New()
	lines := topology.Source(top, "lines", codec.String(), topology.Named("in"))
	words := topology.FlatMap(lines, "split", splitWords)
	counts := topology.Count(topology.GroupByKey(words, "by-word", topology.Repartition(codec.String())), "counts", engine)
	topology.To(topology.ToStream(counts, "count-updates"), "word-counts", codec.JSON[int64](), topology.Named("out"))
	return top
}

// wordTask is the task that counts word: the partition of the repartition
// topic that its key hashes to.
func wordTask(word string) (string, int32) {
	return topology.RepartitionTopic(rigApp, "by-word"), repartitionOf([]byte(word))
}

// Count keeps one count per key: after a re-key (FlatMap) the words of
// every input partition go through the repartition topic to the task
// that owns the word; a commit keeps the counts and an abort drops the
// batch's.
func TestCountPerKeyAndTask(t *testing.T) {
	for _, eng := range []state.Engine{state.Memory(), pebble.New()} {
		t.Run(eng.String(), func(t *testing.T) {
			r := newRig(t, wordCount(eng))
			if got, want := r.must("lines", 0, "", "to be or not to be"), []string{
				"word-counts:to=1", "word-counts:be=1", "word-counts:or=1", "word-counts:not=1", "word-counts:to=2", "word-counts:be=2",
			}; !slices.Equal(got, want) {
				t.Fatalf("first line: %v, want %v", got, want)
			}
			if got, want := r.must("lines", 1, "", "to do"), []string{"word-counts:to=3", "word-counts:do=1"}; !slices.Equal(got, want) {
				t.Fatalf("a word from another input partition counts on: %v, want %v", got, want)
			}
			r.commit()
			if got, want := r.must("lines", 0, "", "to"), []string{"word-counts:to=4"}; !slices.Equal(got, want) {
				t.Fatalf("after commit: %v, want %v", got, want)
			}
			r.abort()
			if got, want := r.must("lines", 1, "", "to"), []string{"word-counts:to=4"}; !slices.Equal(got, want) {
				t.Fatalf("after abort the batch is redone from the committed count: %v, want %v", got, want)
			}
			if got := r.must("lines", 0, "", "do"); !slices.Equal(got, []string{"word-counts:do=2"}) {
				t.Fatalf("do: %v", got)
			}
			// Counts are 8 big-endian bytes in the store, as Kafka's
			// LongSerializer writes them, in the task that owns the word.
			topic, part := wordTask("be")
			if v, ok := r.get("counts", topic, part, "be"); !ok || v != "\x00\x00\x00\x00\x00\x00\x00\x02" {
				t.Fatalf("stored count of be: %q %v", v, ok)
			}
			if _, ok := r.get("counts", topic, 1-part, "be"); ok {
				t.Fatal("be is counted in a second task")
			}
			if got, want := r.e.StoreSpecs(), 1; len(got) != want || got[0].Name != "counts" || got[0].Source != topic || got[0].Engine != eng {
				t.Fatalf("StoreSpecs: %+v", got)
			}
		})
	}
}

// Reduce keeps a key's first value and combines later ones; Aggregate
// starts each key from init. Both emit every record's new aggregate,
// keyed, and ToTable writes them to a topic.
func TestReduceAndAggregate(t *testing.T) {
	top := topology.New()
	in := topology.Source(top, "amounts", codec.JSON[int](), topology.Named("in"))
	g := topology.GroupByKey(in, "by-account")
	maxes := topology.Reduce(g, "max", func(_ context.Context, acc, v int) (int, error) { return max(acc, v), nil }, state.Memory(), codec.JSON[int]())
	topology.ToTable(maxes, "max", codec.JSON[int](), topology.Named("max-out"))
	type stats struct{ N, Sum int }
	sums := topology.Aggregate(g, "stats", func() stats { return stats{} },
		func(_ context.Context, key []byte, v int, acc stats) (stats, error) {
			if string(key) == "" {
				return acc, errors.New("empty key")
			}
			return stats{acc.N + 1, acc.Sum + v}, nil
		}, state.Memory(), codec.JSON[stats]())
	topology.ToTable(sums, "stats", codec.JSON[stats](), topology.Named("stats-out"))
	r := newRig(t, top)
	var got []string
	for _, rec := range []struct{ key, v string }{{"a", "5"}, {"b", "1"}, {"a", "3"}, {"a", "9"}} {
		got = append(got, r.must("amounts", 0, rec.key, rec.v)...)
	}
	want := []string{
		`max:a=5`, `stats:a={"N":1,"Sum":5}`,
		`max:b=1`, `stats:b={"N":1,"Sum":1}`,
		`max:a=5`, `stats:a={"N":2,"Sum":8}`,
		`max:a=9`, `stats:a={"N":3,"Sum":17}`,
	}
	if !slices.Equal(got, want) {
		t.Fatalf("updates:\n%v\nwant\n%v", got, want)
	}
	if v, _ := r.get("stats", "amounts", 0, "a"); v != `{"N":3,"Sum":17}` {
		t.Fatalf("stored aggregate: %s", v)
	}
}

// A Process node connected to a store reads and writes it through
// processor.KV: here it passes on only the first record of each key.
func TestProcessWithStore(t *testing.T) {
	top := topology.New()
	in := topology.Source(top, "events", codec.String(), topology.Named("in"))
	top.AddStore("seen", state.Memory())
	var views []*state.KV[string, int64]
	firsts := topology.Process(in, "first", func(ctx processor.Context[string], r processor.Record[string]) error {
		seen, err := processor.KV(ctx, "seen", state.StringKey(), codec.JSON[int64]())
		if err != nil {
			return err
		}
		views = append(views, seen)
		n, ok, err := seen.Get(string(r.Key))
		if err != nil {
			return err
		}
		if err := seen.Put(string(r.Key), n+1); err != nil {
			return err
		}
		if !ok {
			ctx.Emit(r)
		}
		return nil
	}, topology.UseStores("seen"))
	topology.To(firsts, "firsts", codec.String(), topology.Named("out"))
	r := newRig(t, top)
	var got []string
	for _, k := range []string{"x", "y", "x", "x"} {
		got = append(got, r.must("events", 0, k, "v-"+k)...)
	}
	got = append(got, r.must("events", 3, "x", "other-task")...)
	if want := []string{"firsts:x=v-x", "firsts:y=v-y", "firsts:x=other-task"}; !slices.Equal(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	if v, _ := r.get("seen", "events", 0, "x"); v != "3" {
		t.Fatalf("seen count of x in task 0: %q", v)
	}
	// One typed view per task's store, reused across records.
	if views[0] != views[1] || views[0] != views[3] || views[4] == views[0] || views[4].Store().Task().Partition != 3 {
		t.Fatal("processor.KV did not reuse the view of a task's store, or reused it for another task")
	}
}

// A node may use only the stores connected to it; the error names the
// node and its stores, and goes to the node's policy.
func TestStoreNotConnected(t *testing.T) {
	top := topology.New()
	in := topology.Source(top, "events", codec.String(), topology.Named("in"))
	top.AddStore("mine", state.Memory()).AddStore("theirs", state.Memory())
	var last error
	use := func(ctx processor.Context[string], r processor.Record[string]) error {
		if _, err := ctx.Store(r.Value); err != nil {
			last = err
			return err
		}
		ctx.Emit(r)
		return nil
	}
	a := topology.Process(in, "a", use, topology.UseStores("mine"))
	b := topology.Process(in, "b", use, topology.UseStores("theirs"))
	c := topology.Process(in, "c", use)
	topology.To(topology.Merge("m", a, b, c), "out", codec.String())
	r := newRig(t, top)
	_, _, err := r.send("events", 0, "k", "theirs")
	if !errors.Is(err, processor.ErrStoreNotConnected) {
		t.Fatalf("want ErrStoreNotConnected, got %v", err)
	}
	for _, want := range []string{`node "a"`, `store "theirs"`, "uses only [mine]", `UseStores("theirs")`} {
		if !strings.Contains(err.Error(), want) {
			t.Fatalf("error %q does not say %q", err, want)
		}
	}
	var ne *topology.NodeError
	if !errors.As(err, &ne) || ne.Node != "a" {
		t.Fatalf("want a NodeError of node a, got %v", err)
	}

	// A node without stores says so, and its policy applies.
	top2 := topology.New()
	in2 := topology.Source(top2, "events", codec.String(), topology.Named("in"))
	top2.AddStore("mine", state.Memory())
	topology.To(topology.Process(in2, "user", use, topology.UseStores("mine")), "out", codec.String())
	topology.To(topology.Process(in2, "c", use), "out2", codec.String())
	top2.OnError("c", topology.DeadLetter("dlq"))
	r2 := newRig(t, top2)
	got, out, err := r2.send("events", 0, "k", "mine")
	if err != nil || got != engine.DeadLettered || len(out) != 1 || !strings.HasPrefix(out[0], "dlq:") {
		t.Fatalf("outcome %v, outputs %v, error %v; want the record dead-lettered by c", got, out, err)
	}
	if want := `store "mine": node "c" has no stores; connect it with topology.UseStores("mine")`; !strings.Contains(fmt.Sprint(last), want) {
		t.Fatalf("error %q does not say %q", last, want)
	}
}

// A record without a key has no aggregate: an error of the aggregation,
// under its policy, without retries.
func TestAggregationNeedsKey(t *testing.T) {
	var calls int
	build := func(p topology.ErrorPolicy) *topology.Topology {
		top := topology.New()
		in := topology.Source(top, "in", codec.String())
		g := topology.GroupByKey(in, "g")
		red := topology.Reduce(g, "r", func(_ context.Context, a, b string) (string, error) { calls++; return a + b, nil }, state.Memory(), codec.String())
		topology.ToTable(red, "out", codec.String())
		top.OnError("r", p)
		return top
	}
	_, _, err := newRig(t, build(topology.Retry(3, time.Millisecond, topology.Fail()))).send("in", 0, "", "v")
	var ne *topology.NodeError
	if !errors.Is(err, topology.ErrNoKey) || !errors.As(err, &ne) || ne.Node != "r" || !strings.Contains(err.Error(), "Skip() drops them") {
		t.Fatalf("want ErrNoKey from node r, got %v", err)
	}
	r := newRig(t, build(topology.Skip()))
	if got, out, err := r.send("in", 0, "", "v"); got != engine.Skipped || err != nil || len(out) != 0 {
		t.Fatalf("Skip: outcome %v outputs %v error %v", got, out, err)
	}
	if got := r.must("in", 0, "k", "v"); !slices.Equal(got, []string{"out:k=v"}) || calls != 0 {
		t.Fatalf("keyed record: %v, reduce calls %d", got, calls)
	}
}

// A value the store's codec cannot encode or decode is an error of the
// aggregation, handled by its policy; a failing function is retried.
func TestAggregationCodecAndPolicy(t *testing.T) {
	strict := codec.Func[string]{
		EncodeFunc: func(v string) ([]byte, error) {
			if v == "bad" {
				return nil, errors.New("refusing bad")
			}
			return []byte(v), nil
		},
		DecodeFunc: func(b []byte) (string, error) {
			if string(b) == "garbage" {
				return "", errors.New("cannot read garbage")
			}
			return string(b), nil
		},
	}
	var attempts int
	top := topology.New()
	in := topology.Source(top, "in", codec.String())
	red := topology.Reduce(topology.GroupByKey(in, "g"), "last", func(_ context.Context, _, v string) (string, error) {
		if v == "flaky" {
			if attempts++; attempts < 3 {
				return "", errors.New("flaky")
			}
		}
		return v, nil
	}, state.Memory(), strict)
	topology.ToTable(red, "out", codec.String())
	top.OnError("last", topology.Retry(5, time.Millisecond, topology.DeadLetter("dlq")))
	r := newRig(t, top)

	got, out, err := r.send("in", 0, "k", "bad")
	if err != nil || got != engine.DeadLettered || !slices.Equal(out, []string{"dlq:k=bad"}) {
		t.Fatalf("encode failure: outcome %v outputs %v error %v", got, out, err)
	}
	if _, ok := r.get("last", "in", 0, "k"); ok {
		t.Fatal("a value that did not encode was stored")
	}
	r.must("in", 0, "k", "garbage") // first value: stored as is
	got, out, err = r.send("in", 0, "k", "next")
	if err != nil || got != engine.DeadLettered || len(out) != 1 {
		t.Fatalf("decode failure: outcome %v outputs %v error %v", got, out, err)
	}
	r.must("in", 0, "k2", "first")
	if got := r.must("in", 0, "k2", "flaky"); !slices.Equal(got, []string{"out:k2=flaky"}) || attempts != 3 {
		t.Fatalf("retried function: %v after %d attempts", got, attempts)
	}

	// Without a dead-letter policy, the error names the store, task, key
	// and operation, and matches state.ErrCodec.
	top.OnError("last", topology.Fail())
	r2 := newRig(t, top)
	_, _, err = r2.send("in", 1, "k", "bad")
	var ce *state.CodecError
	if !errors.Is(err, state.ErrCodec) || !errors.As(err, &ce) || ce.Store != "last" || ce.Op != "encode value" || ce.Task.Partition != 1 || ce.Key != `"k"` {
		t.Fatalf("want a CodecError, got %v", err)
	}
}

// A store that fails is not the record's fault: the batch fails whatever
// the policy says.
func TestAggregationStoreFailureFailsBatch(t *testing.T) {
	top := wordCount(state.Memory())
	top.OnError("counts", topology.Skip())
	e, err := engine.New(top, engine.Stores(func(name string, task state.Task) (*store.Store, error) {
		return nil, errors.New("disk on fire")
	}))
	if err != nil {
		t.Fatal(err)
	}
	got, err := e.Process(context.Background(), &kgo.Record{Topic: topology.RepartitionTopic(topology.AppIDPlaceholder, "by-word"), Key: []byte("a"), Value: []byte("a")}, func(*kgo.Record) {})
	var ne *topology.NodeError
	if got != engine.Failed || !strings.Contains(fmt.Sprint(err), "disk on fire") || !strings.Contains(fmt.Sprint(err), `node "counts"`) || errors.As(err, &ne) {
		t.Fatalf("outcome %v, error %v; want Failed, not a NodeError", got, err)
	}
}

// Validate reports every mistake in declaring and using stores, naming
// the node (or none, for the topology) and saying what to change.
func TestValidateStores(t *testing.T) {
	keep := func(ctx processor.Context[string], r processor.Record[string]) error { ctx.Emit(r); return nil }
	cases := []struct {
		name  string
		build func(top *topology.Topology, in topology.Stream[string]) topology.Stream[string]
		node  string
		want  string
	}{
		{"unknown store", func(top *topology.Topology, in topology.Stream[string]) topology.Stream[string] {
			top.AddStore("known", state.Memory())
			return topology.Process(in, "p", keep, topology.UseStores("known", "unknown"))
		}, "p", `uses store "unknown", which is not declared; declare it with AddStore (declared stores: [known])`},
		{"duplicate store", func(top *topology.Topology, in topology.Stream[string]) topology.Stream[string] {
			top.AddStore("s", state.Memory()).AddStore("s", pebble.New())
			return topology.Process(in, "p", keep, topology.UseStores("s"))
		}, "", `duplicate store name "s" (already declared by AddStore)`},
		{"store named like an aggregation", func(top *topology.Topology, in topology.Stream[string]) topology.Stream[string] {
			top.AddStore("counts", state.Memory())
			p := topology.Process(in, "p", keep, topology.UseStores("counts"))
			c := topology.Count(topology.GroupByKey(p, "g"), "counts", state.Memory())
			return topology.MapValues(topology.ToStream(c, "ts"), "str", func(_ context.Context, n int64) (string, error) { return fmt.Sprint(n), nil })
		}, "counts", `duplicate store name "counts" (already declared by AddStore)`},
		{"unused store", func(top *topology.Topology, in topology.Stream[string]) topology.Stream[string] {
			top.AddStore("lonely", state.Memory())
			return in
		}, "", `store "lonely" is declared but no node uses it; connect it with topology.UseStores("lonely") or remove it`},
		{"store name with a slash", func(top *topology.Topology, in topology.Stream[string]) topology.Stream[string] {
			top.AddStore("a/b", state.Memory())
			return topology.Process(in, "p", keep, topology.UseStores("a/b"))
		}, "", `store name "a/b" has '/', which Kafka does not allow in the changelog topic's name; use only [a-zA-Z0-9._-]`},
		{"aggregation named with a space", func(top *topology.Topology, in topology.Stream[string]) topology.Stream[string] {
			c := topology.Count(topology.GroupByKey(in, "g"), "word counts", state.Memory())
			return topology.MapValues(topology.ToStream(c, "ts"), "str", func(_ context.Context, n int64) (string, error) { return fmt.Sprint(n), nil })
		}, "word counts", `store name "word counts" has ' '`},
		{"empty store name", func(top *topology.Topology, in topology.Stream[string]) topology.Stream[string] {
			top.AddStore("", state.Memory())
			return topology.Process(in, "p", keep, topology.UseStores(""))
		}, "", `store name "" is not valid`},
		{"store name too long", func(top *topology.Topology, in topology.Stream[string]) topology.Stream[string] {
			long := strings.Repeat("s", 238)
			top.AddStore(long, state.Memory())
			return topology.Process(in, "p", keep, topology.UseStores(long))
		}, "", `use 1 to 237 of [a-zA-Z0-9._-]`},
		{"nil engine", func(top *topology.Topology, in topology.Stream[string]) topology.Stream[string] {
			c := topology.Count(topology.GroupByKey(in, "g"), "c", nil)
			return topology.MapValues(topology.ToStream(c, "ts"), "str", func(_ context.Context, n int64) (string, error) { return fmt.Sprint(n), nil })
		}, "c", `store "c" has a nil engine; pass state.Memory() or pebble.New() (package state/pebble)`},
		{"nil reduce function", func(top *topology.Topology, in topology.Stream[string]) topology.Stream[string] {
			return topology.ToStream(topology.Reduce(topology.GroupByKey(in, "g"), "r", nil, state.Memory(), codec.String()), "ts")
		}, "r", "Reduce has a nil function"},
		{"nil aggregate codec", func(top *topology.Topology, in topology.Stream[string]) topology.Stream[string] {
			return topology.ToStream(topology.Reduce(topology.GroupByKey(in, "g"), "r",
				func(_ context.Context, a, b string) (string, error) { return a + b, nil }, state.Memory(), nil), "ts")
		}, "r", "Reduce has no codec for its store's values"},
		{"grouped stream not aggregated", func(top *topology.Topology, in topology.Stream[string]) topology.Stream[string] {
			topology.GroupByKey(in, "g")
			return in
		}, "g", "GroupByKey output goes nowhere; aggregate it with Count, Reduce or Aggregate"},
		{"table not written", func(top *topology.Topology, in topology.Stream[string]) topology.Stream[string] {
			topology.Count(topology.GroupByKey(in, "g"), "c", state.Memory())
			return in
		}, "c", "Count output goes nowhere; write its updates with ToTable, or turn them into a stream with ToStream"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			top := topology.New()
			in := topology.Source(top, "t", codec.String(), topology.Named("in"))
			topology.To(tc.build(top, in), "out", codec.String(), topology.Named("sink"))
			err := top.Validate()
			if !errors.Is(err, topology.ErrInvalid) {
				t.Fatalf("want ErrInvalid, got %v", err)
			}
			var found bool
			for _, e := range err.(interface{ Unwrap() []error }).Unwrap() {
				var ve *topology.ValidationError
				if errors.As(e, &ve) && ve.Node == tc.node && strings.Contains(ve.Problem, tc.want) {
					found = true
				}
			}
			if !found {
				t.Fatalf("want a problem at node %q containing %q, got:\n%v", tc.node, tc.want, err)
			}
		})
	}

	// A store used by several nodes of one input topic is fine, and so is
	// a topic written and read back to feed one store from two inputs.
	top := topology.New()
	a := topology.Source(top, "ta", codec.String(), topology.Named("a"))
	b := topology.Source(top, "tb", codec.String(), topology.Named("b"))
	topology.To(topology.Merge("m", a, b), "both", codec.String(), topology.Named("to-both"))
	both := topology.Source(top, "both", codec.String())
	top.AddStore("s", state.Memory())
	x := topology.Process(both, "x", keep, topology.UseStores("s"))
	y := topology.Process(x, "y", keep, topology.UseStores("s", "s"))
	topology.To(y, "out", codec.String())
	if err := top.Validate(); err != nil {
		t.Fatal(err)
	}
	if got := y.Node().Stores(); !slices.Equal(got, []string{"s"}) {
		t.Fatalf("Stores of y: %v", got)
	}
}

// sendTombstone processes a record of key with a nil value.
func (r *rig) sendTombstone(topic string, partition int32, key string) (engine.Outcome, []string, error) {
	r.t.Helper()
	var out []string
	got, err := r.e.Process(context.Background(), &kgo.Record{Topic: topic, Partition: partition, Key: []byte(key), Timestamp: r.ts}, func(o *kgo.Record) {
		out = append(out, fmt.Sprintf("%s:%s=%s", o.Topic, o.Key, o.Value))
	})
	return got, out, err
}
