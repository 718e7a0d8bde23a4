package dedup

import (
	"context"
	"time"

	"github.com/eosflow/eosflow/dedup/lease"
)

// Leaser is a Store that can hold an id pending while its effect runs, so
// that mark-before never skips an effect that has not happened, and no two
// owners run one effect at once in either mode: the mark is
// first written as "pending, owner X, lease until T", and becomes done only
// when the effect completed. Another owner that finds the id pending waits
// for it to become done, or takes it over once the lease has expired (its
// owner died mid-effect); the effect then runs again, which is the honest
// contract for an owner that died mid-effect: at least once, never zero
// times. Memory and the stores of redisdedup (Store, SortedSet) and pgdedup
// are Leasers; redisdedup.Bloom is not (a Bloom filter cannot drop an id).
type Leaser interface {
	Store
	// Claim marks id pending for owner until lease from now, with ttl
	// as the mark's life, unless the id is done, or pending for another
	// owner whose lease has not expired; it says which (Claim.State). An
	// id pending for owner itself, or for another owner past its lease,
	// is claimed (the lease renewed, or taken over).
	Claim(ctx context.Context, id, owner string, lease, ttl time.Duration) (Claim, error)
	// Complete marks id done for ttl, whoever holds it: the effect
	// happened, so no redelivery may run it again.
	Complete(ctx context.Context, id string, ttl time.Duration) error
	// Release removes id if it is pending for owner, so the next Claim
	// runs the effect: for an effect that failed. A done id, or one
	// another owner took over, is left alone.
	Release(ctx context.Context, id, owner string) error
}

// Claim is Claim's answer; see package lease.
type Claim = lease.Claim

// ClaimState is what a Claim found; see package lease.
type ClaimState = lease.State

// The states a Claim reports; see package lease.
const (
	Claimed = lease.Claimed
	Pending = lease.Pending
	Done    = lease.Done
)
