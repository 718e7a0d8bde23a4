package eos

import (
	"errors"
	"fmt"
	"strings"
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

// Range reads every task this Runner owns, in partition order, and only
// once all of them have caught up: while one restores it yields nothing
// but ErrRestoring, rather than part of the store.
func TestRangeWaitsForEveryOwnedTask(t *testing.T) {
	ts := newTaskStores([]graph.Store{{Name: "counts", Engine: state.Memory(), Source: "in"}}, nil, t.TempDir(), "app", zap.NewNop())
	r := &Runner{state: ts}
	r.health.running.Store(true)
	q := &StoreQuery{r: r, spec: ts.specs[0]}
	ts.assign(map[string][]int32{"in": {0, 1}})
	ts.sync()
	for p, key := range []string{"b", "a"} {
		task := state.Task{Topic: "in", Partition: int32(p)}
		s, err := store.Open(state.Memory(), "", "counts", task)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Restore([]state.Write{{Key: []byte(key), Value: []byte("1")}}, 0); err != nil {
			t.Fatal(err)
		}
		ts.open[task] = map[string]*store.Store{"counts": s}
	}
	rangeOf := func() string {
		out := ""
		for e, err := range q.Range(t.Context(), nil, nil) {
			if err != nil {
				return out + "error: " + err.Error()
			}
			out += fmt.Sprintf("%d:%s ", e.Partition, e.Key)
		}
		return out
	}
	ts.serveReady([]state.Task{{Topic: "in", Partition: 1}})
	if got := rangeOf(); !strings.HasPrefix(got, "error: ") || !strings.Contains(got, ErrRestoring.Error()) {
		t.Fatalf("one task restoring: range %q, want only ErrRestoring", got)
	}
	ts.serveReady([]state.Task{{Topic: "in", Partition: 0}})
	if got := rangeOf(); got != "0:b 1:a " {
		t.Fatalf("both served: range %q, want 0:b 1:a", got)
	}
	ts.revoke(map[string][]int32{"in": {0}})
	if got := rangeOf(); got != "1:a " {
		t.Fatalf("partition 0 revoked: range %q, want 1:a", got)
	}
	ts.closeAll()
	r.health.running.Store(false)
	if got := rangeOf(); !strings.HasPrefix(got, "error: ") || !strings.Contains(got, ErrStopped.Error()) {
		t.Fatalf("stopped: range %q, want ErrStopped", got)
	}
}
