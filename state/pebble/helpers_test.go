package pebble

import (
	"testing"

	"github.com/eosflow/eosflow/internal/store"

	"github.com/eosflow/eosflow/state"
)

var task = state.Task{Topic: "orders", Partition: 3}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func put(t *testing.T, s *store.Store, kv ...string) {
	t.Helper()
	for i := 0; i < len(kv); i += 2 {
		must(t, s.Put([]byte(kv[i]), []byte(kv[i+1])))
	}
}

func wantGet(t *testing.T, s *store.Store, key, want string, wantOK bool) {
	t.Helper()
	v, ok, err := s.Get([]byte(key))
	must(t, err)
	if ok != wantOK || string(v) != want {
		t.Fatalf("Get(%q) = %q, %v; want %q, %v", key, v, ok, want, wantOK)
	}
}

// entries collects a Range as "k=v" strings.
func entries(t *testing.T, s *store.Store, start, end []byte) []string {
	t.Helper()
	var out []string
	for e, err := range s.Range(start, end) {
		must(t, err)
		out = append(out, string(e.Key)+"="+string(e.Value))
	}
	return out
}
