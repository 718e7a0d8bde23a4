package engine

import (
	"github.com/eosflow/eosflow/internal/graph"
	"github.com/eosflow/eosflow/internal/store"
)

// attempts follows the call of a node whose user code can write stores
// and may be retried (a Process node or a timer under a Retry policy): the
// stores its attempts reached, each with the savepoint taken when the
// call first reached it. A retry rolls them back, so that each attempt
// starts from the state the first one found instead of over the writes of
// the one that failed, while the writes of the record's earlier nodes
// stay (a retry calls the failing node again, not the record's earlier
// nodes). The runtime's per-record savepoint (store.Store.Mark) still
// undoes them all if the record is not processed in the end.
type attempts struct {
	on    bool // a call that may be retried is under way
	node  int
	saved []savedStore
}

// savedStore is a store a call reached, and where its writes stood then.
type savedStore struct {
	s  *store.Store
	sp store.Savepoint
}

// Attempt implements graph.Exec.
func (e *Engine) Attempt(node, attempt int) {
	a := &e.att
	if attempt == 0 {
		p := e.g.Nodes[node].Policy
		a.on, a.node = p.Kind == graph.PolicyRetry && p.Attempts > 1, node
		clear(a.saved)
		a.saved = a.saved[:0]
		return
	}
	if !a.on || a.node != node {
		return
	}
	for _, sv := range a.saved {
		sv.s.RollbackTo(sv.sp)
	}
}

// reached notes that the call under way reached s, saving where its
// writes stand the first time.
func (a *attempts) reached(s *store.Store) {
	for _, sv := range a.saved {
		if sv.s == s {
			return
		}
	}
	a.saved = append(a.saved, savedStore{s: s, sp: s.Savepoint()})
}

// end ends the call under way, as a step (a record, an update, a timer
// firing) begins.
func (a *attempts) end() {
	if a.on {
		a.on = false
		clear(a.saved)
		a.saved = a.saved[:0]
	}
}
