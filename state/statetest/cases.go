package statetest

import (
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/eosflow/eosflow/state"
)

func testFresh(t *testing.T, f *fixture) {
	b := f.open("counts", task)
	fresh(t, b, "a new backend")
	if v, ok := get(t, b, "k"); ok {
		t.Errorf("Get of a key never written = %q, true", v)
	}
}

func testApply(t *testing.T, f *fixture) {
	b := f.open("counts", task)
	at := state.Position{Offset: 41, Checked: 30, Unchecked: []int64{35, 41}}
	if err := b.Apply([]state.Write{put("a", "1"), put("b", "2")}, at); err != nil {
		t.Fatal(err)
	}
	if got := position(t, b); !samePosition(got, at) {
		t.Errorf("position after Apply = %+v, want %+v", got, at)
	}
	if v, ok := get(t, b, "a"); !ok || v != "1" {
		t.Errorf("Get(a) = %q, %v; want 1", v, ok)
	}
	apply(t, b, 42, put("a", "3"), put("a", "4"))
	if v, _ := get(t, b, "a"); v != "4" {
		t.Errorf("Get(a) after two writes in one Apply = %q, want the last, 4", v)
	}
	if v, _ := get(t, b, "b"); v != "2" {
		t.Errorf("Get(b) = %q, want 2: an Apply that did not write it changed it", v)
	}
	apply(t, b, 43) // a batch of markers only moves the position
	if got := position(t, b); got.Offset != 43 || len(got.Unchecked) != 0 {
		t.Errorf("position after an empty Apply = %+v, want offset 43, nothing unchecked", got)
	}
}

func testDeletes(t *testing.T, f *fixture) {
	b := f.open("counts", task)
	apply(t, b, 1, put("gone", "x"), put("empty", ""), put("kept", "y"))
	apply(t, b, 2, del("gone"), del("never-written"))
	if v, ok := get(t, b, "gone"); ok {
		t.Errorf("Get of a deleted key = %q, true", v)
	}
	if v, ok := get(t, b, "empty"); !ok || v != "" {
		t.Errorf("Get of a key put empty = %q, %v; want it present and empty (a nil value deletes, an empty one does not)", v, ok)
	}
	got := all(t, b, nil, nil)
	if len(got) != 2 || string(got[0].Key) != "empty" || got[0].Value == nil || string(got[1].Key) != "kept" {
		t.Errorf("Range after deletes = %q, want empty and kept", got)
	}
}

func testRange(t *testing.T, f *fixture) {
	b := f.open("counts", task)
	keys := []string{"b", "a\xff", "a", "\x00", "c\x00", "c", "ab"}
	var ws []state.Write
	for _, k := range keys {
		ws = append(ws, put(k, "v-"+k))
	}
	apply(t, b, 1, ws...)
	slices.Sort(keys)
	if got := keysOf(all(t, b, nil, nil)); !slices.Equal(got, keys) {
		t.Errorf("Range(nil, nil) = %q, want every key in ascending byte order %q", got, keys)
	}
	if got := keysOf(all(t, b, []byte("a"), []byte("c"))); !slices.Equal(got, []string{"a", "ab", "a\xff", "b"}) {
		t.Errorf(`Range("a", "c") = %q, want [a, c): a, ab, a\xff, b`, got)
	}
	if got := keysOf(all(t, b, []byte("b"), nil)); !slices.Equal(got, []string{"b", "c", "c\x00"}) {
		t.Errorf(`Range("b", nil) = %q, want from b to the last key`, got)
	}
	n := 0
	if err := b.Range(nil, nil, func(_, _ []byte) bool { n++; return n < 2 }); err != nil || n != 2 {
		t.Errorf("Range told to stop at the second key called back %d times (%v), want 2", n, err)
	}
	for _, w := range all(t, b, nil, nil) {
		if string(w.Value) != "v-"+string(w.Key) {
			t.Errorf("Range yields %q=%q, want the value written, v-%s", w.Key, w.Value, w.Key)
		}
	}
}

// keysOf is the keys of ws, as strings.
func keysOf(ws []state.Write) []string {
	out := make([]string, len(ws))
	for i, w := range ws {
		out[i] = string(w.Key)
	}
	return out
}

