// Package lease holds the answer of a dedup store's Claim (see
// dedup.Leaser, which re-exports it as dedup.Claim), in a package of its
// own with no dependencies.
package lease

import (
	"fmt"
	"time"
)

// State is what a Claim found.
type State int

const (
	// Claimed: the caller holds the id's lease and runs the effect.
	Claimed State = iota + 1
	// Pending: another owner holds a live lease; its effect may be
	// running. Wait for it (claim again) and never skip the effect.
	Pending
	// Done: the effect happened; skip it.
	Done
)

// String names the state, for logs.
func (s State) String() string {
	switch s {
	case Claimed:
		return "claimed"
	case Pending:
		return "pending"
	case Done:
		return "done"
	}
	return fmt.Sprintf("State(%d)", int(s))
}

// Claim is a claim's answer.
type Claim struct {
	State State
	// Owner holds the lease of a Pending id.
	Owner string
	// Left is how long a Pending id's lease still runs, by the store's
	// clock: a waiter claims again within it.
	Left time.Duration
}
