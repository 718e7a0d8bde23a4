package eos_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/eosflow/eosflow/codec"
	"github.com/eosflow/eosflow/config"
	"github.com/eosflow/eosflow/dedup"
	"github.com/eosflow/eosflow/internal/kafkautil"
	"github.com/eosflow/eosflow/tools/conformance"
	"github.com/eosflow/eosflow/tools/kafkatest"
	"github.com/eosflow/eosflow/topology"
)

// An effect outside Kafka run by topology.Dedup happens once per id although
// every id is in the input twice and failed commits make the runner redo
// batches, while the Kafka output after Dedup still holds every input record
// exactly once (the records of aborted batches are written again). The
// control, the same effect in a Peek, shows the redone batches really repeat
// effects.
func TestDedupEffectOncePerID(t *testing.T) {
	const ids = 600
	for _, c := range []struct {
		name string
		opts []topology.DedupOption
		none bool // the control: no Dedup node
	}{
		{name: "MarkBefore", opts: []topology.DedupOption{topology.MarkBefore()}},
		{name: "MarkAfter", opts: []topology.DedupOption{topology.MarkAfter()}},
		{name: "control without Dedup", none: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			env := kafkatest.Fake(t)
			env.CreateTopics(t, 3, "in", "out")
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			// Each id twice, under its own key, so both copies are in one
			// partition, as a producer's retried send would put them.
			if err := kafkautil.ProduceAll(ctx, env.Client(t), 2*ids, func(i int) *kgo.Record {
				id := fmt.Sprintf("id-%d", i%ids)
				return &kgo.Record{Topic: "in", Key: []byte(id), Value: []byte(id)}
			}); err != nil {
				t.Fatal(err)
			}

			var mu sync.Mutex
			ran := map[string]int{}
			effect := func(_ context.Context, r topology.Record[string]) error {
				mu.Lock()
				ran[r.Value]++
				mu.Unlock()
				return nil
			}
			store, err := dedup.NewMemory()
			if err != nil {
				t.Fatal(err)
			}
			top := topology.New()
			in := topology.Source(top, "in", codec.String())
			var once topology.Stream[string]
			if c.none {
				once = topology.Peek(in, "effect", func(ctx context.Context, k []byte, v string) {
					_ = effect(ctx, topology.Record[string]{Key: k, Value: v})
				})
			} else {
				once = topology.Dedup(in, "once", func(r topology.Record[string]) string { return r.Value }, store, effect, c.opts...)
			}
			topology.To(once, "out", codec.String())

			h := env.Fake.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.EndTxn}, Err: kerr.UnknownServerError, Count: 3})
			cfg := env.Config("app", "a", config.ExactlyOnce)
			cfg.MaxBatchRecords = 100
			x := conformance.Start(t, cfg, top)
			x.WaitCommitted(t, 2*ids, 60*time.Second)
			if h.Hits() == 0 {
				t.Fatal("the EndTxn fault never hit; no batch was redone and the test proves nothing")
			}
			st := x.R.Stats()
			if st.Aborted == 0 {
				t.Fatalf("no batch aborted (stats %+v); the test proves nothing", st)
			}
			perID := map[string]int{}
			for _, r := range conformance.Drain(t, env, "out", 2*ids) {
				perID[string(r.Value)]++
			}
			for i := range ids {
				if id := fmt.Sprintf("id-%d", i); perID[id] != 2 {
					t.Errorf("the Kafka output holds %s %d times, want 2 (each input record once)", id, perID[id])
				}
			}

			mu.Lock()
			defer mu.Unlock()
			total := 0
			for _, n := range ran {
				total += n
			}
			if c.none {
				if total <= 2*ids {
					t.Fatalf("control: %d effects for %d inputs; the aborted batches should have repeated some", total, 2*ids)
				}
				t.Logf("control: %d effects for %d inputs (%d ids) after %d aborted batches", total, 2*ids, ids, st.Aborted)
				return
			}
			if len(ran) != ids {
				t.Errorf("effects ran for %d ids, want %d", len(ran), ids)
			}
			for id, n := range ran {
				if n != 1 {
					t.Errorf("effect of %s ran %d times, want once", id, n)
				}
			}
			t.Logf("%d effects for %d inputs (%d ids) after %d aborted batches", total, 2*ids, ids, st.Aborted)
		})
	}
}
