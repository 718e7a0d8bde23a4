package topology_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/eosflow/eosflow/codec"
	"github.com/eosflow/eosflow/internal/engine"
	"github.com/eosflow/eosflow/processor"
	"github.com/eosflow/eosflow/topology"
	"github.com/twmb/franz-go/pkg/kgo"
)

// result is what one record made: its outputs and the retries it took.
type result struct {
	out     []*kgo.Record
	retries uint64
}

// run passes one record through top on the engine the runtime uses.
func run(t *testing.T, top *topology.Topology, topic string, key, value string) (*result, error) {
	t.Helper()
	e, err := engine.New(top, engine.Sleep(func(context.Context, time.Duration) error { return nil }),
		engine.Partitions(func(string) (int32, error) { return 4, nil }))
	if err != nil {
		t.Fatalf("engine.New: %v", err)
	}
	x := &result{}
	_, err = e.Process(context.Background(), &kgo.Record{Topic: topic, Key: []byte(key), Value: []byte(value), Timestamp: time.Unix(1, 0), Partition: 2, Offset: 7},
		func(r *kgo.Record) { x.out = append(x.out, r) })
	x.retries = e.Take().Retries
	var re *processor.RecordError
	if errors.As(err, &re) {
		err = re.Err
	}
	return x, err
}

func outputs(x *result) []string {
	var s []string
	for _, o := range x.out {
		s = append(s, fmt.Sprintf("%s:%s=%s", o.Topic, o.Key, o.Value))
	}
	return s
}

func TestOperators(t *testing.T) {
	top := topology.New()
	in := topology.Source(top, "words", codec.String(), topology.Named("in"))
	upper := topology.MapValues(in, "upper", func(_ context.Context, v string) (string, error) { return strings.ToUpper(v), nil })
	long := topology.Filter(upper, "long", func(_ []byte, v string) bool { return len(v) > 2 })
	split := topology.FlatMap(long, "letters", func(_ context.Context, k []byte, v string) ([]topology.KV[string], error) {
		var out []topology.KV[string]
		for _, r := range v[:2] {
			out = append(out, topology.KV[string]{Key: k, Value: string(r)})
		}
		return out, nil
	})
	rekey := topology.Map(split, "rekey", func(_ context.Context, k []byte, v string) ([]byte, int, error) { return []byte(v), len(k), nil })
	var peeked int
	peek := topology.Peek(rekey, "peek", func(context.Context, []byte, int) { peeked++ })
	branches := topology.Branch(peek, "route",
		func(k []byte, _ int) bool { return string(k) == "H" },
		func([]byte, int) bool { return true })
	merged := topology.Merge("merge", branches[0], branches[1])
	withMeta := topology.Process(merged, "meta", func(ctx processor.Context[string], r topology.Record[int]) error {
		ctx.Emit(topology.Record[string]{Key: r.Key, Value: fmt.Sprintf("%d@%s/%d/%d", r.Value, r.Topic, r.Partition, r.Offset)})
		return nil
	})
	topology.To(withMeta, "letters-out", codec.String(), topology.Named("out"))
	topology.ToTopicFunc(branches[0], "by-key", func(_ context.Context, r topology.Record[int]) (string, error) { return "key-" + string(r.Key), nil }, codec.JSON[int]())

	x, err := run(t, top, "words", "k1", "hello")
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Join(outputs(x), " ")
	want := "letters-out:H=2@words/2/7 key-H:H=2 letters-out:E=2@words/2/7"
	if got != want {
		t.Fatalf("outputs\n got %s\nwant %s", got, want)
	}
	if peeked != 2 {
		t.Fatalf("peek saw %d records, want 2", peeked)
	}
	x, err = run(t, top, "words", "k1", "hi")
	if err != nil || len(x.out) != 0 {
		t.Fatalf("filter should drop short words: %v %v", outputs(x), err)
	}
}

func TestNodeErrorsAndRetry(t *testing.T) {
	calls := 0
	top := topology.New()
	in := topology.Source(top, "t", codec.JSON[int](), topology.Named("in"))
	flaky := topology.MapValues(in, "flaky", func(_ context.Context, v int) (int, error) {
		calls++
		if calls < 3 {
			return 0, errors.New("transient")
		}
		return v * 2, nil
	})
	topology.To(flaky, "o", codec.JSON[int](), topology.Named("out"))
	top.OnError("flaky", topology.Retry(3, time.Millisecond, topology.Fail()))

	x, err := run(t, top, "t", "k", "21")
	if err != nil {
		t.Fatalf("third call should succeed: %v", err)
	}
	if calls != 3 || x.retries != 2 || string(x.out[0].Value) != "42" {
		t.Fatalf("calls=%d retries=%d out=%v", calls, x.retries, outputs(x))
	}

	_, err = run(t, top, "t", "k", "not json")
	var ne *topology.NodeError
	if !errors.As(err, &ne) || ne.Node != "in" {
		t.Fatalf("decode failure should be a NodeError at the source, got %v", err)
	}
}

