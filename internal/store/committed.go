package store

import (
	"bytes"

	"github.com/eosflow/eosflow/state"
)

// CommittedGet returns key's value as the engine holds it: what committed
// batches and restores applied, never the open batch's overlay. It is
// what a query from outside the pipeline reads, safe to call while the
// batch loop writes, and never waiting for the store's lock, which a
// commit holds while it applies a batch; the caller must keep Close from
// running meanwhile. The value is a copy.
func (s *Store) CommittedGet(key []byte) ([]byte, bool, error) {
	if err := s.open(); err != nil {
		return nil, false, err
	}
	v, ok, err := s.b.Get(key)
	if err != nil {
		return nil, false, s.fail("get committed", err)
	}
	return v, ok, nil
}

// CommittedRange calls fn with copies of the engine's entries with keys in
// [start, end) in key order (nil start: from the first key; nil end: to
// the last), skipping the open batch's overlay, until fn returns false or
// limit entries were passed (limit <= 0: no limit). It returns the key of
// the last entry passed, so that a caller can read a large range in
// pieces, nil if none was. Like CommittedGet, Close must not run meanwhile.
func (s *Store) CommittedRange(start, end []byte, limit int, fn func(key, value []byte) bool) (last []byte, err error) {
	if err := s.open(); err != nil {
		return nil, err
	}
	if end != nil && bytes.Compare(start, end) >= 0 {
		return nil, nil
	}
	n := 0
	err = s.b.Range(start, end, func(k, v []byte) bool {
		last = bytes.Clone(k)
		n++
		// fn's key is its own: writing it must not move the cursor.
		return fn(bytes.Clone(k), bytes.Clone(v)) && (limit <= 0 || n < limit)
	})
	if err != nil {
		return last, s.fail("range committed", err)
	}
	return last, nil
}

// open reports state.ErrClosed once the store is closed.
func (s *Store) open() error {
	if s.closed.Load() {
		return state.ErrClosed
	}
	return nil
}
