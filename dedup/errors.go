package dedup

import (
	"context"
	"errors"
	"fmt"
	"net"

	"github.com/eosflow/eosflow/dedup/internal/check"
)

// ErrInvalid means a constructor or call got an argument it cannot use (an
// empty id, a ttl below MinTTL, a malformed URL or table name); nothing was
// sent to the store.
var ErrInvalid = check.ErrInvalid

// ErrStore matches every *StoreError: the store did not answer or refused the
// command. Whether the message is then processed (fail open) or not (fail
// closed) is the caller's decision.
var ErrStore = errors.New("dedup: store failed")

// ErrCannotForget is returned by redisdedup.Bloom's Forget: a Bloom filter
// cannot remove an id, as its bits are shared with other ids. Mark after
// the effect succeeded instead, or use an exact store.
var ErrCannotForget = errors.New("dedup: a Bloom filter cannot forget an id")

// ErrClosed is returned by every call on a closed Redis or Postgres store
// (redisdedup, pgdedup).
var ErrClosed = errors.New("dedup: store closed")

// StoreError is a failed call to a Redis or Postgres store (redisdedup,
// pgdedup). It names the store, the address it talked to and the id, so a
// log line says which server to look at.
type StoreError struct {
	Store string // "redis" or "postgres"
	Addr  string // host:port
	Op    string // "mark", "seen", "forget", "purge", "connect", "create table"
	ID    string // the message id; empty for connect, create table and purge
	Err   error
}

// Error names the store, its address, the operation and the id.
func (e *StoreError) Error() string {
	what := e.Op
	if e.ID != "" {
		what = fmt.Sprintf("%s %q", e.Op, e.ID)
	}
	hint := ""
	if unreachable(e.Err) {
		hint = ": is the server up and reachable (not stopped, not cut off)?" + inspect(e.Store, e.Addr)
	}
	return fmt.Sprintf("dedup: %s at %s: %s: %v%s", e.Store, e.Addr, what, e.Err, hint)
}

// unreachable reports whether err says the server could not be reached in
// time, rather than that it refused the command.
func unreachable(err error) bool {
	var ne net.Error
	return errors.Is(err, context.DeadlineExceeded) || errors.As(err, &ne)
}

// inspect is " check with: COMMAND" for a command that asks the server at
// addr whether it answers, or "" for a store it knows no command for.
func inspect(store, addr string) string {
	host, port, err := net.SplitHostPort(addr)
	switch {
	case err != nil:
		return ""
	case store == "redis":
		return " check with: redis-cli -h " + host + " -p " + port + " ping"
	case store == "postgres":
		return " check with: pg_isready -h " + host + " -p " + port
	}
	return ""
}

// Unwrap gives the client's error, e.g. a context.DeadlineExceeded or a
// *net.OpError.
func (e *StoreError) Unwrap() error { return e.Err }

// Is makes errors.Is(err, ErrStore) hold.
func (e *StoreError) Is(target error) bool { return target == ErrStore }
