package store

import (
	"testing"

	"github.com/eosflow/eosflow/state"
)

// The internal tests' helpers; the external tests (package state_test)
// have their own.

var task = state.Task{Topic: "orders", Partition: 3}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func put(t *testing.T, s *Store, kv ...string) {
	t.Helper()
	for i := 0; i < len(kv); i += 2 {
		must(t, s.Put([]byte(kv[i]), []byte(kv[i+1])))
	}
}
