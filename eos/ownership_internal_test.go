package eos

import (
	"errors"
	"testing"

	"github.com/eosflow/eosflow/internal/graph"
	"github.com/eosflow/eosflow/internal/store"
	"github.com/eosflow/eosflow/state"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"
)

// reconcile follows the client's committed offsets where no revoke
// callback came: a task whose offset the client dropped is no longer
// owned and closes; at a new generation a task that never had an offset
// is not served until one shows; a task assigned since the last sync is
// ours whatever the offsets say.
func TestReconcileWithoutCallbacks(t *testing.T) {
	ts := newTaskStores([]graph.Store{{Name: "counts", Engine: state.Memory(), Source: "in"}}, nil, t.TempDir(), "app", zap.NewNop())
	defer ts.closeAll()
	kept, taken, idle := state.Task{Topic: "in", Partition: 0}, state.Task{Topic: "in", Partition: 1}, state.Task{Topic: "in", Partition: 2}
	ts.assign(map[string][]int32{"in": {0, 1, 2}})
	ts.reconcile(1, nil) // assigned since the last sync: nothing is touched
	ts.sync()
	for _, task := range []state.Task{kept, taken, idle} {
		s, err := store.Open(state.Memory(), "", "counts", task)
		if err != nil {
			t.Fatal(err)
		}
		ts.open[task] = map[string]*store.Store{"counts": s}
		ts.ready[task] = true
	}
	ts.serveReady([]state.Task{kept, taken, idle})
	served := func(task state.Task) bool {
		err := ts.serve.read("counts", task, func(*store.Store) error { return nil })
		if err != nil && !errors.Is(err, errNotServing) {
			t.Fatal(err)
		}
		return err == nil
	}
	offsets := func(ps ...int32) map[string]map[int32]kgo.EpochOffset {
		m := map[int32]kgo.EpochOffset{}
		for _, p := range ps {
			m[p] = kgo.EpochOffset{Epoch: -1, Offset: 10}
		}
		return map[string]map[int32]kgo.EpochOffset{"in": m}
	}
	check := func(what string, task state.Task, owned, serving bool) {
		t.Helper()
		if ts.owns(task) != owned || served(task) != serving {
			t.Fatalf("%s: %s owned %v served %v, want %v %v", what, task, ts.owns(task), served(task), owned, serving)
		}
	}

	ts.reconcile(1, offsets(0, 1)) // batches committed on 0 and 1
	ts.sync()
	check("same generation", idle, true, true)
	ts.reconcile(2, offsets(0)) // a swallowed revoke took 1
	ts.sync()
	check("offset kept", kept, true, true)
	check("offset dropped", taken, false, false)
	if ts.open[taken] != nil {
		t.Fatalf("%s: stores still open after its revoke", taken)
	}
	check("no offset, new generation", idle, true, false)
	ts.serveReady([]state.Task{idle})
	check("no offset, a restore ends", idle, true, false)
	ts.reconcile(2, offsets(0, 2)) // its first batch committed
	check("an offset shows", idle, true, true)
}
