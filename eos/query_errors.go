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
	Err       error  // ErrNotOwner, ErrRestoring or ErrStopped
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
	case errors.Is(e.Err, ErrRestoring):
		hint = "; retry once the store has caught up"
	case errors.Is(e.Err, ErrStopped):
		hint = "; start Run first"
	}
	return fmt.Sprintf("store %q, %s: %v%s", e.Store, what, e.Err, hint)
}

// Unwrap exposes the sentinel.
func (e *QueryError) Unwrap() error { return e.Err }
