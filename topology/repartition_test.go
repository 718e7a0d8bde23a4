package topology_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/eosflow/eosflow/codec"
	"github.com/eosflow/eosflow/internal/engine"
	"github.com/eosflow/eosflow/internal/graph"
	"github.com/eosflow/eosflow/processor"
	"github.com/eosflow/eosflow/state"
	"github.com/eosflow/eosflow/topology"
)

// byCustomer sums order amounts ("customer:amount" values, keyed by order
// id) per customer, re-keying with GroupBy.
func byCustomer(opts ...topology.GroupOption) *topology.Topology {
	top := topology.New()
	orders := topology.Source(top, "orders", codec.String(), topology.Named("in"))
	g := topology.GroupBy(orders, "by-customer", func(_ context.Context, _ []byte, v string) ([]byte, error) {
		customer, _, ok := strings.Cut(v, ":")
		if !ok || customer == "" {
			return nil, nil
		}
		return []byte(customer), nil
	}, opts...)
	n := topology.Count(g, "orders-per-customer", state.Memory())
	topology.ToTable(n, "customer-orders", codec.JSON[int64](), topology.Named("out"))
	return top
}

// GroupBy sends each record under its new key through the repartition
// topic, and the aggregation counts by that key whatever partition the
// record came from.
func TestGroupByRekeysThroughRepartitionTopic(t *testing.T) {
	top := byCustomer(topology.Repartition(codec.String()), topology.RepartitionPartitions(4))
	r := newRig(t, top)
	var got []string
	for i, v := range []string{"ann:10", "bob:5", "ann:7", "ann:1"} {
		got = append(got, r.must("orders", int32(i%3), "order-"+v, v)...)
	}
	if want := []string{"customer-orders:ann=1", "customer-orders:bob=1", "customer-orders:ann=2", "customer-orders:ann=3"}; !slices.Equal(got, want) {
		t.Fatalf("outputs %v, want %v", got, want)
	}
	rep := r.e.Repartitions()
	want := graph.Repartition{Topic: topology.RepartitionTopic(rigApp, "by-customer"), Partitions: 4, From: []string{"orders"}}
	if len(rep) != 1 || rep[0].Topic != want.Topic || rep[0].Partitions != want.Partitions || !slices.Equal(rep[0].From, want.From) {
		t.Fatalf("Repartitions() = %+v, want [%+v]", rep, want)
	}
	if spec := r.e.StoreSpecs(); len(spec) != 1 || spec[0].Source != want.Topic {
		t.Fatalf("the store's tasks must be the repartition topic's partitions: %+v", spec)
	}
	if in, out := top.InputTopics(), top.OutputTopics(); !slices.Equal(in, []string{"orders"}) || !slices.Equal(out, []string{"customer-orders"}) {
		t.Fatalf("internal topics leak into InputTopics %v or OutputTopics %v", in, out)
	}
	// A record without a new key is the GroupBy node's error.
	top.OnError("by-customer", topology.Skip())
	r = newRig(t, top)
	if got, out, err := r.send("orders", 0, "o", "no-customer"); got != engine.Skipped || err != nil || len(out) != 0 {
		t.Fatalf("keyless: outcome %v, outputs %v, error %v; want Skipped", got, out, err)
	}
	top.OnError("by-customer", topology.Fail())
	r = newRig(t, top)
	if _, _, err := r.send("orders", 0, "o", "no-customer"); !errors.Is(err, topology.ErrNoKey) || !strings.Contains(err.Error(), `"by-customer"`) {
		t.Fatalf("keyless under Fail: %v", err)
	}
}

