package engine_test

import (
	"context"
	"testing"

	"github.com/eosflow/eosflow/internal/store"

	"github.com/eosflow/eosflow/codec"
	"github.com/eosflow/eosflow/internal/engine"
	"github.com/eosflow/eosflow/processor"
	"github.com/eosflow/eosflow/state"
	"github.com/eosflow/eosflow/topology"
	"github.com/twmb/franz-go/pkg/kgo"
)

// BenchmarkStoreAccess measures a record through a Process node that
// reads a store, typed through processor.KV or raw through ctx.Store.
func BenchmarkStoreAccess(b *testing.B) {
	for _, typed := range []bool{false, true} {
		name := "store"
		if typed {
			name = "kv"
		}
		b.Run(name, func(b *testing.B) {
			top := topology.New()
			in := topology.Source(top, "in", codec.Bytes())
			top.AddStore("s", state.Memory())
			out := topology.Process(in, "p", func(ctx processor.Context[[]byte], r processor.Record[[]byte]) error {
				if typed {
					kv, err := processor.KV(ctx, "s", state.StringKey(), codec.String())
					if err != nil {
						return err
					}
					_, _, err = kv.Get("k")
					return err
				}
				s, err := ctx.Store("s")
				if err != nil {
					return err
				}
				_, _, err = s.Get([]byte("k"))
				return err
			}, topology.UseStores("s"))
			topology.To(out, "out", codec.Bytes())
			st, err := store.Open(state.Memory(), b.TempDir(), "s", state.Task{Topic: "in"})
			if err != nil {
				b.Fatal(err)
			}
			defer st.Close()
			e, err := engine.New(top, engine.Stores(func(string, state.Task) (*store.Store, error) { return st, nil }))
			if err != nil {
				b.Fatal(err)
			}
			r := &kgo.Record{Topic: "in"}
			out2 := func(*kgo.Record) {}
			b.ReportAllocs()
			for b.Loop() {
				if _, err := e.Process(context.Background(), r, out2); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
