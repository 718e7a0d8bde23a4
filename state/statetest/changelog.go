package statetest

import (
	"fmt"
	"math/rand/v2"
	"slices"

	"github.com/eosflow/eosflow/state"
)

// Changelog returns n writes over 50 keys ("k000" to "k049"), a quarter of
// them deletes, the same for the same seed: a changelog an engine's
// restore and crash tests replay, then compare against Model.
func Changelog(n int, seed uint64) []state.Write {
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

// Model is what a store must hold after writes: it applies them to a map
// (a nil value deletes) and lists the result as sorted "key=value"
// strings, so a test compares it with a full Range of the store.
func Model(writes []state.Write) []string {
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
