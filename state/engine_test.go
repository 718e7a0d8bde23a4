package state

import (
	"errors"
	"testing"
)

// failingEngine fails every Open, as an engine whose files cannot be made.
type failingEngine struct{}

func (failingEngine) String() string { return "failing" }

func (failingEngine) Open(string, string, Task) (Backend, error) {
	return nil, errors.New("no room for the store")
}

func TestOpenErrors(t *testing.T) {
	cases := []struct {
		name    string
		e       Engine
		dir     string
		store   string
		task    Task
		wantErr error
	}{
		{"nil engine", nil, "d", "s", task, ErrInvalid},
		{"empty store name", Memory(), "d", "", task, ErrInvalid},
		{"dotdot store name", Memory(), "d", "..", task, ErrInvalid},
		{"slash in store name", Memory(), "d", "a/b", task, ErrInvalid},
		{"slash in topic", Memory(), "d", "s", Task{Topic: "../x"}, ErrInvalid},
		{"negative partition", Memory(), "d", "s", Task{Topic: "t", Partition: -1}, ErrInvalid},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if _, err := Open(c.e, c.dir, c.store, c.task); !errors.Is(err, c.wantErr) {
				t.Fatalf("Open = %v, want %v", err, c.wantErr)
			}
		})
	}
	_, err := Open(failingEngine{}, "d", "s", task)
	var se *StoreError
	if !errors.As(err, &se) || se.Store != "s" || se.Task != task || se.Op != "open failing" {
		t.Fatalf("Open of a failing engine = %v, want a *StoreError naming the store", err)
	}
}

func TestStoreDir(t *testing.T) {
	if got, want := StoreDir("/state", "counts", Task{Topic: "eu-orders", Partition: 12}), "/state/eu-orders-12/counts"; got != want {
		t.Fatalf("StoreDir = %q, want %q", got, want)
	}
	if task, ok := parseTaskDir("eu-orders-12"); !ok || task != (Task{Topic: "eu-orders", Partition: 12}) {
		t.Fatalf("parseTaskDir of StoreDir's task directory = %v, %v", task, ok)
	}
}
