package pebble

import (
	"errors"
	"fmt"
	"strings"
	"syscall"

	pebbledb "github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/eosflow/eosflow/state"
)

// The engine's stores outlive the process, for Inspect to find.
var _ state.Persistent = (*engine)(nil)

// Inspect lists the pebble stores under dir, the state directory of one
// instance: state.Inspect with the engine New returns, for `eosctl app
// describe`.
func Inspect(dir string) ([]state.StoreInfo, error) {
	return state.Inspect(&engine{}, dir)
}

// AppliedOffset implements state.Persistent: it opens the database at
// path read-only, just long enough to read the offset the engine stored
// with its data. A path that holds no pebble database is not a store.
func (e *engine) AppliedOffset(path string) (offset int64, ok bool, err error) {
	fs := e.fs
	if fs == nil {
		fs = vfs.Default
	}
	if desc, err := pebbledb.Peek(path, fs); err != nil || !desc.Exists {
		return state.NoOffset, false, nil
	}
	opts := &pebbledb.Options{ReadOnly: true, ErrorIfNotExists: true, FS: e.fs, Logger: quiet{}}
	db, err := pebbledb.Open(path, opts)
	if err != nil {
		if locked(err) {
			return state.NoOffset, true, fmt.Errorf("%w: %s", state.ErrInUse, path)
		}
		return state.NoOffset, true, err
	}
	defer db.Close()
	offset, err = (&backend{db: db}).offset()
	return offset, true, err
}

// The errors fcntl gives when another process holds a lock.
var errLockBusy, errLockDenied error = syscall.EAGAIN, syscall.EACCES

// locked reports whether err is pebble's failure to take the directory
// lock: another process holds it (EAGAIN or EACCES from fcntl, depending
// on the system), or this one does.
func locked(err error) bool {
	return errors.Is(err, errLockBusy) || errors.Is(err, errLockDenied) ||
		strings.Contains(err.Error(), "lock held by current process")
}
