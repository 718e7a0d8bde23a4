package topology

import (
	"context"
	"testing"

	"github.com/eosflow/eosflow/internal/store"

	"github.com/eosflow/eosflow/codec"
	"github.com/eosflow/eosflow/internal/graph"
	"github.com/twmb/franz-go/pkg/kgo"
)

// countingExec counts the calls a record makes through graph.Exec.
type countingExec struct {
	cur                          *graph.Cursor
	enter, context, emit, record int
	out                          []*kgo.Record
}

func (c *countingExec) Context() context.Context { c.context++; return c.cur.Ctx }
func (c *countingExec) Enter(node int)           { c.enter++; c.cur.Node = node }
func (c *countingExec) Retry(int, int, error) bool {
	return false
}

func (c *countingExec) Emit(_ int, o graph.Output) error {
	c.emit++
	c.out = append(c.out, &kgo.Record{Topic: o.Topic, Key: o.Key, Value: o.Value})
	return nil
}

func (c *countingExec) EmitRecord(_ int, r *kgo.Record) error {
	c.record++
	c.out = append(c.out, r)
	return nil
}
func (c *countingExec) Attempt(int, int)                               {}
func (c *countingExec) Slot(int) any                                   { return nil }
func (c *countingExec) Partitions(string) (int32, error)               { return 1, nil }
func (c *countingExec) Store(string) (*store.Store, error)             { return nil, nil }
func (c *countingExec) Global(string) (graph.GlobalStore, error)       { return nil, nil }
func (c *countingExec) Hold(int, []byte, func(graph.Exec) error)       {}
func (c *countingExec) Expire(_ graph.Expiry, emit func() error) error { return emit() }

// A fused chain of bytes in, a MapValues, bytes out makes one call to the
// engine per record, the output itself: no codec calls, no per-node calls
// to name the node running or to get the context. Unfused, every node
// makes them.
func TestFusedChainCallsEngineOnce(t *testing.T) {
	build := func() *Topology {
		top := New()
		in := Source(top, "in", codec.Bytes())
		up := MapValues(in, "upper", func(_ context.Context, v []byte) ([]byte, error) { return append([]byte("U:"), v...), nil })
		To(up, "out", codec.Bytes())
		return top
	}
	for _, tc := range []struct {
		name                         string
		top                          *Topology
		enter, context, emit, record int
	}{
		{"fused", build(), 0, 0, 0, 1},
		{"unfused", Unfused(build()), 3, 3, 1, 0},
	} {
		g, err := tc.top.compile("app")
		if err != nil {
			t.Fatal(err)
		}
		g.Cursor.Ctx = context.Background()
		x := &countingExec{cur: g.Cursor}
		if err := g.Sources["in"](x, &kgo.Record{Topic: "in", Key: []byte("k"), Value: []byte("v")}); err != nil {
			t.Fatal(err)
		}
		if x.enter != tc.enter || x.context != tc.context || x.emit != tc.emit || x.record != tc.record {
			t.Errorf("%s: Enter %d, Context %d, Emit %d, EmitRecord %d calls; want %d, %d, %d, %d", tc.name,
				x.enter, x.context, x.emit, x.record, tc.enter, tc.context, tc.emit, tc.record)
		}
		if len(x.out) != 1 || string(x.out[0].Value) != "U:v" || x.out[0].Topic != "out" || string(x.out[0].Key) != "k" {
			t.Errorf("%s: outputs %v", tc.name, x.out)
		}
	}
}
