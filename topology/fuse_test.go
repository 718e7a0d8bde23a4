package topology_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/eosflow/eosflow/codec"
	"github.com/eosflow/eosflow/internal/engine"
	"github.com/eosflow/eosflow/processor"
	"github.com/eosflow/eosflow/topology"
	"github.com/twmb/franz-go/pkg/kgo"
)

// step is what the engine made of one input record, in a form two runs can
// be compared by.
type step struct {
	Outcome engine.Outcome
	Err     string
	Outputs []string // topic/partition key=value headers @timestamp <- sink
	Retries uint64
}

// runAll passes ins, in order, through one engine for top and records every
// step; stacks of dead letters are left out (fused and unfused frames
// differ), their presence is kept.
func runAll(t *testing.T, top *topology.Topology, ins []*kgo.Record) []step {
	t.Helper()
	e, err := engine.New(top, engine.Sleep(func(context.Context, time.Duration) error { return nil }),
		engine.Partitions(func(string) (int32, error) { return 4, nil }))
	if err != nil {
		t.Fatalf("engine.New: %v", err)
	}
	var steps []step
	for _, in := range ins {
		var s step
		out := func(r *kgo.Record) {
			var hs []string
			for _, h := range r.Headers {
				v := string(h.Value)
				if h.Key == processor.HeaderStack {
					v = fmt.Sprint(len(v) > 0)
				}
				hs = append(hs, h.Key+":"+v)
			}
			s.Outputs = append(s.Outputs, fmt.Sprintf("%s/%d %s=%s %v @%d <- %s",
				r.Topic, r.Partition, r.Key, r.Value, hs, r.Timestamp.UnixNano(), e.OutputNode()))
		}
		s.Outcome, err = e.Process(context.Background(), in, out)
		if err != nil {
			s.Err = err.Error()
		}
		s.Retries = e.Take().Retries
		steps = append(steps, s)
	}
	return steps
}

// fuseInputs are the records every case gets: words that make the nodes
// succeed, fail, panic or drop, with headers and timestamps to carry.
func fuseInputs(topic string) []*kgo.Record {
	var ins []*kgo.Record
	for i, w := range []string{"ab", "skip", "abc", "bad-map", "", "abcd", "panic", "bad-flat", "bad-sink", "retry", "none", "x"} {
		ins = append(ins, &kgo.Record{
			Topic: topic, Partition: int32(i % 3), Offset: int64(100 + i), Key: []byte(fmt.Sprintf("k%d", i)), Value: []byte(w),
			Headers: []kgo.RecordHeader{{Key: "h", Value: []byte(fmt.Sprint(i))}}, Timestamp: time.UnixMilli(int64(1000 + i)),
		})
	}
	ins[4].Headers, ins[4].Key = nil, nil
	return ins
}

// failing is the user code of the cases: it fails, panics or drops as the
// word says.
func failing(node, word string) error {
	switch {
	case word == "bad-"+node:
		return fmt.Errorf("%s refuses %q", node, word)
	case word == "panic" && node == "map":
		panic("map panics")
	}
	return nil
}

