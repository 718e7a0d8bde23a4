package eos

import (
	"errors"
	"fmt"
)

// ErrNotOwner means this Runner does not own the partition a queried key
// maps to: another instance owns it, or a rebalance is moving it. The
// answer is not stale data: ask the owner (see StoreQuery.Locate).
var ErrNotOwner = errors.New("eos: partition not owned here")

// ErrRestoring means this Runner owns the key's partition but its store
// has not caught up with its changelog yet (just assigned, a new client,
// or a batch that aborted): ask again shortly.
var ErrRestoring = errors.New("eos: store restoring")

// ErrAwaitingGroup is the ErrRestoring of a partition this Runner owns
// whose assignment the group's coordinator has not confirmed since it
// changed (see docs/state.md, "The bound"): errors.Is matches it against
// ErrRestoring too. It lasts until the batch under way ends and the
// group, described, lists the partition as this member's; the log warns
// when the group does not settle for seconds.
var ErrAwaitingGroup = fmt.Errorf("%w: waiting for the group coordinator to confirm the assignment", ErrRestoring)

// ErrStopped means Run is not running (not started yet, or returned), so
// this Runner owns no partitions and its stores are closed.
var ErrStopped = errors.New("eos: runner not running")

// ErrUnknownStore means the topology declares no store of that name.
var ErrUnknownStore = errors.New("eos: unknown store")

// QueryError is why a query of a store could not be answered: errors.Is
// matches it against ErrNotOwner, ErrRestoring or ErrStopped, and it names
// the store and partition, so that a caller can route the query.
type QueryError struct {
	Store     string
	Topic     string // the store's source topic, whose partitions are its tasks
	Partition int32  // the partition asked about; -1 for a whole-store read
	Err       error  // ErrNotOwner, ErrRestoring (or ErrAwaitingGroup) or ErrStopped
}

// Error names the store, the partition and what to do.
func (e *QueryError) Error() string {
	what := "all partitions"
	if e.Partition >= 0 {
		what = fmt.Sprintf("partition %d of %s", e.Partition, e.Topic)
	}
	hint := ""
	switch {
	case errors.Is(e.Err, ErrNotOwner):
		hint = "; ask the instance that owns it"
	case errors.Is(e.Err, ErrAwaitingGroup):
		hint = "; retry once the group has settled"
	case errors.Is(e.Err, ErrRestoring):
		hint = "; retry once the store has caught up"
	case errors.Is(e.Err, ErrStopped):
		hint = "; start Run first"
	}
	return fmt.Sprintf("store %q, %s: %v%s", e.Store, what, e.Err, hint)
}

// Unwrap exposes the sentinel.
func (e *QueryError) Unwrap() error { return e.Err }
