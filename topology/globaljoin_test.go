package topology_test

import (
	"context"
	"strings"
	"testing"

	"github.com/eosflow/eosflow/codec"
	"github.com/eosflow/eosflow/eostest"
	"github.com/eosflow/eosflow/state"
	"github.com/eosflow/eosflow/topology"
)

// ordersByCustomer joins orders (keyed by order id, valued "customer:item")
// with the global table of customers by the customer in the value.
func ordersByCustomer(left bool) *topology.Topology {
	top := topology.New()
	customers := topology.GlobalTableFrom(top, "customers", codec.String(), state.Memory())
	orders := topology.Source(top, "orders", codec.String())
	keyOf := func(_ []byte, v string) []byte {
		c, _, ok := strings.Cut(v, ":")
		if !ok {
			return nil // no customer: no row
		}
		return []byte(c)
	}
	var out topology.Stream[string]
	if left {
		out = topology.LeftJoinGlobal(orders, customers, "enrich", keyOf, func(_ context.Context, _ []byte, o, c string, found bool) (string, error) {
			if !found {
				c = "unknown"
			}
			return o + " for " + c, nil
		})
	} else {
		out = topology.JoinGlobal(orders, customers, "enrich", keyOf, func(_ context.Context, _ []byte, o, c string) (string, error) {
			return o + " for " + c, nil
		})
	}
	topology.To(out, "enriched", codec.String())
	return top
}

// A record joins the row under the key keyOf computes from it, as the row
// stands when the record is piped: set, replaced, deleted by a tombstone;
// the inner join drops a record without a row, the left join keeps it.
func TestJoinGlobal(t *testing.T) {
	for _, tc := range []struct {
		left bool
		want []string
	}{
		{false, []string{"o1=c1:tea for Ada", "o3=c1:jam for Ada L."}},
		{true, []string{"o1=c1:tea for Ada", "o2=c2:pan for unknown", "o3=c1:jam for Ada L.", "o4=c1:cup for unknown", "o5=nocustomer for unknown"}},
	} {
		d := eostest.New(t, ordersByCustomer(tc.left))
		out := eostest.Output(d, "enriched", codec.String())
		pipe := func(topic, key string, value []byte) {
			t.Helper()
			if err := d.Pipe(topic, []byte(key), value); err != nil {
				t.Fatal(err)
			}
		}
		pipe("customers", "c1", []byte("Ada"))
		pipe("orders", "o1", []byte("c1:tea"))
		pipe("orders", "o2", []byte("c2:pan"))
		pipe("customers", "c1", []byte("Ada L."))
		pipe("orders", "o3", []byte("c1:jam"))
		pipe("customers", "c1", nil)
		pipe("orders", "o4", []byte("c1:cup"))
		pipe("orders", "o5", []byte("nocustomer"))
		var got []string
		for _, r := range out.ReadAll() {
			got = append(got, string(r.Key)+"="+r.Value)
		}
		if strings.Join(got, "|") != strings.Join(tc.want, "|") {
			t.Errorf("left=%v: got %q, want %q", tc.left, got, tc.want)
		}
	}
}