// fuseCases build topologies whose sources start fused chains (and some
// that stop them: a fan-out, a branch, a repartition). Each call builds
// anew, so state (retry counts) is not shared between the fused and the
// unfused run.
var fuseCases = map[string]func() *topology.Topology{
	"chain": func() *topology.Topology {
		top := topology.New()
		in := topology.Source(top, "in", codec.String())
		up := topology.MapValues(in, "map", func(_ context.Context, v string) (string, error) {
			return strings.ToUpper(v), failing("map", v)
		})
		kept := topology.Filter(up, "filter", func(_ []byte, v string) bool { return v != "SKIP" })
		split := topology.FlatMap(kept, "flat", func(_ context.Context, k []byte, v string) ([]topology.KV[string], error) {
			if err := failing("flat", strings.ToLower(v)); err != nil {
				return nil, err
			}
			if v == "NONE" {
				return nil, nil
			}
			var out []topology.KV[string]
			for i := range min(len(v), 3) {
				out = append(out, topology.KV[string]{Key: append([]byte(nil), k...), Value: v[i:]})
			}
			return out, nil
		})
		rekey := topology.Map(split, "rekey", func(_ context.Context, k []byte, v string) ([]byte, int, error) {
			return []byte(string(k) + "/" + v), len(v), nil
		})
		seen := topology.Peek(rekey, "peek", func(context.Context, []byte, int) {})
		topology.To(seen, "out", codec.JSON[int]())
		top.OnError("map", topology.DeadLetter("dlq"))
		top.OnError("flat", topology.Skip())
		return top
	},
	"bytes": func() *topology.Topology {
		top := topology.New()
		in := topology.Source(top, "in", codec.Bytes())
		up := topology.MapValues(in, "map", func(_ context.Context, v []byte) ([]byte, error) {
			return []byte(strings.ToUpper(string(v))), failing("map", string(v))
		})
		topology.To(up, "out", codec.Bytes())
		return top
	},
	"stamped-partitioned": func() *topology.Topology {
		top := topology.New()
		in := topology.Source(top, "in", codec.String(),
			topology.SourceTimestamp(func(_ []byte, v string) time.Time { return time.Unix(int64(len(v)), 5) }))
		up := topology.MapValues(in, "map", func(_ context.Context, v string) (string, error) { return v + "!", failing("map", v) })
		topology.To(up, "out", codec.String(), topology.Partitioner(func(r topology.Record[string], n int32) int32 {
			if r.Value == "x!" {
				return n // out of range: the sink's error
			}
			return int32(len(r.Value)) % n
		}))
		top.OnError("out", topology.DeadLetter("dlq"))
		return top
	},
	"stamped": func() *topology.Topology {
		top := topology.New()
		in := topology.Source(top, "in", codec.String(),
			topology.SourceTimestamp(func(_ []byte, v string) time.Time { return time.Unix(int64(len(v)), 5) }))
		up := topology.MapValues(in, "map", func(_ context.Context, v string) (string, error) { return v + "!", nil })
		topology.To(up, "out", codec.String())
		return top
	},
	"topic-func": func() *topology.Topology {
		top := topology.New()
		in := topology.Source(top, "in", codec.String())
		topology.ToTopicFunc(in, "out", func(_ context.Context, r topology.Record[string]) (string, error) {
			if r.Value == "none" {
				return "", nil
			}
			return fmt.Sprintf("t-%s-%d-%d", r.Topic, r.Partition, r.Offset), nil
		}, codec.String())
		top.OnError("out", topology.Skip())
		return top
	},
	"fan-out": func() *topology.Topology {
		top := topology.New()
		in := topology.Source(top, "in", codec.String())
		up := topology.MapValues(in, "map", func(_ context.Context, v string) (string, error) { return v, nil })
		topology.To(up, "first", codec.String())
		topology.To(up, "second", codec.Func[string]{
			EncodeFunc: func(v string) ([]byte, error) { return []byte(v), failing("sink", v) },
		})
		top.OnError("second", topology.DeadLetter("dlq"))
		return top
	},
	"branch": func() *topology.Topology {
		top := topology.New()
		in := topology.Source(top, "in", codec.String())
		bs := topology.Branch(in, "route", func(_ []byte, v string) bool { return len(v) < 3 }, func([]byte, string) bool { return true })
		short := topology.MapValues(bs[0], "short", func(_ context.Context, v string) (string, error) { return "s:" + v, nil })
		long := topology.MapValues(bs[1], "map", func(_ context.Context, v string) (string, error) { return "l:" + v, failing("map", v) })
		topology.To(topology.Merge("merge", short, long), "out", codec.String())
		return top
	},
	"retry-encode": func() *topology.Topology {
		top := topology.New()
		in := topology.Source(top, "in", codec.String())
		tries := map[string]int{}
		up := topology.MapValues(in, "map", func(_ context.Context, v string) (string, error) {
			if v == "retry" && tries[v] < 2 {
				tries[v]++
				return "", errors.New("not yet")
			}
			return v, nil
		})
		topology.To(up, "out", codec.Func[string]{
			EncodeFunc: func(v string) ([]byte, error) { return []byte(v), failing("sink", v) },
		})
		top.OnError("map", topology.Retry(3, time.Millisecond, topology.Fail()))
		top.OnError("out", topology.DeadLetter("dlq"))
		return top
	},
}

