package store

import (
	"errors"
	"testing"

	"github.com/eosflow/eosflow/state"
)

// failingEngine fails every Open, as an engine whose files cannot be made.
type failingEngine struct{}

func (failingEngine) String() string { return "failing" }

func (failingEngine) Open(string, string, state.Task) (state.Backend, error) {
	return nil, errors.New("no room for the store")
}

func TestOpenErrors(t *testing.T) {
	cases := []struct {
		name    string
		e       state.Engine
		dir     string
		store   string
		task    state.Task
		wantErr error
	}{
		{"nil engine", nil, "d", "s", task, state.ErrInvalid},
		{"empty store name", state.Memory(), "d", "", task, state.ErrInvalid},
		{"dotdot store name", state.Memory(), "d", "..", task, state.ErrInvalid},
		{"slash in store name", state.Memory(), "d", "a/b", task, state.ErrInvalid},
		{"slash in topic", state.Memory(), "d", "s", state.Task{Topic: "../x"}, state.ErrInvalid},
		{"negative partition", state.Memory(), "d", "s", state.Task{Topic: "t", Partition: -1}, state.ErrInvalid},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if _, err := Open(c.e, c.dir, c.store, c.task); !errors.Is(err, c.wantErr) {
				t.Fatalf("Open = %v, want %v", err, c.wantErr)
			}
		})
	}
	_, err := Open(failingEngine{}, "d", "s", task)
	var se *state.StoreError
	if !errors.As(err, &se) || se.Store != "s" || se.Task != task || se.Op != "open failing" {
		t.Fatalf("Open of a failing engine = %v, want a *state.StoreError naming the store", err)
	}
}
