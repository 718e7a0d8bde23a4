package sim

import (
	"errors"
	"slices"
	"time"

	"github.com/eosflow/eosflow/state"
)

// applyEngine is an engine whose backends reach point Apply before each
// write: of a committed batch, of changelog records restored, or of a
// restore's record that batches read back as committed.
type applyEngine struct {
	state.Engine
	at      func() error // the point; an error refuses the write
	trusted func(store string, task state.Task, inherited []int64, at int64)
}

// inner is what a backend of the pipelines' engines (memory, pebble) is:
// the wrapper keeps each optional interface the runtime asks for.
type inner interface {
	state.Backend
	state.Wiper
	state.Sized
}

// Open opens the engine's backend, its writes going through the point.
func (e applyEngine) Open(dir, name string, task state.Task) (state.Backend, error) {
	b, err := e.Engine.Open(dir, name, task)
	if err != nil {
		return nil, err
	}
	in, ok := b.(inner)
	if !ok {
		return nil, errors.Join(errors.New("sim: a store engine whose backends cannot wipe themselves or tell their size"), b.Close())
	}
	pos, err := in.Position()
	if err != nil {
		return nil, errors.Join(err, in.Close())
	}
	return &applyBackend{inner: in, at: e.at, inherited: pos.Unchecked, trusted: func(o []int64, at int64) {
		if e.trusted != nil {
			e.trusted(name, task, o, at)
		}
	}}, nil
}

// applyBackend is a backend whose writes go through a point. It keeps
// the batches an earlier incarnation applied on End's word that this one
// has not read back: until it has, it must not apply a batch of its own
// on End's word (trusted reports one that does).
type applyBackend struct {
	inner
	at        func() error
	inherited []int64
	trusted   func(inherited []int64, at int64)
}

// Apply reaches the point, then writes unless the point refused.
func (b *applyBackend) Apply(writes []state.Write, at state.Position) error {
	if err := b.at(); err != nil {
		return err
	}
	if len(at.Unchecked) > 0 && at.Unchecked[len(at.Unchecked)-1] == at.Offset && !slices.Contains(b.inherited, at.Offset) {
		if kept := slices.DeleteFunc(slices.Clone(b.inherited), func(o int64) bool { return !slices.Contains(at.Unchecked, o) }); len(kept) > 0 {
			b.trusted(kept, at.Offset)
		}
	}
	if err := b.inner.Apply(writes, at); err != nil {
		return err
	}
	b.inherited = slices.DeleteFunc(b.inherited, func(o int64) bool { return !slices.Contains(at.Unchecked, o) })
	return nil
}

// Wipe empties the store: nothing inherited is left to read back.
func (b *applyBackend) Wipe() error {
	b.inherited = nil
	return b.inner.Wipe()
}

// AppliedAt is the inner backend's, when it keeps one (pebble does), as
// store.Store reads it; the zero time otherwise.
func (b *applyBackend) AppliedAt() (time.Time, error) {
	if d, ok := b.inner.(state.Dated); ok {
		return d.AppliedAt()
	}
	return time.Time{}, nil
}

// Flush is the inner backend's, when it has one (pebble does), so that a
// crash after a restore keeps what the runtime flushed.
func (b *applyBackend) Flush() error {
	if f, ok := b.inner.(state.Flusher); ok {
		return f.Flush()
	}
	return nil
}

// errApplyRefused is a store write refused, as a full disk or an I/O
// error refuses it: nothing of it applied.
var errApplyRefused = errors.New("sim: store write refused (injected)")

// onApply is member idx about to write to a state store: a crash drops
// the write (the next incarnation opens what the disk held before it),
// and ApplyFail refuses it.
func (s *sim) onApply(idx int, w *wire) error {
	if w.isDead() {
		return errApplyRefused // a crashed incarnation writes nothing more
	}
	i, ok := s.step(idx, w, Apply)
	if !ok {
		return nil
	}
	defer s.acted()
	s.strike(i)
	if s.sched.Steps[i].Fault == Crash {
		s.crash(idx, w)
		s.events <- event{idx: idx, wire: w, step: i, fault: Crash}
	}
	return errApplyRefused
}