// A fused chain does what the nodes do one by one: the same outputs with
// the same metadata, the same outcomes, errors, dead letters and retries.
func TestFusedMatchesUnfused(t *testing.T) {
	for name, build := range fuseCases {
		t.Run(name, func(t *testing.T) {
			ins := fuseInputs("in")
			fused := runAll(t, build(), ins)
			unfused := runAll(t, topology.Unfused(build()), ins)
			if !reflect.DeepEqual(fused, unfused) {
				for i := range fused {
					if !reflect.DeepEqual(fused[i], unfused[i]) {
						t.Errorf("record %d (%q):\n fused   %+v\n unfused %+v", i, ins[i].Value, fused[i], unfused[i])
					}
				}
			}
			var outs int
			for _, s := range fused {
				outs += len(s.Outputs)
			}
			if outs == 0 {
				t.Fatal("no outputs at all: the case tests nothing")
			}
		})
	}
}

// The same through a repartition topic, whose source starts a chain too.
func TestFusedMatchesUnfusedThroughRepartition(t *testing.T) {
	build := func() *topology.Topology {
		top := topology.New()
		in := topology.Source(top, "in", codec.String())
		keyed := topology.Map(in, "key", func(_ context.Context, _ []byte, v string) ([]byte, string, error) {
			return []byte("r-" + v), v, nil
		})
		back := topology.Through(keyed, "rp", topology.Repartition(codec.String()))
		up := topology.MapValues(back, "map", func(_ context.Context, v string) (string, error) { return "<" + v + ">", failing("map", v) })
		topology.To(up, "out", codec.String())
		top.OnError("map", topology.DeadLetter("dlq"))
		return top
	}
	rp := topology.RepartitionTopic(topology.AppIDPlaceholder, "rp")
	ins := fuseInputs("in")
	first := runAll(t, build(), ins)
	var again []*kgo.Record
	for i, r := range ins {
		again = append(again, &kgo.Record{Topic: rp, Key: []byte("r-" + string(r.Value)), Value: r.Value, Headers: r.Headers,
			Timestamp: r.Timestamp, Partition: 1, Offset: int64(i)})
	}
	if len(first[0].Outputs) != 1 || !strings.HasPrefix(first[0].Outputs[0], rp+"/") {
		t.Fatalf("first pass should write %s: %+v", rp, first[0])
	}
	fused := runAll(t, build(), again)
	unfused := runAll(t, topology.Unfused(build()), again)
	if !reflect.DeepEqual(fused, unfused) {
		t.Fatalf("fused:\n%+v\nunfused:\n%+v", fused, unfused)
	}
	if got := fused[0].Outputs; len(got) != 1 || !strings.HasPrefix(got[0], "out/-1 r-ab=<ab>") {
		t.Fatalf("outputs of the repartition source: %q", got)
	}
}

// chainOf is a chain of a FlatMap making a record's outputs and a
// MapValues that fails on one of them, then a sink: a failure in the
// middle of a fused chain, after some outputs were emitted.
func chainOf(policy topology.ErrorPolicy, n int) *topology.Topology {
	top := topology.New()
	in := topology.Source(top, "in", codec.String())
	split := topology.FlatMap(in, "split", func(_ context.Context, k []byte, v string) ([]topology.KV[string], error) {
		out := make([]topology.KV[string], n)
		for i := range out {
			out[i] = topology.KV[string]{Key: k, Value: fmt.Sprintf("%s-%d", v, i)}
		}
		return out, nil
	})
	checked := topology.MapValues(split, "check", func(_ context.Context, v string) (string, error) {
		if v == "bad-2" {
			return "", errors.New("the third output is bad")
		}
		return v, nil
	})
	topology.To(checked, "out", codec.String())
	top.OnError("check", policy)
	return top
}

