// Package store is a task's state store as the runtime drives it: an
// engine's committed data (package state) under the overlay of the open
// batch, with the lifecycle user code never sees (Mark, Rollback, Changes,
// Commit, Abort, Restore, Wipe). User code gets it as a state.RawKV.
package store

import (
	"bytes"
	"fmt"
	"iter"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/eosflow/eosflow/internal/storename"
	"github.com/eosflow/eosflow/state"
	"github.com/google/btree"
)

// Store is one store of one task: the engine's committed data under the
// overlay of the open batch. Its methods are safe for concurrent use,
// except that Close must not run while a Range is being iterated.
type Store struct {
	name string
	task state.Task
	b    state.Backend

	mu      sync.Mutex
	overlay *btree.BTreeG[state.Write] // the batch's writes; a nil Value is a tombstone
	at      state.Position             // the backend's changelog position
	closed  atomic.Bool                // set under mu; committed reads check it without mu
	// The overlay as it was at Mark, for each key written since: what
	// Rollback puts back. A Savepoint opens a nested level at base: a
	// key's entry is saved again after it, as the key was at the
	// savepoint. marks counts the Marks and ends, so that a savepoint of
	// an earlier record undoes nothing.
	marked bool
	undo   []undoWrite
	base   int
	marks  uint64
}

// undoWrite is a key's overlay entry before the current record wrote it.
type undoWrite struct {
	prev state.Write
	had  bool // the overlay held prev; else the key was not in it
}

func lessWrite(a, b state.Write) bool { return bytes.Compare(a.Key, b.Key) < 0 }

func newStore(name string, task state.Task, b state.Backend, at state.Position) *Store {
	return &Store{name: name, task: task, b: b, at: at, overlay: btree.NewG(32, lessWrite)}
}

// Name is the store's name in the topology; it names the changelog topic.
func (s *Store) Name() string { return s.name }

// Task is the input partition that owns the store.
func (s *Store) Task() state.Task { return s.task }

// Offset is the last changelog offset the engine applied (state.NoOffset if
// none): restore from Offset()+1.
func (s *Store) Offset() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.at.Offset
}

// Position is the changelog position the engine applied, with the batches
// not yet read back as committed: what a restore must check before it
// trusts the store (see state.Position).
func (s *Store) Position() state.Position {
	s.mu.Lock()
	defer s.mu.Unlock()
	at := s.at
	at.Unchecked = slices.Clone(at.Unchecked)
	return at
}

// Get returns key's value as the batch sees it: the overlay's write if
// the batch wrote key, else the engine's. The value is a copy.
func (s *Store) Get(key []byte) ([]byte, bool, error) {
	s.mu.Lock()
	if s.closed.Load() {
		s.mu.Unlock()
		return nil, false, state.ErrClosed
	}
	if w, ok := s.overlay.Get(state.Write{Key: key}); ok {
		s.mu.Unlock()
		if w.Value == nil {
			return nil, false, nil
		}
		return bytes.Clone(w.Value), true, nil
	}
	s.mu.Unlock()
	v, ok, err := s.b.Get(key)
	if err != nil {
		return nil, false, s.fail("get", err)
	}
	return v, ok, nil
}

// Put sets key to value in the batch's overlay; nil value is stored as an
// empty value (use Delete to delete). Both slices are copied.
func (s *Store) Put(key, value []byte) error {
	if value == nil {
		value = []byte{}
	}
	return s.write(state.Write{Key: bytes.Clone(key), Value: bytes.Clone(value)})
}

// Delete deletes key in the batch's overlay: a tombstone that hides the
// engine's value and goes to the changelog as a nil value.
func (s *Store) Delete(key []byte) error {
	return s.write(state.Write{Key: bytes.Clone(key)})
}

