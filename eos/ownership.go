package eos

import (
	"slices"

	"github.com/eosflow/eosflow/state"
	"github.com/twmb/franz-go/pkg/kgo"
)

// ownership is what taskStores keeps to check its view of the tasks it
// owns against the client's, since a revoke callback may never come:
// franz-go's transact session passes on only the first revoke or loss
// after an End and drops the rest until the next End ends.
type ownership struct {
	gen     int32 // the group generation last checked; genSeen false: none yet
	genSeen bool
	// committedHere are the owned tasks seen with a committed offset in
	// the client: when the client no longer has one, a revoke took it.
	committedHere map[state.Task]bool
	// unconfirmed are owned tasks that a new generation may have taken
	// without a word and whose partitions have no committed offset to
	// tell: they are not served until one shows or they are assigned again.
	unconfirmed map[state.Task]bool
}

// syncState applies the rebalances noted since the last batch, first
// checking the tasks owned against the client's committed offsets under
// exactly-once (see reconcile).
func (l *streamLoop) syncState(s session) {
	if _, ok := s.(*txnSession); ok {
		cl := s.client()
		_, gen := cl.GroupMetadata()
		l.state.reconcile(gen, cl.CommittedOffsets())
	}
	l.state.sync()
}

// reconcile checks the tasks owned against held, the client's committed
// offsets (heldTasks), whatever the callbacks passed on: franz-go drops a
// revoked or lost partition's offsets every time. A task that had an
// offset and lost it was revoked, and closes at sync. At a new group
// generation, an owned task that never had one stops being served, as
// nothing says whether it is still ours; tasks assigned since the last
// sync are.
func (ts *taskStores) reconcile(gen int32, held map[string]map[int32]kgo.EpochOffset) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	owned := make([]state.Task, 0, len(ts.own))
	for t := range ts.own {
		owned = append(owned, t)
	}
	holding, _ := heldTasks(slices.Clone(owned), held)
	for _, t := range holding {
		ts.owner.committedHere[t] = true
		if ts.owner.unconfirmed[t] {
			delete(ts.owner.unconfirmed, t)
			if ts.ready[t] && !ts.assigned[t] && ts.open[t] != nil {
				ts.serve.add(t, ts.open[t])
			}
		}
	}
	newGen := ts.owner.genSeen && gen != ts.owner.gen
	ts.owner.gen, ts.owner.genSeen = gen, true
	for _, t := range owned {
		switch {
		case slices.Contains(holding, t) || ts.assigned[t]:
		case ts.owner.committedHere[t]:
			ts.serve.drop(t)
			ts.revoked[t] = true
			delete(ts.own, t)
			delete(ts.owner.committedHere, t)
		case newGen:
			ts.serve.drop(t)
			ts.owner.unconfirmed[t] = true
		}
	}
}

// forgetOwnership resets what reconcile learnt of task t (nil: of every
// task), which a callback or a new client just settled.
func (ts *taskStores) forgetOwnership(t *state.Task) {
	if t == nil {
		ts.owner.genSeen = false
		clear(ts.owner.committedHere)
		clear(ts.owner.unconfirmed)
		return
	}
	delete(ts.owner.committedHere, *t)
	delete(ts.owner.unconfirmed, *t)
}