// Keys that come unchanged from the input need no repartition topic;
// after a node that may change them, GroupByKey asks for one.
func TestGroupByKeyRepartitionsAfterRekey(t *testing.T) {
	build := func(rekey bool, opts ...topology.GroupOption) *topology.Topology {
		top := topology.New()
		in := topology.Source(top, "in", codec.String())
		if rekey {
			in = topology.Map(in, "swap", func(_ context.Context, k []byte, v string) ([]byte, string, error) { return []byte(v), string(k), nil })
		} else {
			in = topology.MapValues(in, "same-key", func(_ context.Context, v string) (string, error) { return v, nil })
		}
		topology.ToTable(topology.Count(topology.GroupByKey(in, "g", opts...), "c", state.Memory()), "out", codec.JSON[int64]())
		return top
	}
	if top := build(false); top.Validate() != nil || top.Node("g").Kind() != topology.KindProcessor || top.Node("g-repartition-source") != nil {
		t.Fatalf("no re-key: %v; want a plain GroupByKey node", top.Validate())
	}
	err := build(true).Validate()
	if !errors.Is(err, topology.ErrInvalid) || !strings.Contains(err.Error(), `GroupByKey follows "swap" (Map)`) ||
		!strings.Contains(err.Error(), "topology.Repartition(codec.JSON[string]())") {
		t.Fatalf("re-key without a codec: %v", err)
	}
	top := build(true, topology.Repartition(codec.String()))
	if err := top.Validate(); err != nil {
		t.Fatal(err)
	}
	if n := top.Node("g"); n.Kind() != topology.KindSink || !n.Internal() || n.Topic() != "<app_id>-g-repartition" {
		t.Fatalf("g: kind %v internal %v topic %q", n.Kind(), n.Internal(), n.Topic())
	}
	if got := newRig(t, top).must("in", 0, "k", "v"); !slices.Equal(got, []string{"out:v=1"}) {
		t.Fatalf("counted by the new key: %v", got)
	}
	// Asked for, it repartitions keys that did not change too.
	if n := build(false, topology.Repartition(codec.String())).Node("g"); n.Kind() != topology.KindSink {
		t.Fatal("Repartition(codec) without a re-key must still repartition")
	}
}

// Mistakes in a repartition are reported by Validate, naming the node.
func TestRepartitionMistakes(t *testing.T) {
	for _, tc := range []struct {
		name  string
		build func(top *topology.Topology, in topology.Stream[string])
		node  string
		want  string
	}{
		{"no codec", func(top *topology.Topology, in topology.Stream[string]) {
			topology.ToTable(topology.Count(topology.GroupBy(in, "g", keyOf), "c", state.Memory()), "out", codec.JSON[int64]())
		}, "g", "needs a codec for their values (string)"},
		{"codec of another type", func(top *topology.Topology, in topology.Stream[string]) {
			topology.ToTable(topology.Count(topology.GroupBy(in, "g", keyOf, topology.Repartition(codec.JSON[int]())), "c", state.Memory()), "out", codec.JSON[int64]())
		}, "g", "is not a codec.Codec[string]"},
		{"nil key function", func(top *topology.Topology, in topology.Stream[string]) {
			topology.ToTable(topology.Count(topology.GroupBy(in, "g", nil, topology.Repartition(codec.String())), "c", state.Memory()), "out", codec.JSON[int64]())
		}, "g", "GroupBy has a nil function"},
		{"negative partitions", func(top *topology.Topology, in topology.Stream[string]) {
			topology.ToTable(topology.Count(topology.GroupBy(in, "g", keyOf, topology.Repartition(codec.String()), topology.RepartitionPartitions(-2)), "c", state.Memory()), "out", codec.JSON[int64]())
		}, "g", "RepartitionPartitions(-2)"},
		{"name not fit for a topic", func(top *topology.Topology, in topology.Stream[string]) {
			topology.ToTable(topology.Count(topology.GroupBy(in, "by customer", keyOf, topology.Repartition(codec.String())), "c", state.Memory()), "out", codec.JSON[int64]())
		}, "by customer", `GroupBy name "by customer" has ' ', which Kafka does not allow in the repartition topic's name`},
		{"a node with the repartition source's name", func(top *topology.Topology, in topology.Stream[string]) {
			g := topology.GroupBy(in, "g", keyOf, topology.Repartition(codec.String()))
			topology.ToTable(topology.Count(g, "c", state.Memory()), "out", codec.JSON[int64]())
			topology.To(topology.MapValues(in, "g-repartition-source", func(_ context.Context, v string) (string, error) { return v, nil }), "o2", codec.String())
		}, "g-repartition-source", `the name is taken by the source that GroupBy "g" made for its repartition topic; rename this MapValues`},
		{"not aggregated", func(top *topology.Topology, in topology.Stream[string]) {
			topology.GroupBy(in, "g", keyOf, topology.Repartition(codec.String()))
			topology.To(in, "out", codec.String())
		}, "g", "GroupBy output goes nowhere; aggregate it with Count, Reduce or Aggregate"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			top := topology.New()
			tc.build(top, topology.Source(top, "in", codec.String()))
			err := top.Validate()
			var ve *topology.ValidationError
			if !errors.As(err, &ve) || !strings.Contains(err.Error(), `node "`+tc.node+`"`) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Validate() = %v; want node %q: %q", err, tc.node, tc.want)
			}
		})
	}
}

