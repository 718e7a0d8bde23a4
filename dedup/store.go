package dedup

import (
	"context"
	"time"
)

// Store remembers message ids for a while, so that an effect that must happen
// once per message can be skipped when the message comes again.
type Store interface {
	// Mark records id for ttl and reports whether this call recorded it:
	// first is true for exactly one of any number of concurrent or repeated
	// calls while the id lives, and false while it is still remembered. An
	// id that expired (or was forgotten) can be marked first again.
	Mark(ctx context.Context, id string, ttl time.Duration) (first bool, err error)
	// Seen reports whether id is remembered now, without marking it. Seen
	// then Mark is not atomic: decide with Mark's result, not with Seen's.
	Seen(ctx context.Context, id string) (bool, error)
	// Forget removes id, so the next Mark of it is first again: for
	// mark-before when the effect failed and must be retried. Forgetting an
	// id that is not remembered is not an error.
	Forget(ctx context.Context, id string) error
}

// Approximate is a Store that can report an id it never saw as seen (a
// false positive), at about FalsePositiveRate of new ids, as a Bloom filter
// does (redisdedup.Bloom). topology.Dedup refuses such a store unless told
// that losing those ids' effects is acceptable.
type Approximate interface {
	Store
	// FalsePositiveRate is the configured chance that an id never marked
	// is reported as seen, such as 0.01.
	FalsePositiveRate() float64
}

// Retainer is a Store that keeps every id for a retention fixed when it was
// built, whatever a Mark's ttl, and refuses a longer ttl (redisdedup.Bloom).
type Retainer interface {
	Store
	// Retention is how long an id is remembered at least, the longest ttl
	// Mark accepts.
	Retention() time.Duration
}

// DefaultTimeout bounds each call of the Redis and Postgres stores
// (redisdedup, pgdedup), and the connection it may need, when no Timeout
// option is given, so that a store that does not answer returns an error
// instead of stalling the pipeline.
const DefaultTimeout = 5 * time.Second

// MinTTL is the shortest time to live a Mark accepts: the stores keep
// expiries in milliseconds.
const MinTTL = time.Millisecond
