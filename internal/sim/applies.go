package sim

import (
	"errors"

	"github.com/eosflow/eosflow/state"
)

// applyEngine is an engine whose backends reach point Apply before each
// write: of a committed batch, or of changelog records restored.
type applyEngine struct {
	state.Engine
	at func() error // the point; an error refuses the write
}

// Open opens the engine's backend, its writes going through the point.
func (e applyEngine) Open(dir, name string, task state.Task) (state.Backend, error) {
	b, err := e.Engine.Open(dir, name, task)
	if err != nil {
		return nil, err
	}
	if _, ok := b.(state.Wiper); !ok {
		return nil, errors.New("sim: a store engine whose backends cannot wipe themselves")
	}
	return &applyBackend{Backend: b, at: e.at}, nil
}

// applyBackend is a backend whose writes go through a point.
type applyBackend struct {
	state.Backend
	at func() error
}

// Apply reaches the point, then writes unless the point refused.
func (b *applyBackend) Apply(writes []state.Write, at state.Position) error {
	if err := b.at(); err != nil {
		return err
	}
	return b.Backend.Apply(writes, at)
}

// Wipe wipes the backend: both engines the pipelines use can.
func (b *applyBackend) Wipe() error { return b.Backend.(state.Wiper).Wipe() }

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
