package state

import (
	"errors"
	"fmt"
	"syscall"
)

// ErrInvalid means Open or NewKV got an argument they cannot use (a nil
// engine or codec, a name that cannot be a directory or topic name).
var ErrInvalid = errors.New("state: invalid argument")

// ErrClosed is returned by every call on a closed store.
var ErrClosed = errors.New("state: store closed")

// ErrBatchOpen means Restore was called while the overlay holds a batch's
// writes; restore only between batches (commit or abort first).
var ErrBatchOpen = errors.New("state: restore while a batch has uncommitted writes: commit or abort it first")

// ErrInUse means Inspect found a store that a running instance has open:
// an engine such as pebble allows one process per database, so its offset
// cannot be read until that instance stops or the task moves elsewhere.
var ErrInUse = errors.New("state: store in use by a running instance")

// ErrOffset matches every *OffsetError.
var ErrOffset = errors.New("state: changelog offset out of order")

// ErrCodec matches every *CodecError.
var ErrCodec = errors.New("state: codec failed")

// OffsetError means Commit or Restore got a changelog offset that is not
// after the one the store already applied. Applying it could move the
// store back in time, so nothing was applied; restore from Applied+1.
type OffsetError struct {
	Store   string
	Task    Task
	Applied int64 // the offset the store had applied
	Got     int64 // the offset passed in
}

// Error names the store and both offsets.
func (e *OffsetError) Error() string {
	return fmt.Sprintf("state: store %q of %s: changelog offset %d is not after the applied offset %d: read the changelog from offset %d", e.Store, e.Task, e.Got, e.Applied, e.Applied+1)
}

// Is makes errors.Is(err, ErrOffset) hold.
func (e *OffsetError) Is(target error) bool { return target == ErrOffset }

// CodecError is a key or value that its codec could not encode or decode.
// It names the store and the key so the bad entry can be found.
type CodecError struct {
	Store string
	Task  Task
	Op    string // "encode key", "decode key", "encode value", "decode value"
	Key   string // the key as fmt prints it, or the quoted key bytes when it did not decode
	Err   error
}

// Error names the store, the key and what failed.
func (e *CodecError) Error() string {
	return fmt.Sprintf("state: store %q of %s: %s of key %s: %v", e.Store, e.Task, e.Op, e.Key, e.Err)
}

// Unwrap exposes the codec's error.
func (e *CodecError) Unwrap() error { return e.Err }

// Is makes errors.Is(err, ErrCodec) hold.
func (e *CodecError) Is(target error) bool { return target == ErrCodec }

// StoreError is an engine failure (open, read, write, close). After a
// failed Commit the engine may be behind the changelog: close the store,
// reopen it and restore from its Offset()+1.
type StoreError struct {
	Store string
	Task  Task
	Op    string
	Err   error
}

// Error names the store, the task and the operation.
func (e *StoreError) Error() string {
	return fmt.Sprintf("state: store %q of %s: %s: %v", e.Store, e.Task, e.Op, e.Err)
}

// Unwrap exposes the engine's error.
func (e *StoreError) Unwrap() error { return e.Err }

// ErrDiskFull matches every *DiskFullError.
var ErrDiskFull = errors.New("state: state directory full")

// DiskFullError means a persistent engine refused a write, or an open,
// because the volume of the state directory has too little space left (or
// a write already failed with ENOSPC). Nothing was applied: the store still
// agrees with its changelog up to its offset, and a restart once space is
// back restores the rest. It unwraps to syscall.ENOSPC.
type DiskFullError struct {
	Dir  string // the directory that ran out of space
	Free uint64 // bytes free when the write was refused
	Need uint64 // bytes free the engine wants before it writes
	Err  error  // the write's error, when one failed; else nil
}

// Error names the directory, the space it has and needs, and the fix.
func (e *DiskFullError) Error() string {
	cause := "ENOSPC: writes refused below the free-space margin, before one fails"
	if e.Err != nil {
		cause = "ENOSPC: " + e.Err.Error()
	}
	return fmt.Sprintf("state: state directory %s is full (%s): %s free, needs at least %s; free space or grow the volume (df -h %s), then restart: the store restores what it missed from its changelog",
		e.Dir, cause, humanBytes(e.Free), humanBytes(e.Need), e.Dir)
}

// Unwrap is syscall.ENOSPC, or the write's error that was one.
func (e *DiskFullError) Unwrap() error {
	if e.Err != nil {
		return e.Err
	}
	return syscall.ENOSPC
}

// Is makes errors.Is(err, ErrDiskFull) hold.
func (e *DiskFullError) Is(target error) bool { return target == ErrDiskFull }

// humanBytes prints n in the units df -h uses.
func humanBytes(n uint64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := uint64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}
