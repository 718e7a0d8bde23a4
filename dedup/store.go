package dedup

import (
	"context"
	"fmt"
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

// DefaultTimeout bounds each call of the Redis and Postgres stores (and the
// connection it may need) when no Timeout option is given, so that a store
// that does not answer returns an error instead of stalling the pipeline.
const DefaultTimeout = 5 * time.Second

// MinTTL is the shortest time to live a Mark accepts: the stores keep expiries
// in milliseconds.
const MinTTL = time.Millisecond

// check validates the arguments every store's Mark takes.
func check(id string, ttl time.Duration) error {
	if err := checkID(id); err != nil {
		return err
	}
	if ttl < MinTTL {
		return fmt.Errorf("%w: ttl %v for id %q: use at least %v; keep ids twice the longest redelivery window", ErrInvalid, ttl, id, MinTTL)
	}
	return nil
}

func checkID(id string) error {
	if id == "" {
		return fmt.Errorf("%w: empty id: every message needs an id that is the same on each delivery", ErrInvalid)
	}
	return nil
}

// millis rounds ttl up to whole milliseconds, so a mark never lives shorter
// than asked.
func millis(ttl time.Duration) int64 {
	return int64((ttl + time.Millisecond - 1) / time.Millisecond)
}

// Timeout bounds each call of a Redis or Postgres store, including the
// connection it may need to open, overriding DefaultTimeout (5s). A caller's
// earlier context deadline still wins.
func Timeout(d time.Duration) timeoutOption { return timeoutOption(d) }

type timeoutOption time.Duration

func (o timeoutOption) applyRedis(c *redisConfig)       { c.timeout = time.Duration(o) }
func (o timeoutOption) applyPostgres(c *postgresConfig) { c.timeout = time.Duration(o) }

func checkTimeout(d time.Duration) error {
	if d <= 0 {
		return fmt.Errorf("%w: timeout %v: use a positive duration such as %v", ErrInvalid, d, DefaultTimeout)
	}
	return nil
}
