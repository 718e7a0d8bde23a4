package pgsink

import (
	"context"
	"errors"
	"fmt"
	"net"

	"github.com/jackc/pgx/v5/pgconn"
)

// ErrInvalid means New got an argument it cannot use; nothing was started.
var ErrInvalid = errors.New("pgsink: invalid argument")

// ErrDatabase matches every *DatabaseError.
var ErrDatabase = errors.New("pgsink: database failed")

// DatabaseError is a database failure that did not heal within the
// configuration's recovery_timeout, or one that no retry can heal (a
// statement the database refused). The offsets table holds where each
// partition resumes: without the failed batch, or with it when its
// commit's answer was lost (Unsure) and the commit landed.
type DatabaseError struct {
	Addr  string // host:port of the database
	Op    string // what was being done: "create tables", "claim partitions", "commit batch", ...
	Batch string // the batch's partitions and offsets, when there was one
	Err   error
	// Inspect is a query showing the group's stored offsets.
	Inspect string
	// Unsure is set when the batch's commit was sent but not answered,
	// and the offsets could not be read back: it may have committed.
	Unsure bool
}

// Error names the database, what failed, the batch and where to look.
func (e *DatabaseError) Error() string {
	b, outcome := "", "nothing of it committed"
	if e.Batch != "" {
		b = " (batch " + e.Batch + ")"
	}
	if e.Unsure {
		outcome = "its commit was not answered and may have landed"
	}
	return fmt.Sprintf("pgsink: postgres at %s: %s%s: %v%s; %s; the offsets each partition resumes from: %s",
		e.Addr, e.Op, b, e.Err, silent(e.Addr, e.Err), outcome, e.Inspect)
}

// silent is a hint for an error that says the database did not answer in
// time, with a command to check it; "" for any other error.
func silent(addr string, err error) string {
	if !errors.Is(err, context.DeadlineExceeded) && !pgconn.Timeout(err) {
		return ""
	}
	host, port, _ := net.SplitHostPort(addr)
	return fmt.Sprintf(" (postgres did not answer in time: is it up, and not stopped or cut off? check with: pg_isready -h %s -p %s)", host, port)
}

// Unwrap gives the cause: a *pgconn.PgError, a network error, a handler's
// error.
func (e *DatabaseError) Unwrap() error { return e.Err }

// Is makes errors.Is(err, ErrDatabase) hold.
func (e *DatabaseError) Is(target error) bool { return target == ErrDatabase }
