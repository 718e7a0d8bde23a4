package store_test

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

// RollbackTo undoes the writes since its Savepoint and nothing before it,
// as often as it is called: each retried attempt of a node starts from the
// state its first attempt found, while the record's earlier writes stay,
// for Rollback to undo if the record fails in the end.
func TestSavepointRollbackTo(t *testing.T) {
	for _, ec := range engineCases() {
		t.Run(ec.name, func(t *testing.T) {
			s := newFixture(t, ec).open()
			must := func(err error) {
				t.Helper()
				if err != nil {
					t.Fatal(err)
				}
			}
			want := func(when string, kv map[string]string) {
				t.Helper()
				for key, w := range kv {
					v, ok, err := s.Get([]byte(key))
					if err != nil || ok != (w != "") || string(v) != w {
						t.Errorf("%s: %s = %q %v %v, want %q", when, key, v, ok, err, w)
					}
				}
			}
			must(s.Put([]byte("a"), []byte("committed")))
			must(s.Commit(10))

			s.Mark()
			must(s.Put([]byte("a"), []byte("node1"))) // an earlier node of the record
			sp := s.Savepoint()
			for range 2 { // two failed attempts of the retried node
				must(s.Put([]byte("a"), []byte("attempt")))
				must(s.Put([]byte("b"), []byte("attempt")))
				must(s.Delete([]byte("a")))
				s.RollbackTo(sp)
				want("after RollbackTo", map[string]string{"a": "node1", "b": ""})
			}
			must(s.Put([]byte("a"), []byte("last"))) // the attempt that succeeds
			want("after the last attempt", map[string]string{"a": "last"})

			s.Rollback() // the record fails in the end
			want("after Rollback", map[string]string{"a": "committed", "b": ""})

			s.RollbackTo(sp) // a savepoint of a record that is over
			s.Mark()
			must(s.Put([]byte("c"), []byte("next record")))
			s.RollbackTo(sp)
			want("after a stale RollbackTo", map[string]string{"c": "next record"})

			unmarked := newFixture(t, ec).open() // a store no Mark reached
			sp = unmarked.Savepoint()
			must(unmarked.Put([]byte("d"), []byte("attempt")))
			unmarked.RollbackTo(sp)
			if _, ok, _ := unmarked.Get([]byte("d")); ok {
				t.Error("RollbackTo left a write on a store that Savepoint marked")
			}
		})
	}
}
