package topology_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/eosflow/eosflow/codec"
	"github.com/eosflow/eosflow/state"
	"github.com/eosflow/eosflow/topology"
)

// Sources and sinks are named after their topic; Named overrides it.
func TestSourcesAndSinksAreNamedAfterTheirTopic(t *testing.T) {
	top := topology.New()
	in := topology.Source(top, "orders", codec.String())
	table := topology.TableFrom(top, "customers", codec.String(), state.Memory())
	joined := topology.Join(in, table, "enrich", func(_ context.Context, _ []byte, o, c string) (string, error) { return o + c, nil })
	topology.To(joined, "enriched", codec.String())
	topology.To(joined, "audit", codec.String(), topology.Named("audit-copy"))
	if err := top.Validate(); err != nil {
		t.Fatal(err)
	}
	for name, topic := range map[string]string{"orders": "orders", "customers": "customers", "enriched": "enriched", "audit-copy": "audit"} {
		n := top.Node(name)
		if n == nil || n.Topic() != topic {
			t.Fatalf("node %q: %v, want one on topic %q (nodes %v)", name, n, topic, top.Nodes())
		}
	}
	if top.Node("audit") != nil {
		t.Fatal("Named left the default name in place")
	}
	if got := top.Node("customers").Stores(); len(got) != 1 || got[0] != "customers" {
		t.Fatalf("TableFrom's store is %v, want it named after the node", got)
	}
}

// A topic written by two sinks names both alike: the problem says how to
// tell them apart.
func TestTwoSinksOnOneTopicAskForNamed(t *testing.T) {
	top := topology.New()
	in := topology.Source(top, "in", codec.String())
	parts := topology.Branch(in, "split", isA, notA)
	topology.To(parts[0], "out", codec.String())
	topology.To(parts[1], "out", codec.String())
	err := top.Validate()
	if err == nil || !strings.Contains(err.Error(), `duplicate node name`) || !strings.Contains(err.Error(), `topology.Named`) {
		t.Fatalf("want a duplicate name naming topology.Named, got %v", err)
	}
	fixed := topology.New()
	in = topology.Source(fixed, "in", codec.String())
	parts = topology.Branch(in, "split", isA, notA)
	topology.To(parts[0], "out", codec.String())
	topology.To(parts[1], "out", codec.String(), topology.Named("out-others"))
	if err := fixed.Validate(); err != nil {
		t.Fatal(err)
	}
}

// Since Named serves every value type, an option built for another type
// compiles; Validate names it.
func TestAnOptionForAnotherValueTypeIsAProblem(t *testing.T) {
	top := topology.New()
	stamp := topology.SourceTimestamp(func(_ []byte, v int) time.Time { return time.Unix(int64(v), 0) })
	in := topology.Source(top, "in", codec.String(), stamp)
	part := topology.Partitioner(func(topology.Record[int], int32) int32 { return 0 })
	topology.To(in, "out", codec.String(), part)
	topology.TableFrom(top, "table", codec.String(), state.Memory(), topology.SourceTimestamp(func(_ []byte, v string) time.Time { return time.Time{} }))
	err := top.Validate()
	for _, want := range []string{
		`node "in": option topology.sourceOpt[int] was made for a source of another value type`,
		`node "out": option topology.sinkOpt[int] was made for a sink of another value type`,
		`node "table": option topology.sourceOpt[string] does not apply to a table`,
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("want %q, got %v", want, err)
		}
	}
}

func isA(_ []byte, v string) bool  { return v == "a" }
func notA(_ []byte, v string) bool { return v != "a" }

// A source, table or sink without a topic has that one problem, not also
// an empty name.
func TestNoTopicIsTheOneProblem(t *testing.T) {
	top := topology.New()
	in := topology.Source(top, "", codec.String())
	topology.TableFrom(top, "", codec.String(), state.Memory())
	topology.To(in, "", codec.String())
	err := top.Validate()
	if err == nil {
		t.Fatal("no problem reported")
	}
	for _, want := range []string{"Source has no topic", "TableFrom has no topic", "sink has no topic"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("want %q in %v", want, err)
		}
	}
	for _, not := range []string{"empty name", "store"} {
		if strings.Contains(err.Error(), not) {
			t.Errorf("a problem besides the topic (%q): %v", not, err)
		}
	}
}
