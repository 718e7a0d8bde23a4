package eos

import (
	"context"
	"testing"

	"github.com/eosflow/eosflow/internal/store"

	"github.com/eosflow/eosflow/codec"
	"github.com/eosflow/eosflow/config"
	"github.com/eosflow/eosflow/internal/engine"
	"github.com/eosflow/eosflow/state"
	"github.com/eosflow/eosflow/topology"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Updates held back by a batch that ended without a flush (one set to
// abort, or cut short by a slow record) are gone when the next batch
// begins: they can never reach another batch's transaction.
func TestNewBatchStartsWithNothingHeld(t *testing.T) {
	cfg := config.Default()
	cfg.Brokers, cfg.AppID = []string{"127.0.0.1:9092"}, "app"
	top := topology.New()
	src := topology.Source(top, "in", codec.Bytes())
	counts := topology.Count(topology.GroupByKey(src, "by-key"), "counts", state.Memory(), topology.LatestPerCommit())
	topology.ToTable(counts, "out", codec.JSON[int64]())
	r, err := New(cfg, top)
	if err != nil {
		t.Fatal(err)
	}
	task := state.Task{Topic: "in", Partition: 0}
	s, err := store.Open(state.Memory(), t.TempDir(), "counts", task)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	r.state.open[task] = map[string]*store.Store{"counts": s}
	r.state.ready[task] = true
	r.state.beginRecord()
	if o, err := r.proc.Process(context.Background(), &kgo.Record{Topic: "in", Key: []byte("k")}, func(*kgo.Record) {}); o != engine.Processed || err != nil {
		t.Fatalf("Process: %v %v", o, err)
	}
	if r.proc.Held() != 1 {
		t.Fatalf("%d updates held, want 1", r.proc.Held())
	}
	b := r.loop.newBatch(context.Background(), nil)
	defer b.stop()
	if n := r.proc.Held(); n != 0 {
		t.Fatalf("the next batch began with %d updates of the last one held", n)
	}
}
