package eos

import (
	"errors"
	"testing"

	"github.com/eosflow/eosflow/internal/graph"
	"github.com/eosflow/eosflow/internal/store"
	"github.com/eosflow/eosflow/state"
	"go.uber.org/zap"
)

// Queries read a task's stores only between its restore and whatever
// could make them stale or closed: a revoke, an assignment again, a new
// client, an aborted batch, a close. A restore that finishes after the
// task was revoked does not make it readable.
func TestServingFollowsOwnership(t *testing.T) {
	task := state.Task{Topic: "in", Partition: 1}
	ts := newTaskStores([]graph.Store{{Name: "counts", Engine: state.Memory(), Source: "in"}}, nil, t.TempDir(), "app", zap.NewNop())
	readable := func() bool {
		err := ts.serve.read("counts", task, func(*store.Store) error { return nil })
		if err != nil && !errors.Is(err, errNotServing) {
			t.Fatal(err)
		}
		return err == nil
	}
	restored := func() {
		ts.sync()
		if ts.open[task] == nil {
			s, err := store.Open(state.Memory(), "", "counts", task)
			if err != nil {
				t.Fatal(err)
			}
			ts.open[task] = map[string]*store.Store{"counts": s}
		}
		ts.ready[task] = true
		ts.serveReady([]state.Task{task})
	}
	got := map[string][]int32{"in": {1}}
	steps := []struct {
		what string
		do   func()
		want bool
	}{
		{"assigned, not restored", func() { ts.assign(got) }, false},
		{"restored", restored, true},
		{"revoked", func() { ts.revoke(got) }, false},
		{"a restore that ends after the revoke", func() { ts.ready[task] = true; ts.serveReady([]state.Task{task}) }, false},
		{"assigned again and restored", func() { ts.sync(); ts.assign(got); restored() }, true},
		{"a new client", ts.reload, false},
		{"restored after it", restored, true},
		{"an aborted batch", func() { ts.dirty[ts.open[task]["counts"]] = task; ts.aborted() }, false},
		{"restored after the abort", restored, true},
		{"assigned again while readable", func() { ts.assign(got) }, false},
		{"restored once more", restored, true},
		{"closed", ts.closeAll, false},
	}
	for _, s := range steps {
		s.do()
		if r := readable(); r != s.want {
			t.Fatalf("%s: readable %v, want %v", s.what, r, s.want)
		}
	}
}