// An error in the middle of a fused chain emits none of the record's
// outputs, even those emitted before it; the policy decides the rest.
func TestFusedFailureEmitsNothing(t *testing.T) {
	for _, tc := range []struct {
		name    string
		policy  topology.ErrorPolicy
		outcome engine.Outcome
		outputs []string
	}{
		{"fail", topology.Fail(), engine.Failed, nil},
		{"skip", topology.Skip(), engine.Skipped, nil},
		{"dead-letter", topology.DeadLetter("dlq"), engine.DeadLettered, []string{"dlq=bad"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e, err := engine.New(chainOf(tc.policy, 4))
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			out := func(r *kgo.Record) { got = append(got, r.Topic+"="+string(r.Value)) }
			outcome, err := e.Process(context.Background(), &kgo.Record{Topic: "in", Key: []byte("k"), Value: []byte("bad")}, out)
			if outcome != tc.outcome || (err != nil) != (tc.outcome == engine.Failed) || !reflect.DeepEqual(got, tc.outputs) {
				t.Fatalf("got %v, %v, outputs %q; want %v, outputs %q", outcome, err, got, tc.outcome, tc.outputs)
			}
			var ne *topology.NodeError
			if err != nil && (!errors.As(err, &ne) || ne.Node != "check") {
				t.Fatalf("error %v should name the node check", err)
			}
			// The next record is whole again: nothing of the failed one
			// leaks into its outputs.
			got = nil
			if outcome, err := e.Process(context.Background(), &kgo.Record{Topic: "in", Key: []byte("k"), Value: []byte("ok")}, out); outcome != engine.Processed || err != nil {
				t.Fatal(outcome, err)
			}
			if want := []string{"out=ok-0", "out=ok-1", "out=ok-2", "out=ok-3"}; !reflect.DeepEqual(got, want) {
				t.Fatalf("next record: %q, want %q", got, want)
			}
		})
	}
}

// A FlatMap in a fused chain may make no output, one or many; each goes
// through the rest of the chain, in order.
func TestFusedFlatMapCounts(t *testing.T) {
	for _, n := range []int{0, 1, 2, 5} {
		e, err := engine.New(chainOf(topology.Fail(), n))
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		outcome, err := e.Process(context.Background(), &kgo.Record{Topic: "in", Value: []byte("v")},
			func(r *kgo.Record) { got = append(got, string(r.Value)+"<-"+e.OutputNode()) })
		var want []string
		for i := range n {
			want = append(want, fmt.Sprintf("v-%d<-out", i))
		}
		if outcome != engine.Processed || err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("%d outputs: got %v, %v, %q; want %q", n, outcome, err, got, want)
		}
	}
}

// A panic in the middle of a fused chain is the error of the node that
// panicked, with its stack, as it is unfused.
func TestFusedPanicNamesNode(t *testing.T) {
	top := topology.New()
	in := topology.Source(top, "in", codec.String())
	a := topology.MapValues(in, "first", func(_ context.Context, v string) (string, error) { return v, nil })
	b := topology.MapValues(a, "second", func(_ context.Context, v string) (string, error) { panic("boom") })
	c := topology.MapValues(b, "third", func(_ context.Context, v string) (string, error) { return v, nil })
	topology.To(c, "out", codec.String())
	e, err := engine.New(top)
	if err != nil {
		t.Fatal(err)
	}
	_, err = e.Process(context.Background(), &kgo.Record{Topic: "in", Value: []byte("v")}, func(*kgo.Record) { t.Error("an output of a panicking record") })
	var ne *topology.NodeError
	if !errors.As(err, &ne) || ne.Node != "second" || len(ne.Stack) == 0 || !strings.Contains(ne.Err.Error(), "boom") {
		t.Fatalf("got %v, want a NodeError of second with its stack", err)
	}
}

// Fusion is how the engine runs a topology, not what it is: Describe and
// the nodes still show every node the user declared.
func TestFusedDescribeShowsEveryNode(t *testing.T) {
	top := fuseCases["chain"]()
	if _, err := engine.New(top); err != nil { // compiles, fusing the chain
		t.Fatal(err)
	}
	d := top.Describe()
	for _, n := range []string{"in", "map", "filter", "flat", "rekey", "peek", "out"} {
		if !strings.Contains(d, ": "+n+" (") {
			t.Errorf("Describe lost node %s:\n%s", n, d)
		}
	}
	if got := len(top.Nodes()); got != 7 {
		t.Errorf("%d nodes, want 7", got)
	}
}