func (s *Store) write(w state.Write) error {
	if w.Key == nil {
		w.Key = []byte{}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed.Load() {
		return state.ErrClosed
	}
	if s.marked && !s.undone(w.Key) {
		prev, had := s.overlay.Get(w)
		if !had {
			prev = state.Write{Key: w.Key}
		}
		s.undo = append(s.undo, undoWrite{prev: prev, had: had})
	}
	s.overlay.ReplaceOrInsert(w)
	return nil
}

// undone reports whether key's earlier overlay entry is already saved
// since the innermost savepoint.
func (s *Store) undone(key []byte) bool {
	for _, u := range s.undo[s.base:] {
		if bytes.Equal(u.prev.Key, key) {
			return true
		}
	}
	return false
}

// Mark starts a savepoint: the runtime calls it before a record first
// writes to the store, so that Rollback can undo that record's writes
// alone (a record that fails and is dead-lettered or skipped must leave
// no state behind, while the rest of its batch commits).
func (s *Store) Mark() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.unmark()
	s.marked = true
}

// Rollback undoes the writes since Mark, leaving the overlay as it was.
func (s *Store) Rollback() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.undoTo(0)
	s.unmark()
}

// Savepoint is a point among one record's writes to a store, which
// RollbackTo returns to.
type Savepoint struct {
	marks uint64
	at    int
}

// Savepoint returns the point the current record's writes have reached,
// so that RollbackTo can undo the writes after it alone: a node whose
// attempt failed is retried from the state its first attempt found, while
// the writes of the record's earlier nodes stay for Rollback to undo if
// the record fails in the end. A store not marked is marked now.
func (s *Store) Savepoint() Savepoint {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.marked {
		s.unmark()
		s.marked = true
	}
	s.base = len(s.undo)
	return Savepoint{marks: s.marks, at: s.base}
}

// RollbackTo undoes the writes made since sp, leaving the overlay as it
// was then; writes after it are saved from sp again, so that it can be
// returned to once more. A savepoint from before the last Mark, Rollback,
// Commit or Abort undoes nothing: its record is over.
func (s *Store) RollbackTo(sp Savepoint) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.marked || sp.marks != s.marks || sp.at > len(s.undo) {
		return
	}
	s.undoTo(sp.at)
	s.base = sp.at
}

// undoTo puts back the overlay entries saved at undo[at:], latest first,
// and forgets them.
func (s *Store) undoTo(at int) {
	for i := len(s.undo) - 1; i >= at; i-- {
		if u := s.undo[i]; u.had {
			s.overlay.ReplaceOrInsert(u.prev)
		} else {
			s.overlay.Delete(u.prev)
		}
	}
	s.undo = s.undo[:at]
}

// unmark ends the current record's savepoints.
func (s *Store) unmark() {
	s.marked, s.undo, s.base = false, s.undo[:0], 0
	s.marks++
}

// Changes returns the batch's last write per key, in key order: the
// records to produce to the changelog partition in the batch's
// transaction. A nil Value is a delete. The slices belong to the overlay:
// do not modify them.
func (s *Store) Changes() []state.Write {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]state.Write, 0, s.overlay.Len())
	s.overlay.Ascend(func(w state.Write) bool { out = append(out, w); return true })
	return out
}

// Commit writes the overlay and offset, the changelog offset of the
// batch's last change, to the engine in one atomic write and empties the
// overlay. Call it only after the transaction that carried Changes
// reported a commit; offset stays unchecked (see state.Position) until Checked
// is called. A batch that wrote nothing commits nothing. An offset not
// after Offset() is refused with an *state.OffsetError and changes nothing.
// After an engine error the overlay is gone and the engine may be behind
// the changelog: close, reopen and restore.
func (s *Store) Commit(offset int64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed.Load() {
		return state.ErrClosed
	}
	if s.overlay.Len() == 0 {
		return nil
	}
	if offset <= s.at.Offset {
		return &state.OffsetError{Store: s.name, Task: s.task, Applied: s.at.Offset, Got: offset}
	}
	writes := make([]state.Write, 0, s.overlay.Len())
	s.overlay.Ascend(func(w state.Write) bool { writes = append(writes, w); return true })
	s.overlay.Clear(false)
	s.unmark()
	at := s.at
	at.Offset, at.Unchecked = offset, append(slices.Clone(at.Unchecked), offset)
	if err := s.b.Apply(writes, at); err != nil {
		return s.fail("commit", err)
	}
	s.at = at
	return nil
}

// Abort drops the overlay: the batch's transaction aborted, and the
// engine never saw its writes.
func (s *Store) Abort() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.overlay.Clear(false)
	s.unmark()
}