func TestValidate(t *testing.T) {
	okSink := func(s topology.Stream[string]) { topology.To(s, "out", codec.String(), topology.Named("sink")) }
	cases := []struct {
		name  string
		build func() *topology.Topology
		node  string
		want  string
	}{
		{"no source", func() *topology.Topology { return topology.New() }, "", "has no source"},
		{"no sink", func() *topology.Topology {
			top := topology.New()
			topology.Source(top, "t", codec.String(), topology.Named("in"))
			return top
		}, "", "has no sink"},
		{"dangling operator", func() *topology.Topology {
			top := topology.New()
			in := topology.Source(top, "t", codec.String(), topology.Named("in"))
			okSink(in)
			topology.Filter(in, "lost", func([]byte, string) bool { return true })
			return top
		}, "lost", "goes nowhere"},
		{"duplicate name", func() *topology.Topology {
			top := topology.New()
			in := topology.Source(top, "t", codec.String(), topology.Named("in"))
			okSink(topology.MapValues(in, "in", func(_ context.Context, s string) (string, error) { return s, nil }))
			return top
		}, "in", "duplicate node name"},
		{"missing codec", func() *topology.Topology {
			top := topology.New()
			in := topology.Source[string](top, "t", nil, topology.Named("in"))
			okSink(in)
			return top
		}, "in", "no codec"},
		{"missing sink codec", func() *topology.Topology {
			top := topology.New()
			in := topology.Source(top, "t", codec.String(), topology.Named("in"))
			topology.To[string](in, "out", nil, topology.Named("sink"))
			return top
		}, "sink", "no codec"},
		{"unknown node in OnError", func() *topology.Topology {
			top := topology.New()
			okSink(topology.Source(top, "t", codec.String(), topology.Named("in")))
			top.OnError("nope", topology.Skip())
			return top
		}, "nope", "unknown node"},
		{"dead letter without topic", func() *topology.Topology {
			top := topology.New()
			okSink(topology.Source(top, "t", codec.String(), topology.Named("in")))
			top.OnError("in", topology.DeadLetter(""))
			return top
		}, "in", "no topic"},
		{"topic read twice", func() *topology.Topology {
			top := topology.New()
			a := topology.Source(top, "t", codec.String(), topology.Named("a"))
			b := topology.Source(top, "t", codec.String(), topology.Named("b"))
			okSink(topology.Merge("m", a, b))
			return top
		}, "b", "is already read by"},
		{"stream of another topology", func() *topology.Topology {
			other := topology.New()
			foreign := topology.Source(other, "t", codec.String(), topology.Named("in"))
			top := topology.New()
			mine := topology.Source(top, "u", codec.String(), topology.Named("mine"))
			okSink(topology.Merge("m", mine, foreign))
			return top
		}, "m", "belongs to another topology"},
		{"nil function", func() *topology.Topology {
			top := topology.New()
			okSink(topology.MapValues[string, string](topology.Source(top, "t", codec.String(), topology.Named("in")), "f", nil))
			return top
		}, "f", "nil function"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.build().Validate()
			if err == nil {
				t.Fatal("Validate accepted an invalid topology")
			}
			if !errors.Is(err, topology.ErrInvalid) {
				t.Fatalf("error does not match ErrInvalid: %v", err)
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
}

func ExampleTopology_Describe() {
	top := topology.New(topology.DefaultErrorPolicy(topology.DeadLetter("orders-dlq")))
	in := topology.Source(top, "orders", codec.JSON[map[string]any]())
	big := topology.Filter(in, "big", func(_ []byte, o map[string]any) bool { return o["total"].(float64) > 100 })
	topology.To(big, "orders-big", codec.JSON[map[string]any](), topology.Named("big-orders"))
	top.OnError("big", topology.Skip())
	fmt.Print(top.Describe())
	// Output:
	// Topology
	//   Sub-topology: 0
	//     Source: orders (topic: orders, codec: json)
	//       --> big
	//     Processor: big (Filter)
	//       --> big-orders
	//       <-- orders
	//       on error: skip
	//     Sink: big-orders (topic: orders-big, codec: json)
	//       <-- big
	//   Default on error: dead-letter(orders-dlq)
}

// Branch gives a record to the first predicate that accepts it, and drops a
// record no predicate accepts.
func TestBranchFirstMatchAndDrop(t *testing.T) {
	top := topology.New()
	in := topology.Source(top, "in", codec.String())
	parts := topology.Branch(in, "size",
		func(_ []byte, v string) bool { return len(v) > 3 },
		func(_ []byte, v string) bool { return len(v) > 1 })
	topology.To(parts[0], "long", codec.String())
	topology.To(parts[1], "short", codec.String())
	for value, want := range map[string]string{"hello": "long:k=hello", "hi": "short:k=hi", "x": ""} {
		x, err := run(t, top, "in", "k", value)
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.Join(outputs(x), " "); got != want {
			t.Errorf("%q went to %q, want %q", value, got, want)
		}
	}
}
