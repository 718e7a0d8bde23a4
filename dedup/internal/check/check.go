// Package check validates the arguments every dedup store takes, so that
// the memory store and the Redis and Postgres stores refuse the same calls
// with the same errors. Package dedup re-exports its ErrInvalid, so it
// imports nothing outside the standard library.
package check

import (
	"errors"
	"fmt"
	"time"
)

// ErrInvalid is dedup.ErrInvalid.
var ErrInvalid = errors.New("dedup: invalid argument")

// MinTTL is dedup.MinTTL; a test of package dedup keeps them equal.
const MinTTL = time.Millisecond

// Mark validates the arguments every store's Mark takes.
func Mark(id string, ttl time.Duration) error {
	if err := ID(id); err != nil {
		return err
	}
	if ttl < MinTTL {
		return fmt.Errorf("%w: ttl %v for id %q: use at least %v; keep ids twice the longest redelivery window", ErrInvalid, ttl, id, MinTTL)
	}
	return nil
}

// ID refuses an empty id.
func ID(id string) error {
	if id == "" {
		return fmt.Errorf("%w: empty id: every message needs an id that is the same on each delivery", ErrInvalid)
	}
	return nil
}

// Claim validates the arguments of a Leaser's Claim.
func Claim(id, owner string, lease, ttl time.Duration) error {
	if err := Mark(id, ttl); err != nil {
		return err
	}
	if owner == "" {
		return fmt.Errorf("%w: empty owner for id %q: name the instance that runs the effect", ErrInvalid, id)
	}
	if lease < MinTTL {
		return fmt.Errorf("%w: lease %v for id %q: use at least %v, longer than the longest pause of a process", ErrInvalid, lease, id, MinTTL)
	}
	return nil
}

// Timeout refuses a call timeout that is not positive; def is the default
// the message suggests.
func Timeout(d, def time.Duration) error {
	if d <= 0 {
		return fmt.Errorf("%w: timeout %v: use a positive duration such as %v", ErrInvalid, d, def)
	}
	return nil
}

// Millis rounds ttl up to whole milliseconds, so a mark never lives shorter
// than asked: the stores keep expiries in milliseconds.
func Millis(ttl time.Duration) int64 {
	return int64((ttl + time.Millisecond - 1) / time.Millisecond)
}