// Restore applies changelog records read back from the changelog, in
// their order, and offset, the offset of the last of them, in one atomic
// write. Call it between batches, in batches of records; the writes'
// slices are not kept. Records read read_committed are committed: with
// nothing unchecked, the store is checked up to offset.
func (s *Store) Restore(writes []state.Write, offset int64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed.Load() {
		return state.ErrClosed
	}
	if s.overlay.Len() != 0 {
		return state.ErrBatchOpen
	}
	if offset <= s.at.Offset {
		return &state.OffsetError{Store: s.name, Task: s.task, Applied: s.at.Offset, Got: offset}
	}
	at := s.at
	at.Offset = offset
	if len(at.Unchecked) == 0 {
		at.Checked = offset
	}
	if err := s.b.Apply(writes, at); err != nil {
		return s.fail("restore", err)
	}
	s.at = at
	return nil
}

// Flush starts making what the store applied survive a crash, if its
// engine can lose it (a state.Flusher); other engines need nothing.
func (s *Store) Flush() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed.Load() {
		return state.ErrClosed
	}
	f, ok := s.b.(state.Flusher)
	if !ok {
		return nil
	}
	if err := f.Flush(); err != nil {
		return s.fail("flush", err)
	}
	return nil
}

// Checked records that every batch the store applied was read back as
// committed from its changelog: the store is checked up to its offset, and
// nothing is left unchecked. Call it between batches, once a
// read_committed read delivered every offset state.Position lists as unchecked.
func (s *Store) Checked() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed.Load() {
		return state.ErrClosed
	}
	if s.overlay.Len() != 0 {
		return state.ErrBatchOpen
	}
	if s.at.Checked == s.at.Offset && len(s.at.Unchecked) == 0 {
		return nil
	}
	at := state.Position{Offset: s.at.Offset, Checked: s.at.Offset}
	if err := s.b.Apply(nil, at); err != nil {
		return s.fail("check", err)
	}
	s.at = at
	return nil
}

// Wipe empties the store, data and offset, so that it restores its
// changelog partition in full: the runtime does so when the changelog no
// longer holds the offsets the store would read next, or when the store
// is older than the changelog's delete.retention.ms and may have missed
// deletes that compaction removed since. No batch may be open.
func (s *Store) Wipe() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed.Load() {
		return state.ErrClosed
	}
	if s.overlay.Len() != 0 {
		return state.ErrBatchOpen
	}
	w, ok := s.b.(state.Wiper)
	if !ok {
		return s.fail("wipe", fmt.Errorf("%w: the engine cannot empty a store; delete the task's directory instead", state.ErrInvalid))
	}
	if err := w.Wipe(); err != nil {
		return s.fail("wipe", err)
	}
	s.at = state.Position{Offset: state.NoOffset, Checked: state.NoOffset}
	return nil
}

// AppliedAt is when the engine last applied a batch or a restore, if it
// records that (see state.Dated); the zero time otherwise.
func (s *Store) AppliedAt() (time.Time, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed.Load() {
		return time.Time{}, state.ErrClosed
	}
	d, ok := s.b.(state.Dated)
	if !ok {
		return time.Time{}, nil
	}
	t, err := d.AppliedAt()
	if err != nil {
		return time.Time{}, s.fail("read applied time", err)
	}
	return t, nil
}

// SizeBytes returns about how many bytes the store's committed data
// takes, when its engine can tell cheaply (see state.Sized); ok is false when it
// cannot.
func (s *Store) SizeBytes() (n int64, ok bool, err error) {
	sz, ok := s.b.(state.Sized)
	if !ok {
		return 0, false, nil
	}
	n, err = sz.SizeBytes()
	return n, true, err
}

// Close drops the overlay and closes the engine's backend; it is
// idempotent. What Commit and Restore wrote stays (in a persistent
// engine).
func (s *Store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed.Load() {
		return nil
	}
	s.closed.Store(true)
	s.overlay.Clear(false)
	if err := s.b.Close(); err != nil {
		return s.fail("close", err)
	}
	return nil
}

