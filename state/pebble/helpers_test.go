package pebble

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/eosflow/eosflow/state"
)

var task = state.Task{Topic: "orders", Partition: 3}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func put(t *testing.T, s *state.Store, kv ...string) {
	t.Helper()
	for i := 0; i < len(kv); i += 2 {
		must(t, s.Put([]byte(kv[i]), []byte(kv[i+1])))
	}
}

func wantGet(t *testing.T, s *state.Store, key, want string, wantOK bool) {
	t.Helper()
	v, ok, err := s.Get([]byte(key))
	must(t, err)
	if ok != wantOK || string(v) != want {
		t.Fatalf("Get(%q) = %q, %v; want %q, %v", key, v, ok, want, wantOK)
	}
}

// entries collects a Range as "k=v" strings.
func entries(t *testing.T, s *state.Store, start, end []byte) []string {
	t.Helper()
	var out []string
	for e, err := range s.Range(start, end) {
		must(t, err)
		out = append(out, string(e.Key)+"="+string(e.Value))
	}
	return out
}

// changelog is n writes over 50 keys, a quarter of them deletes.
func changelog(n int, seed uint64) []state.Write {
	r := rand.New(rand.NewPCG(seed, 0))
	out := make([]state.Write, n)
	for i := range out {
		k := []byte(fmt.Sprintf("k%03d", r.IntN(50)))
		if r.IntN(4) == 0 {
			out[i] = state.Write{Key: k}
			continue
		}
		out[i] = state.Write{Key: k, Value: []byte(fmt.Sprint(i))}
	}
	return out
}

// model applies writes to a map and lists it like entries does.
func model(writes []state.Write) []string {
	m := map[string]string{}
	for _, w := range writes {
		if w.Value == nil {
			delete(m, string(w.Key))
			continue
		}
		m[string(w.Key)] = string(w.Value)
	}
	var out []string
	for k, v := range m {
		out = append(out, k+"="+v)
	}
	slices.Sort(out)
	return out
}
