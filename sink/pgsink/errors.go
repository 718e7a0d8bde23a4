package pgsink

import (
	"errors"
	"fmt"
)

// ErrInvalid means New got an argument it cannot use; nothing was started.
var ErrInvalid = errors.New("pgsink: invalid argument")

// ErrDatabase matches every *DatabaseError.
var ErrDatabase = errors.New("pgsink: database failed")

// DatabaseError is a database failure that did not heal within the
// configuration's recovery_timeout, or one that no retry can heal (a
// statement the database refused). Nothing of the failed batch committed:
// the offsets table still holds where each partition resumes.
type DatabaseError struct {
	Addr  string // host:port of the database
	Op    string // what was being done: "create tables", "claim partitions", "commit batch", ...
	Batch string // the batch's partitions and offsets, when there was one
	Err   error
	// Inspect is a query showing the group's stored offsets.
	Inspect string
}

// Error names the database, what failed, the batch and where to look.
func (e *DatabaseError) Error() string {
	b := ""
	if e.Batch != "" {
		b = " (batch " + e.Batch + ")"
	}
	return fmt.Sprintf("pgsink: postgres at %s: %s%s: %v; nothing of it committed; the offsets each partition resumes from: %s", e.Addr, e.Op, b, e.Err, e.Inspect)
}

// Unwrap gives the cause: a *pgconn.PgError, a network error, a handler's
// error.
func (e *DatabaseError) Unwrap() error { return e.Err }

// Is makes errors.Is(err, ErrDatabase) hold.
func (e *DatabaseError) Is(target error) bool { return target == ErrDatabase }