// Mistakes with global tables are Validate's errors, each naming the fix.
func TestJoinGlobalMistakes(t *testing.T) {
	keyOf := func(k []byte, _ string) []byte { return k }
	join := func(_ context.Context, _ []byte, l, r string) (string, error) { return l + r, nil }
	for _, tc := range []struct {
		name  string
		build func(top *topology.Topology)
		want  string
	}{
		{"unused", func(top *topology.Topology) {
			topology.GlobalTableFrom(top, "g", codec.String(), state.Memory())
			topology.To(topology.Source(top, "in", codec.String()), "out", codec.String())
		}, `global table "g" is read by no join`},
		{"name of a node", func(top *topology.Topology) {
			g := topology.GlobalTableFrom(top, "g", codec.String(), state.Memory(), topology.Named("in"))
			topology.To(topology.JoinGlobal(topology.Source(top, "in", codec.String()), g, "j", keyOf, join), "out", codec.String())
		}, `global table "in" has the name of Source node "in"`},
		{"name of a store", func(top *topology.Topology) {
			g := topology.GlobalTableFrom(top, "g", codec.String(), state.Memory(), topology.Named("tbl"))
			tbl := topology.TableFrom(top, "tbl", codec.String(), state.Memory())
			in := topology.Join(topology.Source(top, "in", codec.String()), tbl, "j1", join)
			topology.To(topology.JoinGlobal(in, g, "j2", keyOf, join), "out", codec.String())
		}, `global table "tbl" has the name of the store declared by TableFrom node "tbl"`},
		{"topic read twice", func(top *topology.Topology) {
			g := topology.GlobalTableFrom(top, "in", codec.String(), state.Memory(), topology.Named("g"))
			topology.To(topology.JoinGlobal(topology.Source(top, "in", codec.String()), g, "j", keyOf, join), "out", codec.String())
		}, `topic "in" is read both by global table "g" and by Source "in"`},
		{"declared twice", func(top *topology.Topology) {
			g := topology.GlobalTableFrom(top, "g", codec.String(), state.Memory())
			topology.GlobalTableFrom(top, "g", codec.String(), state.Memory())
			topology.To(topology.JoinGlobal(topology.Source(top, "in", codec.String()), g, "j", keyOf, join), "out", codec.String())
		}, `duplicate global table name "g"`},
		{"nil key function", func(top *topology.Topology) {
			g := topology.GlobalTableFrom(top, "g", codec.String(), state.Memory())
			topology.To(topology.JoinGlobal(topology.Source(top, "in", codec.String()), g, "j", nil, join), "out", codec.String())
		}, "JoinGlobal has a nil key function"},
		{"zero table", func(top *topology.Topology) {
			topology.To(topology.JoinGlobal(topology.Source(top, "in", codec.String()), topology.GlobalTable[string]{}, "j", keyOf, join), "out", codec.String())
		}, "JoinGlobal has no global table"},
		{"nil engine", func(top *topology.Topology) {
			g := topology.GlobalTableFrom(top, "g", codec.String(), nil)
			topology.To(topology.JoinGlobal(topology.Source(top, "in", codec.String()), g, "j", keyOf, join), "out", codec.String())
		}, `global table "g" has a nil engine`},
		{"no topic", func(top *topology.Topology) {
			g := topology.GlobalTableFrom(top, "", codec.String(), state.Memory())
			topology.To(topology.JoinGlobal(topology.Source(top, "in", codec.String()), g, "j", keyOf, join), "out", codec.String())
		}, "GlobalTableFrom has no topic"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			top := topology.New()
			tc.build(top)
			err := top.Validate()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Validate: %v, want %q", err, tc.want)
			}
		})
	}
}

// Describe shows the global table, that it is read whole, and the join
// that reads it; GlobalTopics lists its topic, which is no input topic of
// the consumer group.
func TestDescribeGlobalTable(t *testing.T) {
	top := ordersByCustomer(false)
	if err := top.Validate(); err != nil {
		t.Fatal(err)
	}
	desc := top.Describe()
	for _, want := range []string{
		"Global table: customers (topic: customers, codec: string, engine: memory, read whole by every instance, no changelog)",
		"Processor: enrich (JoinGlobal, global table: customers)",
	} {
		if !strings.Contains(desc, want) {
			t.Errorf("Describe lacks %q:\n%s", want, desc)
		}
	}
	if got := top.GlobalTopics(); len(got) != 1 || got[0] != "customers" {
		t.Errorf("GlobalTopics = %v", got)
	}
	if got := top.InputTopics(); len(got) != 1 || got[0] != "orders" {
		t.Errorf("InputTopics = %v, want only the stream's topic", got)
	}
}

// A row the table's codec cannot decode fails the joining record with an
// error naming the table, the key, the topic and the fix.
func TestJoinGlobalUndecodableRow(t *testing.T) {
	top := topology.New()
	prices := topology.GlobalTableFrom(top, "prices", codec.JSON[int](), state.Memory())
	orders := topology.Source(top, "orders", codec.String())
	joined := topology.JoinGlobal(orders, prices, "price", func(_ []byte, v string) []byte { return []byte(v) },
		func(_ context.Context, _ []byte, o string, p int) (string, error) { return o, nil })
	topology.To(joined, "priced", codec.String())
	d := eostest.New(t, top)
	if err := d.Pipe("prices", []byte("tea"), []byte("not json")); err != nil {
		t.Fatal(err)
	}
	err := d.Pipe("orders", []byte("o1"), []byte("tea"))
	if err == nil || !strings.Contains(err.Error(), `global table "prices" under key "tea"`) ||
		!strings.Contains(err.Error(), `tombstone key "tea" in topic prices`) {
		t.Fatalf("Pipe: %v, want an error naming the table, the key, the topic and the fix", err)
	}
	t.Log(err)
}
