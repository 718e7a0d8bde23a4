package eostest

import (
	"errors"

	"github.com/eosflow/eosflow/internal/store"

	"github.com/eosflow/eosflow/state"
)

// storeKey names one store of one task.
type storeKey struct {
	name string
	task state.Task
}

// stores keeps every store of every task in memory, whatever engine the
// topology declares, with the runtime's bookkeeping of a batch: a record's
// writes can be undone alone, and the batch's are committed or dropped.
type stores struct {
	open    map[storeKey]*store.Store
	seq     uint64 // the current record (or update, or timer step)
	markSeq map[*store.Store]uint64
	touched []*store.Store // marked for the current record
	dirty   map[*store.Store]bool
}

func newStores() stores {
	return stores{open: map[storeKey]*store.Store{}, markSeq: map[*store.Store]uint64{}, dirty: map[*store.Store]bool{}}
}

// get opens the store called name of task on first use.
func (st *stores) get(name string, task state.Task) (*store.Store, error) {
	k := storeKey{name, task}
	if s := st.open[k]; s != nil {
		return s, nil
	}
	s, err := store.Open(state.Memory(), "", name, task)
	if err != nil {
		return nil, err
	}
	st.open[k] = s
	return s, nil
}

// store is the engine's Stores hook: the store, marked so that the
// current record's writes can be undone alone, as the runtime marks it.
func (d *Driver) store(name string, task state.Task) (*store.Store, error) {
	st := &d.st
	s, err := st.get(name, task)
	if err != nil {
		return nil, err
	}
	st.dirty[s] = true
	if st.markSeq[s] != st.seq {
		s.Mark()
		st.markSeq[s] = st.seq
		st.touched = append(st.touched, s)
	}
	return s, nil
}

// beginRecord starts a record, an update or a timer step.
func (st *stores) beginRecord() {
	st.seq++
	clear(st.touched)
	st.touched = st.touched[:0]
}

// failRecord undoes the writes of a step that did not go through, while
// the rest of its batch's stay.
func (st *stores) failRecord() {
	for _, s := range st.touched {
		s.Rollback()
	}
	clear(st.touched)
	st.touched = st.touched[:0]
}

// commit applies the batch's writes, as the runtime does once its
// transaction committed, each at the next changelog offset.
func (st *stores) commit() error {
	var errs []error
	for s := range st.dirty {
		if err := s.Commit(s.Offset() + 1); err != nil {
			errs = append(errs, err)
			s.Abort()
			continue
		}
		// Nothing reads a changelog back here: every batch is checked.
		errs = append(errs, s.Checked())
	}
	clear(st.dirty)
	return errors.Join(errs...)
}

// abort drops the batch's writes.
func (st *stores) abort() {
	for s := range st.dirty {
		s.Abort()
	}
	clear(st.dirty)
}

// seed writes w to the store called name of task at once, as if the store
// had restored it from its changelog. No batch is open.
func (st *stores) seed(name string, task state.Task, w state.Write) error {
	s, err := st.get(name, task)
	if err != nil {
		return err
	}
	return s.Restore([]state.Write{w}, s.Offset()+1)
}

// close closes every store.
func (st *stores) close() error {
	var errs []error
	for k, s := range st.open {
		errs = append(errs, s.Close())
		delete(st.open, k)
	}
	return errors.Join(errs...)
}