func testCopies(t *testing.T, f *fixture) {
	b := f.open("counts", task)
	w := put("k", "value")
	at := state.Position{Offset: 7, Checked: 5, Unchecked: []int64{7}}
	if err := b.Apply([]state.Write{w}, at); err != nil {
		t.Fatal(err)
	}
	copy(w.Key, "x")
	copy(w.Value, "XXXXX")
	at.Unchecked[0] = 99
	if v, ok := get(t, b, "k"); !ok || v != "value" {
		t.Errorf("Get(k) = %q, %v after the caller reused the written slices; Apply must copy them", v, ok)
	}
	if got := position(t, b); !slices.Equal(got.Unchecked, []int64{7}) {
		t.Errorf("Unchecked = %v after the caller reused its slice; Apply must copy it", got.Unchecked)
	}
	v, _, err := b.Get([]byte("k"))
	if err != nil {
		t.Fatal(err)
	}
	copy(v, "YYYYY")
	position(t, b).Unchecked[0] = 98
	if v, _ := get(t, b, "k"); v != "value" {
		t.Errorf("Get(k) = %q after the caller changed an earlier Get's value; Get must return a copy", v)
	}
	if got := position(t, b); !slices.Equal(got.Unchecked, []int64{7}) {
		t.Errorf("Unchecked = %v after the caller changed an earlier Position's; Position must return a copy", got.Unchecked)
	}
}

func testApart(t *testing.T, f *fixture) {
	a := f.open("counts", task)
	other := f.open("totals", task)
	next := f.open("counts", state.Task{Topic: task.Topic, Partition: task.Partition + 1})
	apply(t, a, 5, put("k", "a"))
	for what, b := range map[string]state.Backend{"another store of the task": other, "the store of another task": next} {
		fresh(t, b, what)
	}
	apply(t, other, 9, put("k", "other"))
	if v, _ := get(t, a, "k"); v != "a" {
		t.Errorf("Get(k) = %q, want a: another store's Apply reached it", v)
	}
}

// testConcurrent applies batches that each write every key the batch's
// number while readers run; a reader sees only numbers some batch wrote.
func testConcurrent(t *testing.T, f *fixture) {
	b := f.open("counts", task)
	const keys, batches, readers = 20, 200, 4
	var wg sync.WaitGroup
	done := make(chan struct{})
	errs := make(chan error, readers)
	for range readers {
		wg.Go(func() { errs <- read(b, keys, batches, done) })
	}
	for i := range batches {
		ws := make([]state.Write, keys)
		for k := range ws {
			ws[k] = put(fmt.Sprintf("k%02d", k), fmt.Sprintf("%04d", i))
		}
		apply(t, b, int64(i), ws...)
	}
	close(done)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
}

// read reads b until done, and reports a value no batch wrote.
func read(b state.Backend, keys, batches int, done <-chan struct{}) error {
	valid := func(v []byte) bool {
		var n int
		_, err := fmt.Sscanf(string(v), "%04d", &n)
		return err == nil && len(v) == 4 && n < batches
	}
	for i := 0; ; i++ {
		select {
		case <-done:
			return nil
		default:
		}
		v, ok, err := b.Get(fmt.Appendf(nil, "k%02d", i%keys))
		if err != nil || ok && !valid(v) {
			return fmt.Errorf("Get beside Apply: %q, %v", v, err)
		}
		var bad []byte
		err = b.Range(nil, nil, func(_, v []byte) bool {
			if !valid(v) {
				bad = slices.Clone(v)
			}
			return bad == nil
		})
		if err != nil || bad != nil {
			return fmt.Errorf("Range beside Apply: yielded %q, %v", bad, err)
		}
	}
}

func testReopen(t *testing.T, f *fixture) {
	b := f.open("counts", task)
	at := state.Position{Offset: 12, Checked: 10, Unchecked: []int64{12}}
	if err := b.Apply([]state.Write{put("k", "v"), put("e", "")}, at); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	again := f.open("counts", task)
	got, entries := position(t, again), all(t, again, nil, nil)
	kept := samePosition(got, at) && len(entries) == 2 && string(entries[1].Value) == "v" && entries[0].Value != nil
	if f.e.Persistent && !kept {
		t.Errorf("after a reopen: position %+v and entries %q, want %+v with e (empty) and k=v", got, entries, at)
	}
	if !f.e.Persistent && !kept {
		// Keeping nothing is fine too, but all of it or none.
		fresh(t, again, "a store reopened by an engine that keeps nothing")
	}
}

func testWipe(t *testing.T, f *fixture) {
	b := f.open("counts", task)
	w, ok := b.Backend.(state.Wiper)
	if !ok {
		t.Skip("the backend offers no Wipe (state.Wiper)")
	}
	apply(t, b, 3, put("k", "v"))
	if err := w.Wipe(); err != nil {
		t.Fatalf("Wipe: %v", err)
	}
	fresh(t, b, "a wiped backend")
	apply(t, b, 8, put("n", "1"))
	if v, ok := get(t, b, "n"); !ok || v != "1" {
		t.Errorf("Get after a write following Wipe = %q, %v", v, ok)
	}
	if !f.e.Persistent {
		return
	}
	if err := w.Wipe(); err != nil {
		t.Fatalf("Wipe: %v", err)
	}
	if err := b.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	fresh(t, f.open("counts", task), "a wiped backend, reopened")
}
