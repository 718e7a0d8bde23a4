package eos

import (
	"errors"
	"maps"
	"sync"

	"github.com/eosflow/eosflow/internal/store"
	"github.com/eosflow/eosflow/state"
)

// serving is what queries from outside the pipeline may read: the stores
// of the tasks this instance owns that caught up with their changelogs.
// A task enters it once its restore is done and leaves it, under the
// write lock, before anything could make its stores stale or unusable: a
// revoke or loss, an assignment (a new owner must catch up first), a new
// client, an aborted batch, a failed apply, a close. Readers hold the read
// lock while they read an engine, so a store never closes or wipes under
// them; the batch loop's Apply may run meanwhile (state.Backend allows it)
// and only ever adds committed data.
type serving struct {
	mu    sync.RWMutex
	tasks map[state.Task]map[string]*store.Store
}

// errNotServing means the task's stores are not readable here now.
var errNotServing = errors.New("not serving")

// add makes the stores of t readable.
func (sv *serving) add(t state.Task, stores map[string]*store.Store) {
	sv.mu.Lock()
	defer sv.mu.Unlock()
	if sv.tasks == nil {
		sv.tasks = map[state.Task]map[string]*store.Store{}
	}
	sv.tasks[t] = maps.Clone(stores)
}

// drop stops reads of t's stores, waiting for those under way.
func (sv *serving) drop(t state.Task) {
	sv.mu.Lock()
	defer sv.mu.Unlock()
	delete(sv.tasks, t)
}

// dropAll stops every read, waiting for those under way.
func (sv *serving) dropAll() {
	sv.mu.Lock()
	defer sv.mu.Unlock()
	clear(sv.tasks)
}

// read calls fn with store name of task t while t is served, and
// errNotServing when it is not.
func (sv *serving) read(name string, t state.Task, fn func(*store.Store) error) error {
	sv.mu.RLock()
	defer sv.mu.RUnlock()
	s := sv.tasks[t][name]
	if s == nil {
		return errNotServing
	}
	return fn(s)
}

// served lists the tasks of topic whose stores are readable now.
func (sv *serving) served(topic string) []state.Task {
	sv.mu.RLock()
	defer sv.mu.RUnlock()
	var out []state.Task
	for t := range sv.tasks {
		if t.Topic == topic {
			out = append(out, t)
		}
	}
	return out
}

// serveReady makes the stores of tasks, restored just now, readable by
// queries, unless a rebalance took or gave them again since: those catch
// up first.
func (ts *taskStores) serveReady(tasks []state.Task) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	for _, t := range tasks {
		if ts.own[t] && !ts.assigned[t] && !ts.revoked[t] && !ts.owner.unconfirmed[t] && !ts.owner.taken[t] && ts.open[t] != nil {
			ts.serve.add(t, ts.open[t])
		}
	}
}

// owns reports whether this instance is assigned task t now, as far as
// queries know: not one the group listed as another's (see ownership).
func (ts *taskStores) owns(t state.Task) bool {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	return ts.own[t] && !ts.owner.taken[t]
}

// ownedTasks lists the tasks of topic owned here now, as owns sees them.
func (ts *taskStores) ownedTasks(topic string) []state.Task {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	var out []state.Task
	for t := range ts.own {
		if t.Topic == topic && !ts.owner.taken[t] {
			out = append(out, t)
		}
	}
	return out
}

// restoring is why owned task t is not served: ErrAwaitingGroup while
// the group has not confirmed it since the assignment changed, else
// ErrRestoring; nil when t is not owned here.
func (ts *taskStores) restoring(t state.Task) error {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	switch {
	case !ts.own[t] || ts.owner.taken[t]:
		return nil
	case ts.owner.unconfirmed[t]:
		return ErrAwaitingGroup
	}
	return ErrRestoring
}