func keyOf(_ context.Context, _ []byte, v string) ([]byte, error) { return []byte(v), nil }

// A repartition topic downstream of another gets the upstream one's
// resolved name in From, so the runtime can size it after creating the
// first.
func TestChainedRepartitions(t *testing.T) {
	top := topology.New()
	in := topology.Source(top, "in", codec.String())
	first := topology.Reduce(topology.GroupBy(in, "g1", keyOf, topology.Repartition(codec.String())), "latest", func(_ context.Context, _, v string) (string, error) { return v, nil },
		state.Memory(), codec.String())
	second := topology.GroupBy(topology.ToStream(first, "updates"), "g2", func(_ context.Context, k []byte, _ string) ([]byte, error) { return k[:1], nil },
		topology.Repartition(codec.String()))
	topology.ToTable(topology.Count(second, "c", state.Memory()), "out", codec.JSON[int64]())
	e, err := engine.New(top, engine.AppID("app"))
	if err != nil {
		t.Fatal(err)
	}
	rep := e.Repartitions()
	if len(rep) != 2 || rep[0].Topic != "app-g1-repartition" || !slices.Equal(rep[0].From, []string{"in"}) ||
		rep[1].Topic != "app-g2-repartition" || !slices.Equal(rep[1].From, []string{"app-g1-repartition"}) {
		t.Fatalf("Repartitions() = %+v", rep)
	}
	if s := top.Describe(); strings.Count(s, "Sub-topology:") != 3 {
		t.Fatalf("want three sub-topologies:\n%s", s)
	}
}

// A store used from two input topics is one store once they are merged and
// sent Through a repartition topic: every key reaches one task, whichever
// topic it came from.
func TestThroughServesStoreOfTwoInputs(t *testing.T) {
	top := topology.New().AddStore("seen", state.Memory())
	a := topology.Source(top, "clicks", codec.String(), topology.Named("a"))
	b := topology.Source(top, "views", codec.String(), topology.Named("b"))
	both := topology.Through(topology.Merge("both", a, b), "by-user", topology.Repartition(codec.String()))
	firsts := topology.Process(both, "first-seen", func(ctx processor.Context[string], r topology.Record[string]) error {
		seen, err := processor.KV(ctx, "seen", state.StringKey(), codec.String())
		if err != nil {
			return err
		}
		if _, ok, err := seen.Get(string(r.Key)); err != nil || ok {
			return err
		}
		ctx.Emit(r)
		return seen.Put(string(r.Key), r.Value)
	}, topology.UseStores("seen"))
	topology.To(firsts, "first-seen", codec.String(), topology.Named("out"))
	if err := top.Validate(); err != nil {
		t.Fatal(err)
	}
	r := newRig(t, top)
	var got []string
	got = append(got, r.must("clicks", 0, "u1", "click")...)
	got = append(got, r.must("views", 1, "u1", "view")...)
	got = append(got, r.must("views", 1, "u2", "view")...)
	if want := []string{"first-seen:u1=click", "first-seen:u2=view"}; !slices.Equal(got, want) {
		t.Fatalf("outputs %v, want %v", got, want)
	}
	if s := top.Describe(); !strings.Contains(s, "Sink: by-user (Through, repartition topic: <app_id>-by-user-repartition, codec: string)") {
		t.Fatalf("Describe:\n%s", s)
	}
}

// A user's Source that reads what turns out, under the app id, to be a
// repartition topic is refused when the engine compiles for that app.
func TestSourceOnRepartitionTopicRefused(t *testing.T) {
	top := topology.New()
	in := topology.Source(top, "in", codec.String())
	topology.ToTable(topology.Count(topology.GroupBy(in, "g", keyOf, topology.Repartition(codec.String())), "c", state.Memory()), "out", codec.JSON[int64]())
	topology.To(topology.Source(top, "app-g-repartition", codec.String(), topology.Named("peek")), "copy", codec.String())
	if err := top.Validate(); err != nil {
		t.Fatalf("without an app id nothing collides: %v", err)
	}
	_, err := engine.New(top, engine.AppID("app"))
	if !errors.Is(err, topology.ErrInvalid) || !strings.Contains(err.Error(), `node "peek": source reads app-g-repartition, the repartition topic of GroupBy "g"`) {
		t.Fatalf("engine.New: %v", err)
	}
}
