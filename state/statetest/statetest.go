// Package statetest is the conformance suite of a state.Engine and the
// Backends it opens: what the runtime relies on when it restores, reads
// and applies a store's batches. An engine of your own proves itself as
// state.Memory and pebble.New (package state/pebble) do, from a test:
//
//	func TestConformance(t *testing.T) {
//		statetest.Run(t, statetest.Engine{New: func() state.Engine { return myEngine{} }, Persistent: true})
//	}
//
// The suite cannot crash a process: that Apply is atomic across a crash
// is for the engine's own tests to show (state/pebble's drop unsynced
// writes with pebble's vfs.NewCrashableMem).
package statetest

import (
	"bytes"
	"slices"
	"testing"

	"github.com/eosflow/eosflow/state"
)

// Engine is an engine under the suite.
type Engine struct {
	// New returns the engine. Each case opens its backends under a
	// directory of its own (t.TempDir()).
	New func() state.Engine
	// Persistent says a backend's data and position survive Close and a
	// reopen of the same store in the same directory; otherwise a reopen
	// finds it fresh, or all of it kept.
	Persistent bool
}

// Run checks the promises of state.Backend: a fresh backend is empty at
// NoOffset; Apply moves data and position together, a nil value deletes
// and an empty one does not, the last write to a key wins; Range is
// ascending, half-open and stops when told; nothing returned or passed
// in is shared; stores of other names and tasks are apart; reads run
// beside Apply; reopening keeps or forgets all of it, as Persistent
// says; Wipe, where offered, empties data and position together.
func Run(t *testing.T, e Engine) {
	t.Helper()
	cases := []struct {
		name string
		fn   func(*testing.T, *fixture)
	}{
		{"FreshIsEmpty", testFresh},
		{"ApplyMovesDataAndPosition", testApply},
		{"NilDeletesEmptyDoesNot", testDeletes},
		{"RangeIsAscendingHalfOpen", testRange},
		{"NothingIsShared", testCopies},
		{"StoresAreApart", testApart},
		{"ReadsRunBesideApply", testConcurrent},
		{"Reopen", testReopen},
		{"Wipe", testWipe},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { c.fn(t, &fixture{t: t, e: e, dir: t.TempDir()}) })
	}
}

// task is the task every case opens its stores for, unless it says.
var task = state.Task{Topic: "orders", Partition: 3}

// fixture opens backends of one engine in one directory.
type fixture struct {
	t   *testing.T
	e   Engine
	dir string
}

// open opens store name of tk, closed when the test ends unless the
// test closed it: a backend need not take a second Close.
func (f *fixture) open(name string, tk state.Task) *once {
	f.t.Helper()
	b, err := f.e.New().Open(f.dir, name, tk)
	if err != nil {
		f.t.Fatalf("Open(%q, %v): %v", name, tk, err)
	}
	o := &once{Backend: b}
	f.t.Cleanup(func() { _ = o.Close() })
	return o
}

// once is a backend closed at most once.
type once struct {
	state.Backend
	closed bool
}

// Close closes the backend unless it is closed.
func (o *once) Close() error {
	if o.closed {
		return nil
	}
	o.closed = true
	return o.Backend.Close()
}

// apply applies writes at offset, checked up to it.
func apply(t *testing.T, b state.Backend, offset int64, writes ...state.Write) {
	t.Helper()
	if err := b.Apply(writes, state.Position{Offset: offset, Checked: offset}); err != nil {
		t.Fatalf("Apply at %d: %v", offset, err)
	}
}

// put is a write of key to value; del deletes key.
func put(key, value string) state.Write { return state.Write{Key: []byte(key), Value: []byte(value)} }
func del(key string) state.Write        { return state.Write{Key: []byte(key)} }

// get reads key, failing the test on an error.
func get(t *testing.T, b state.Backend, key string) (string, bool) {
	t.Helper()
	v, ok, err := b.Get([]byte(key))
	if err != nil {
		t.Fatalf("Get(%q): %v", key, err)
	}
	return string(v), ok
}

// all is every entry of [start, end) in the order Range yields them.
func all(t *testing.T, b state.Backend, start, end []byte) []state.Write {
	t.Helper()
	var out []state.Write
	err := b.Range(start, end, func(k, v []byte) bool {
		out = append(out, state.Write{Key: bytes.Clone(k), Value: bytes.Clone(v)})
		return true
	})
	if err != nil {
		t.Fatalf("Range(%q, %q): %v", start, end, err)
	}
	return out
}

// position is b's position, failing the test on an error.
func position(t *testing.T, b state.Backend) state.Position {
	t.Helper()
	at, err := b.Position()
	if err != nil {
		t.Fatalf("Position: %v", err)
	}
	return at
}

// samePosition compares positions, an empty Unchecked equal to nil.
func samePosition(a, b state.Position) bool {
	return a.Offset == b.Offset && a.Checked == b.Checked && slices.Equal(a.Unchecked, b.Unchecked)
}

// fresh fails the test unless b holds nothing at NoOffset.
func fresh(t *testing.T, b state.Backend, what string) {
	t.Helper()
	if at := position(t, b); !samePosition(at, state.Position{Offset: state.NoOffset, Checked: state.NoOffset}) {
		t.Errorf("%s: position %+v, want NoOffset with nothing checked", what, at)
	}
	if got := all(t, b, nil, nil); len(got) != 0 {
		t.Errorf("%s: holds %d entries, want none", what, len(got))
	}
}
