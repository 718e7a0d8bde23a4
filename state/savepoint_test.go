package state

import "testing"

// Rollback undoes the writes since Mark and nothing before it: one
// record's writes go when it fails, the batch's other writes stay.
func TestMarkRollback(t *testing.T) {
	for _, ec := range engineCases() {
		t.Run(ec.name, func(t *testing.T) {
			s := newFixture(t, ec).open()
			must := func(err error) {
				t.Helper()
				if err != nil {
					t.Fatal(err)
				}
			}
			must(s.Put([]byte("a"), []byte("1")))
			must(s.Put([]byte("gone"), []byte("x")))
			must(s.Commit(10))
			must(s.Put([]byte("b"), []byte("batch"))) // an earlier record of the batch

			s.Mark()
			must(s.Put([]byte("a"), []byte("2")))
			must(s.Put([]byte("a"), []byte("3")))
			must(s.Put([]byte("b"), []byte("record")))
			must(s.Put([]byte("c"), []byte("new")))
			must(s.Delete([]byte("gone")))
			s.Rollback()

			for key, want := range map[string]string{"a": "1", "b": "batch", "gone": "x"} {
				if v, ok, err := s.Get([]byte(key)); err != nil || !ok || string(v) != want {
					t.Errorf("%s = %q %v %v after Rollback, want %q", key, v, ok, err, want)
				}
			}
			if _, ok, _ := s.Get([]byte("c")); ok {
				t.Error("a key the rolled-back record made is still there")
			}
			if ch := s.Changes(); len(ch) != 1 || string(ch[0].Key) != "b" {
				t.Errorf("changes after Rollback: %v, want only the earlier record's b", ch)
			}

			s.Mark() // a record that succeeds: nothing to undo
			must(s.Put([]byte("d"), []byte("kept")))
			s.Mark()
			s.Rollback()
			if v, ok, _ := s.Get([]byte("d")); !ok || string(v) != "kept" {
				t.Error("a Rollback undid a write from before its Mark")
			}
		})
	}
}
