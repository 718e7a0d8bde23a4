package state

import (
	"fmt"
	"strconv"
	"time"

	"github.com/eosflow/eosflow/internal/storename"
)

// NoOffset is the changelog offset of a store that has applied nothing
// yet: restore it from the start of its changelog partition.
const NoOffset int64 = -1

// Task is one input partition, the unit that owns a store's data: its
// store's changelog partition has the same number.
type Task struct {
	Topic     string
	Partition int32
}

// String names the task in errors and logs as topic/partition.
func (t Task) String() string { return t.Topic + "/" + strconv.Itoa(int(t.Partition)) }

// dirName is the task's directory under a state directory.
func (t Task) dirName() string { return t.Topic + "-" + strconv.Itoa(int(t.Partition)) }

// Write is one changelog record: the last write of a batch to a key, or a
// record read back from the changelog on restore. A nil Value deletes the
// key (a Kafka tombstone); a Put of an empty value has a non-nil empty
// Value, so the two stay distinct on the changelog.
type Write struct {
	Key   []byte
	Value []byte
}

// Entry is one key and its value, as Range yields them.
type Entry[K, V any] struct {
	Key   K
	Value V
}

// Engine opens the Backend of one store of one task. Users choose an
// engine as a value (Memory(), or pebble.New() from package state/pebble
// for stores on disk); the runtime calls Open when a task is assigned and
// closes the store when it is revoked.
type Engine interface {
	// String names the engine in topology descriptions.
	String() string
	// Open opens, creating it if needed, the backend of store name for
	// task under the state directory dir. Names are already validated.
	Open(dir, name string, task Task) (Backend, error)
}

// Position is how far a store has applied its changelog partition, and
// how much of that it knows to be committed there. A batch is applied once
// its transaction's End reports a commit, but End's word is not the log's:
// a restarting broker can skip the batch's markers, and a later repair can
// abort it. Such a batch stays unchecked until a read_committed read
// delivers its last changelog record; a store holding one that never
// arrives is rebuilt from the changelog.
type Position struct {
	// Offset is the changelog offset of the last write applied, or
	// NoOffset.
	Offset int64
	// Checked is the offset up to which every changelog record the store
	// applied was read back as committed (NoOffset: none yet).
	Checked int64
	// Unchecked lists, ascending, the changelog offset of the last
	// record of each batch applied after Checked on End's word: each must
	// still read back as committed.
	Unchecked []int64
}

// Backend is the committed data of one store of one task. Its only write
// is Apply, which moves data and the changelog position together, so the
// two can never disagree. A Backend must allow Get and Range to run
// concurrently with Apply.
type Backend interface {
	// Get returns a copy of key's value, and whether key exists.
	Get(key []byte) (value []byte, ok bool, err error)
	// Range calls fn for each key in [start, end) in ascending byte
	// order (nil start: from the first key; nil end: to the last) until
	// fn returns false. key and value are valid only during the call.
	Range(start, end []byte, fn func(key, value []byte) bool) error
	// Position is the changelog position last applied; a new backend's
	// is at NoOffset, with nothing unchecked. Its Unchecked is the
	// caller's to change: a copy.
	Position() (Position, error)
	// Apply applies writes in order (a nil Value deletes) and records at
	// as the changelog position, atomically: after a crash, either all of
	// it is visible or none of it is. It must not keep references to the
	// writes' slices or to at.Unchecked.
	Apply(writes []Write, at Position) error
	// Close releases the backend; what Apply returned for stays applied.
	Close() error
}

// Wiper is a Backend that can empty itself, data and position together, in
// one atomic write: the runtime wipes a store whose changelog can no
// longer bring it up to date.
type Wiper interface {
	Wipe() error
}

// Flusher is a Backend that can lose applied writes in a crash until it
// flushes them (pebble's, whose write-ahead log is off). The runtime calls
// Flush when a restore of the store ends, so that a crash soon after does
// not read the whole restore again. Flush may return before the writes
// are durable.
type Flusher interface {
	Flush() error
}

// Sized is a Backend that can tell cheaply about how many bytes it holds:
// what the store-size metric reports.
type Sized interface {
	SizeBytes() (int64, error)
}

// Dated is a Backend that keeps the wall-clock time of its last Apply, so
// that the runtime can tell a store too old to catch up from a compacted
// changelog.
type Dated interface {
	// AppliedAt returns the time of the last Apply, or the zero time if
	// none is recorded.
	AppliedAt() (time.Time, error)
}

// validName is storename.Valid as an ErrInvalid.
func validName(what, s string) error {
	if err := storename.Valid(what, s); err != nil {
		return fmt.Errorf("%w: %v", ErrInvalid, err)
	}
	return nil
}