func (s *Store) fail(op string, err error) error {
	return &state.StoreError{Store: s.name, Task: s.task, Op: op, Err: err}
}

// Range yields the entries with keys in [start, end) in key order, the
// overlay merged over the engine (nil start: from the first key; nil
// end: to the last). Keys and values are copies. An error is yielded
// once, last.
func (s *Store) Range(start, end []byte) iter.Seq2[state.Entry[[]byte, []byte], error] {
	return func(yield func(state.Entry[[]byte, []byte], error) bool) {
		if end != nil && bytes.Compare(start, end) >= 0 {
			return
		}
		ov, err := s.overlayRange(start, end)
		if err != nil {
			yield(state.Entry[[]byte, []byte]{}, err)
			return
		}
		i, stopped := 0, false
		emit := func(k, v []byte) bool {
			if !yield(state.Entry[[]byte, []byte]{Key: bytes.Clone(k), Value: bytes.Clone(v)}, nil) {
				stopped = true
			}
			return !stopped
		}
		err = s.b.Range(start, end, func(k, v []byte) bool {
			for ; i < len(ov) && bytes.Compare(ov[i].Key, k) < 0; i++ {
				if ov[i].Value != nil && !emit(ov[i].Key, ov[i].Value) {
					return false
				}
			}
			if i < len(ov) && bytes.Equal(ov[i].Key, k) {
				w := ov[i]
				i++
				return w.Value == nil || emit(w.Key, w.Value)
			}
			return emit(k, v)
		})
		if stopped {
			return
		}
		if err != nil {
			yield(state.Entry[[]byte, []byte]{}, s.fail("range", err))
			return
		}
		for ; i < len(ov); i++ {
			if ov[i].Value != nil && !emit(ov[i].Key, ov[i].Value) {
				return
			}
		}
	}
}

// Prefix yields the entries whose keys start with prefix, like Range.
func (s *Store) Prefix(prefix []byte) iter.Seq2[state.Entry[[]byte, []byte], error] {
	return s.Range(prefix, prefixEnd(prefix))
}

// prefixEnd is the first key after every key that starts with p, or nil
// when there is none (p is all 0xff).
func prefixEnd(p []byte) []byte {
	end := bytes.Clone(p)
	for i := len(end) - 1; i >= 0; i-- {
		if end[i] < 0xff {
			end[i]++
			return end[:i+1]
		}
	}
	return nil
}

// overlayRange snapshots the overlay's writes in [start, end).
func (s *Store) overlayRange(start, end []byte) ([]state.Write, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed.Load() {
		return nil, state.ErrClosed
	}
	var out []state.Write
	collect := func(w state.Write) bool { out = append(out, w); return true }
	switch {
	case end == nil:
		s.overlay.AscendGreaterOrEqual(state.Write{Key: start}, collect)
	default:
		s.overlay.AscendRange(state.Write{Key: start}, state.Write{Key: end}, collect)
	}
	return out, nil
}

// Open opens the store name of task with engine e under the state
// directory dir, with an empty overlay. The runtime calls it when the
// task is assigned, then restores from Offset()+1, and calls Close when
// the task is revoked.
func Open(e state.Engine, dir, name string, task state.Task) (*Store, error) {
	if e == nil {
		return nil, fmt.Errorf("%w: nil engine for store %q", state.ErrInvalid, name)
	}
	if err := storename.Valid("store name", name); err != nil {
		return nil, fmt.Errorf("%w: %v", state.ErrInvalid, err)
	}
	if err := storename.Valid("topic", task.Topic); err != nil {
		return nil, fmt.Errorf("%w: %v", state.ErrInvalid, err)
	}
	if task.Partition < 0 {
		return nil, fmt.Errorf("%w: negative partition %d for store %q", state.ErrInvalid, task.Partition, name)
	}
	b, err := e.Open(dir, name, task)
	if err != nil {
		return nil, &state.StoreError{Store: name, Task: task, Op: "open " + e.String(), Err: err}
	}
	at, err := b.Position()
	if err != nil {
		_ = b.Close()
		return nil, &state.StoreError{Store: name, Task: task, Op: "read position", Err: err}
	}
	return newStore(name, task, b, at), nil
}

var _ state.RawKV = (*Store)(nil)
