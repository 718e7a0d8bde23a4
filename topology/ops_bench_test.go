package topology

import (
	"context"
	"testing"

	"github.com/eosflow/eosflow/codec"
	"github.com/eosflow/eosflow/internal/graph"
	"github.com/twmb/franz-go/pkg/kgo"
)

// discardExec is countingExec keeping no outputs, for benchmarks.
type discardExec struct{ countingExec }

func (d *discardExec) Emit(int, graph.Output) error      { return nil }
func (d *discardExec) EmitRecord(int, *kgo.Record) error { return nil }

// BenchmarkStatelessChain runs a record through every stateless operator,
// fused and unfused, the cost per record of each path.
func BenchmarkStatelessChain(b *testing.B) {
	build := func() *Topology {
		top := New()
		in := Source(top, "in", codec.Bytes())
		up := MapValues(in, "upper", func(_ context.Context, v []byte) ([]byte, error) { return v, nil })
		kept := Filter(up, "keep", func(_ []byte, v []byte) bool { return len(v) > 0 })
		mapped := Map(kept, "map", func(_ context.Context, k, v []byte) ([]byte, []byte, error) { return k, v, nil })
		peeked := Peek(mapped, "peek", func(context.Context, []byte, []byte) {})
		flat := FlatMap(peeked, "flat", func(_ context.Context, k, v []byte) ([]KV[[]byte], error) {
			return []KV[[]byte]{{Key: k, Value: v}}, nil
		})
		To(flat, "out", codec.Bytes())
		return top
	}
	for _, bc := range []struct {
		name string
		top  *Topology
	}{{"fused", build()}, {"unfused", Unfused(build())}} {
		b.Run(bc.name, func(b *testing.B) {
			g, err := bc.top.compile("app")
			if err != nil {
				b.Fatal(err)
			}
			g.Cursor.Ctx = context.Background()
			x := &discardExec{countingExec{cur: g.Cursor}}
			src := g.Sources["in"]
			r := &kgo.Record{Topic: "in", Key: []byte("k"), Value: make([]byte, 100)}
			b.ReportAllocs()
			for b.Loop() {
				if err := src(x, r); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
