package eos

import (
	"testing"

	"github.com/eosflow/eosflow/internal/store"

	"github.com/eosflow/eosflow/internal/graph"
	"github.com/eosflow/eosflow/state"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"
)

// A batch's store writes reach the engine only when it commits: an abort
// drops them and has the task catch up from its changelog, a failed
// record's writes go alone, and a commit applies the rest with the offset
// of the batch's last changelog record.
func TestTaskStoresFollowTheBatch(t *testing.T) {
	task := state.Task{Topic: "in", Partition: 2}
	ts := newTaskStores([]graph.Store{{Name: "counts", Engine: state.Memory(), Source: "in"}}, nil, t.TempDir(), "app", zap.NewNop())
	s, err := store.Open(state.Memory(), t.TempDir(), "counts", task)
	if err != nil {
		t.Fatal(err)
	}
	ts.open[task] = map[string]*store.Store{"counts": s}
	ts.ready[task] = true
	write := func(key string, fail bool) {
		ts.beginRecord()
		st, err := ts.store("counts", task)
		if err != nil {
			t.Fatal(err)
		}
		if err := st.Put([]byte(key), []byte("v")); err != nil {
			t.Fatal(err)
		}
		if fail {
			ts.failRecord()
		}
	}
	has := func(key string) bool {
		_, ok, _ := s.Get([]byte(key))
		return ok
	}

	write("aborted", false)
	ts.aborted()
	if has("aborted") || ts.ready[task] {
		t.Fatal("an aborted batch's write stayed, or its task was not sent to catch up")
	}

	ts.ready[task] = true
	write("kept", false)
	write("dead-lettered", true)
	var produced []*kgo.Record
	ts.produceChanges(func(r *kgo.Record) { produced = append(produced, r) })
	if len(produced) != 1 || string(produced[0].Key) != "kept" || produced[0].Topic != "app-counts-changelog" || produced[0].Partition != 2 {
		t.Fatalf("changelog records %v, want only kept, to app-counts-changelog/2", produced)
	}
	produced[0].Offset = 41 // as the producer sets it
	ts.committed()
	if !has("kept") || has("dead-lettered") || s.Offset() != 41 {
		t.Fatalf("after commit: kept %v, dead-lettered %v, offset %d; want true, false, 41", has("kept"), has("dead-lettered"), s.Offset())
	}
}

// A store whose unchecked batches reach maxUnchecked sends its task to
// catch up before its next record, which reads them back, so what a store
// writes with each batch and what a restore checks at open stay bounded.
func TestTaskStoresBoundUncheckedBatches(t *testing.T) {
	task := state.Task{Topic: "in", Partition: 0}
	ts := newTaskStores([]graph.Store{{Name: "counts", Engine: state.Memory(), Source: "in"}}, nil, t.TempDir(), "app", zap.NewNop())
	s, err := store.Open(state.Memory(), t.TempDir(), "counts", task)
	if err != nil {
		t.Fatal(err)
	}
	ts.open[task] = map[string]*store.Store{"counts": s}
	ts.ready[task] = true
	for i := range maxUnchecked {
		if !ts.ready[task] {
			t.Fatalf("the task was sent to catch up after %d unchecked batches, want %d", i, maxUnchecked)
		}
		ts.beginRecord()
		st, err := ts.store("counts", task)
		if err != nil {
			t.Fatal(err)
		}
		if err := st.Put([]byte("k"), []byte("v")); err != nil {
			t.Fatal(err)
		}
		ts.produceChanges(func(r *kgo.Record) { r.Offset = int64(2 * i) })
		ts.committed()
	}
	if n := len(s.Position().Unchecked); n != maxUnchecked || ts.ready[task] {
		t.Fatalf("%d unchecked batches, task ready %v; want %d and the task sent to catch up", n, ts.ready[task], maxUnchecked)
	}
}
