package store_test

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/eosflow/eosflow/internal/store"

	"github.com/eosflow/eosflow/state"
	"github.com/eosflow/eosflow/state/pebble"
	"github.com/eosflow/eosflow/state/statetest"
)

// engineCase is one engine under the conformance suite.
type engineCase struct {
	name       string
	engine     func() state.Engine
	persistent bool // data and offset survive Close and reopen
}

// engineCases: kept runs the reopen cases without a disk, pebble on a
// real store on disk.
func engineCases() []engineCase {
	return []engineCase{
		{name: "memory", engine: state.Memory},
		{name: "kept", engine: store.NewKept, persistent: true},
		{name: "pebble", engine: func() state.Engine { return pebble.New() }, persistent: true},
	}
}

// TestConformance runs the same suite against every engine.
func TestConformance(t *testing.T) {
	for _, ec := range engineCases() {
		t.Run(ec.name, func(t *testing.T) { conformance(t, ec) })
	}
}

var task = state.Task{Topic: "orders", Partition: 3}

// fixture opens a store of ec in a fresh directory and reopens it there.
type fixture struct {
	t   *testing.T
	e   state.Engine
	dir string
}

func newFixture(t *testing.T, ec engineCase) *fixture {
	return &fixture{t: t, e: ec.engine(), dir: t.TempDir()}
}

func (f *fixture) open() *store.Store {
	f.t.Helper()
	s, err := store.Open(f.e, f.dir, "counts", task)
	if err != nil {
		f.t.Fatal(err)
	}
	f.t.Cleanup(func() { _ = s.Close() })
	return s
}

func conformance(t *testing.T, ec engineCase) {
	tests := []struct {
		name string
		fn   func(t *testing.T, ec engineCase)
	}{
		{"fresh store has no offset", testFresh},
		{"overlay visible before commit, engine untouched", testOverlayVisible},
		{"tombstones hide engine values", testTombstones},
		{"empty value is not a delete", testEmptyValue},
		{"changes are last write per key in key order", testChanges},
		{"range merges overlay over engine in order", testRangeMerge},
		{"range bounds, prefix and early stop", testRangeBounds},
		{"commit applies data and offset together", testCommit},
		{"close without commit keeps neither data nor offset", testCrashBeforeCommit},
		{"abort drops the overlay", testAbort},
		{"restore applies a changelog with deletes", testRestore},
		{"offsets must move forward", testOffsetOrder},
		{"restore refuses an open batch", testRestoreBatchOpen},
		{"returned slices are copies", testCopies},
		{"closed store refuses calls, close is idempotent", testClosed},
		{"reads run concurrently with commits", testConcurrent},
		{"wipe empties data and offset, and lasts", testWipe},
		{"batches applied on End's word stay unchecked until read back", testUnchecked},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { tt.fn(t, ec) })
	}
}

func mustGet(t *testing.T, s *store.Store, key string) (string, bool) {
	t.Helper()
	v, ok, err := s.Get([]byte(key))
	if err != nil {
		t.Fatal(err)
	}
	return string(v), ok
}

func wantGet(t *testing.T, s *store.Store, key, want string, wantOK bool) {
	t.Helper()
	v, ok := mustGet(t, s, key)
	if ok != wantOK || v != want {
		t.Fatalf("Get(%q) = %q, %v; want %q, %v", key, v, ok, want, wantOK)
	}
}

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

// entries collects a Range as "k=v" strings.
func entries(t *testing.T, s *store.Store, start, end []byte) []string {
	t.Helper()
	var out []string
	for e, err := range s.Range(start, end) {
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, string(e.Key)+"="+string(e.Value))
	}
	return out
}

// committed reads the engine alone, without the overlay.
func committed(t *testing.T, s *store.Store, key string) (string, bool) {
	t.Helper()
	v, ok, err := store.CommittedGet(s, []byte(key))
	if err != nil {
		t.Fatal(err)
	}
	return string(v), ok
}

func testFresh(t *testing.T, ec engineCase) {
	s := newFixture(t, ec).open()
	if s.Offset() != state.NoOffset {
		t.Fatalf("Offset = %d, want NoOffset", s.Offset())
	}
	wantGet(t, s, "a", "", false)
	if got := entries(t, s, nil, nil); len(got) != 0 {
		t.Fatalf("Range = %q, want nothing", got)
	}
}

func testOverlayVisible(t *testing.T, ec engineCase) {
	s := newFixture(t, ec).open()
	put(t, s, "a", "1")
	wantGet(t, s, "a", "1", true)
	if _, ok := committed(t, s, "a"); ok {
		t.Fatal("the engine saw an uncommitted write")
	}
	must(t, s.Commit(0))
	put(t, s, "a", "2")
	wantGet(t, s, "a", "2", true)
	if v, _ := committed(t, s, "a"); v != "1" {
		t.Fatalf("engine has %q before the second commit, want 1", v)
	}
}

func testTombstones(t *testing.T, ec engineCase) {
	s := newFixture(t, ec).open()
	put(t, s, "a", "1", "b", "2")
	must(t, s.Commit(5))
	must(t, s.Delete([]byte("a")))
	wantGet(t, s, "a", "", false)
	if got := entries(t, s, nil, nil); !slices.Equal(got, []string{"b=2"}) {
		t.Fatalf("Range = %q, want [b=2]", got)
	}
	if ch := s.Changes(); len(ch) != 1 || string(ch[0].Key) != "a" || ch[0].Value != nil {
		t.Fatalf("Changes = %v, want one tombstone for a", ch)
	}
	must(t, s.Commit(6))
	if _, ok := committed(t, s, "a"); ok {
		t.Fatal("committed tombstone left the key in the engine")
	}
	put(t, s, "a", "3") // a put after a delete revives the key
	wantGet(t, s, "a", "3", true)
}

func testEmptyValue(t *testing.T, ec engineCase) {
	s := newFixture(t, ec).open()
	must(t, s.Put([]byte("e"), nil))
	ch := s.Changes()
	if len(ch) != 1 || ch[0].Value == nil || len(ch[0].Value) != 0 {
		t.Fatalf("Changes = %#v, want an empty non-nil value", ch)
	}
	must(t, s.Commit(0))
	v, ok, err := s.Get([]byte("e"))
	if err != nil || !ok || len(v) != 0 {
		t.Fatalf("Get = %q, %v, %v; want empty, true", v, ok, err)
	}
}

func testChanges(t *testing.T, ec engineCase) {
	s := newFixture(t, ec).open()
	put(t, s, "c", "1", "a", "1", "b", "1", "c", "2")
	must(t, s.Delete([]byte("b")))
	put(t, s, "a", "3")
	var got []string
	for _, w := range s.Changes() {
		if w.Value == nil {
			got = append(got, string(w.Key)+" deleted")
			continue
		}
		got = append(got, string(w.Key)+"="+string(w.Value))
	}
	want := []string{"a=3", "b deleted", "c=2"}
	if !slices.Equal(got, want) {
		t.Fatalf("Changes = %q, want %q", got, want)
	}
}

func testRangeMerge(t *testing.T, ec engineCase) {
	s := newFixture(t, ec).open()
	put(t, s, "b", "e", "d", "e", "f", "e", "h", "e")
	must(t, s.Commit(1))
	// Overlay: new keys before, between and after the engine's, an
	// overwrite, a delete, and a delete of a key the engine lacks.
	put(t, s, "a", "o", "c", "o", "d", "o", "i", "o")
	must(t, s.Delete([]byte("f")))
	must(t, s.Delete([]byte("g")))
	want := []string{"a=o", "b=e", "c=o", "d=o", "h=e", "i=o"}
	if got := entries(t, s, nil, nil); !slices.Equal(got, want) {
		t.Fatalf("Range = %q, want %q", got, want)
	}
	must(t, s.Commit(2))
	if got := entries(t, s, nil, nil); !slices.Equal(got, want) {
		t.Fatalf("after commit Range = %q, want %q", got, want)
	}
}

func testRangeBounds(t *testing.T, ec engineCase) {
	s := newFixture(t, ec).open()
	put(t, s, "user:1", "e", "user:3", "e", "v", "e", "u", "e")
	must(t, s.Commit(1))
	put(t, s, "user:2", "o", "user:", "o", "\xff", "o")
	cases := []struct {
		name       string
		start, end []byte
		want       []string
	}{
		{"all", nil, nil, []string{"u=e", "user:=o", "user:1=e", "user:2=o", "user:3=e", "v=e", "\xff=o"}},
		{"start..end", []byte("user:1"), []byte("user:3"), []string{"user:1=e", "user:2=o"}},
		{"start..", []byte("user:3"), nil, []string{"user:3=e", "v=e", "\xff=o"}},
		{"..end", nil, []byte("user:"), []string{"u=e"}},
		{"empty", []byte("v"), []byte("v"), nil},
		{"reversed", []byte("v"), []byte("a"), nil},
	}
	for _, c := range cases {
		if got := entries(t, s, c.start, c.end); !slices.Equal(got, c.want) {
			t.Errorf("%s: Range = %q, want %q", c.name, got, c.want)
		}
	}
	var pre []string
	for e, err := range s.Prefix([]byte("user:")) {
		must(t, err)
		pre = append(pre, string(e.Key))
	}
	if want := []string{"user:", "user:1", "user:2", "user:3"}; !slices.Equal(pre, want) {
		t.Errorf("Prefix = %q, want %q", pre, want)
	}
	for e, err := range s.Prefix([]byte("\xff")) {
		must(t, err)
		if string(e.Key) != "\xff" {
			t.Errorf("Prefix(ff) yielded %q", e.Key)
		}
	}
	n := 0
	for range s.Range(nil, nil) {
		n++
		if n == 3 {
			break
		}
	}
	if n != 3 {
		t.Fatalf("early stop: %d entries", n)
	}
}

func testCommit(t *testing.T, ec engineCase) {
	f := newFixture(t, ec)
	s := f.open()
	put(t, s, "a", "1", "b", "2")
	must(t, s.Commit(41))
	if s.Offset() != 41 {
		t.Fatalf("Offset = %d after Commit(41)", s.Offset())
	}
	if v, ok := committed(t, s, "a"); !ok || v != "1" {
		t.Fatalf("engine a = %q, %v after commit", v, ok)
	}
	if len(s.Changes()) != 0 {
		t.Fatal("overlay not empty after commit")
	}
	must(t, s.Commit(40)) // nothing to commit: no offset check, no write
	must(t, s.Close())
	r := f.open()
	if !ec.persistent {
		if r.Offset() != state.NoOffset || len(entries(t, r, nil, nil)) != 0 {
			t.Fatal("a memory store kept data across reopen")
		}
		return
	}
	if r.Offset() != 41 {
		t.Fatalf("reopened Offset = %d, want 41", r.Offset())
	}
	if got := entries(t, r, nil, nil); !slices.Equal(got, []string{"a=1", "b=2"}) {
		t.Fatalf("reopened Range = %q", got)
	}
}

func testCrashBeforeCommit(t *testing.T, ec engineCase) {
	f := newFixture(t, ec)
	s := f.open()
	put(t, s, "a", "1")
	must(t, s.Commit(7))
	put(t, s, "a", "2", "b", "2")
	_ = s.Changes() // produced to the changelog, but the transaction never committed
	must(t, s.Close())
	r := f.open()
	want, wantOff, wantA := []string{"a=1"}, int64(7), true
	if !ec.persistent {
		want, wantOff, wantA = nil, state.NoOffset, false
	}
	if r.Offset() != wantOff {
		t.Fatalf("Offset = %d, want %d", r.Offset(), wantOff)
	}
	if got := entries(t, r, nil, nil); !slices.Equal(got, want) {
		t.Fatalf("Range = %q, want %q", got, want)
	}
	if wantA {
		wantGet(t, r, "a", "1", true)
	}
	wantGet(t, r, "b", "", false)
}

func testAbort(t *testing.T, ec engineCase) {
	s := newFixture(t, ec).open()
	put(t, s, "a", "1")
	must(t, s.Commit(0))
	put(t, s, "a", "2", "b", "2")
	must(t, s.Delete([]byte("a")))
	s.Abort()
	wantGet(t, s, "a", "1", true)
	wantGet(t, s, "b", "", false)
	if len(s.Changes()) != 0 || s.Offset() != 0 {
		t.Fatalf("after Abort: changes %v, offset %d", s.Changes(), s.Offset())
	}
	must(t, s.Commit(1)) // an empty overlay commits nothing
	if s.Offset() != 0 {
		t.Fatalf("empty commit moved the offset to %d", s.Offset())
	}
}

func testRestore(t *testing.T, ec engineCase) {
	f := newFixture(t, ec)
	s := f.open()
	log := statetest.Changelog(1000, 1)
	const batch = 64
	for i := 0; i < 600; i += batch {
		end := min(i+batch, 600)
		must(t, s.Restore(log[i:end], int64(end-1)))
	}
	if s.Offset() != 599 {
		t.Fatalf("Offset = %d, want 599", s.Offset())
	}
	if got, want := entries(t, s, nil, nil), statetest.Model(log[:600]); !slices.Equal(got, want) {
		t.Fatalf("after restore Range = %q\nwant %q", got, want)
	}
	must(t, s.Close())
	s = f.open()
	from := 0
	if ec.persistent {
		from = int(s.Offset() + 1) // only what the changelog gained
	}
	if from != map[bool]int{true: 600, false: 0}[ec.persistent] {
		t.Fatalf("restore would start at %d", from)
	}
	for i := from; i < len(log); i += batch {
		end := min(i+batch, len(log))
		must(t, s.Restore(log[i:end], int64(end-1)))
	}
	if got, want := entries(t, s, nil, nil), statetest.Model(log); !slices.Equal(got, want) {
		t.Fatalf("after second restore Range = %q\nwant %q", got, want)
	}
}

func testOffsetOrder(t *testing.T, ec engineCase) {
	s := newFixture(t, ec).open()
	must(t, s.Restore([]state.Write{{Key: []byte("a"), Value: []byte("1")}}, 10))
	err := s.Restore([]state.Write{{Key: []byte("a"), Value: []byte("2")}}, 10)
	var oe *state.OffsetError
	if !errors.As(err, &oe) || !errors.Is(err, state.ErrOffset) || oe.Applied != 10 || oe.Got != 10 || oe.Store != "counts" {
		t.Fatalf("Restore(10) after 10 = %v, want an *OffsetError", err)
	}
	put(t, s, "a", "3")
	if err := s.Commit(9); !errors.Is(err, state.ErrOffset) {
		t.Fatalf("Commit(9) after 10 = %v, want ErrOffset", err)
	}
	wantGet(t, s, "a", "3", true) // a refused commit keeps the overlay
	must(t, s.Commit(11))
	if v, _ := committed(t, s, "a"); v != "3" {
		t.Fatalf("engine a = %q", v)
	}
}

func testRestoreBatchOpen(t *testing.T, ec engineCase) {
	s := newFixture(t, ec).open()
	put(t, s, "a", "1")
	if err := s.Restore(nil, 0); !errors.Is(err, state.ErrBatchOpen) {
		t.Fatalf("Restore with an open batch = %v, want ErrBatchOpen", err)
	}
	s.Abort()
	must(t, s.Restore(nil, 0)) // an empty restore still records its offset
	if s.Offset() != 0 {
		t.Fatalf("Offset = %d", s.Offset())
	}
}

func testCopies(t *testing.T, ec engineCase) {
	s := newFixture(t, ec).open()
	k, v := []byte("a"), []byte("1")
	must(t, s.Put(k, v))
	k[0], v[0] = 'z', '9' // the caller reuses its buffers
	wantGet(t, s, "a", "1", true)
	got, _, _ := s.Get([]byte("a"))
	got[0] = 'x'
	wantGet(t, s, "a", "1", true)
	w := state.Write{Key: []byte("b"), Value: []byte("2")}
	must(t, s.Commit(0))
	must(t, s.Restore([]state.Write{w}, 1))
	w.Key[0], w.Value[0] = 'q', 'q' // fetched records' buffers get reused
	wantGet(t, s, "b", "2", true)
	for e, err := range s.Range(nil, nil) {
		must(t, err)
		e.Key[0], e.Value[0] = 'x', 'x'
	}
	if got := entries(t, s, nil, nil); !slices.Equal(got, []string{"a=1", "b=2"}) {
		t.Fatalf("Range = %q after modifying yielded slices", got)
	}
}

func testClosed(t *testing.T, ec engineCase) {
	s := newFixture(t, ec).open()
	must(t, s.Close())
	must(t, s.Close())
	checks := map[string]error{
		"Put":     s.Put([]byte("a"), nil),
		"Delete":  s.Delete([]byte("a")),
		"Commit":  s.Commit(1),
		"Restore": s.Restore(nil, 1),
	}
	_, _, checks["Get"] = s.Get([]byte("a"))
	for _, err := range s.Range(nil, nil) {
		checks["Range"] = err
	}
	for name, err := range checks {
		if !errors.Is(err, state.ErrClosed) {
			t.Errorf("%s on a closed store = %v, want ErrClosed", name, err)
		}
	}
}

// testConcurrent reads the engine while batches commit: each commit
// rewrites every key to the same value, so a reader of committed data
// that ever sees two values saw half a commit. Another reader goes
// through the overlay, for the race detector.
func testConcurrent(t *testing.T, ec engineCase) {
	s := newFixture(t, ec).open()
	keys := []string{"a", "b", "c", "d"}
	var wg sync.WaitGroup
	stop := make(chan struct{})
	errs := make(chan error, 3)
	stopped := func() bool {
		select {
		case <-stop:
			return true
		default:
			return false
		}
	}
	for range 2 {
		wg.Go(func() {
			for !stopped() {
				seen := map[string]bool{}
				err := store.CommittedRange(s, nil, nil, func(_, v []byte) bool { seen[string(v)] = true; return true })
				if err != nil {
					errs <- err
					return
				}
				if len(seen) > 1 {
					errs <- fmt.Errorf("a range saw values %v from different commits", seen)
					return
				}
			}
		})
	}
	wg.Go(func() {
		for !stopped() {
			if _, _, err := s.Get([]byte("c")); err != nil {
				errs <- err
				return
			}
			for _, err := range s.Range(nil, nil) {
				if err != nil {
					errs <- err
					return
				}
			}
		}
	})
	for i := range 200 {
		for _, k := range keys {
			must(t, s.Put([]byte(k), []byte(fmt.Sprint(i))))
		}
		must(t, s.Commit(int64(i)))
	}
	close(stop)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if s.Offset() != 199 {
		t.Fatalf("Offset = %d", s.Offset())
	}
}

func testWipe(t *testing.T, ec engineCase) {
	f := newFixture(t, ec)
	s := f.open()
	put(t, s, "a", "1", "b", "2")
	must(t, s.Commit(7))
	put(t, s, "c", "3")
	if err := s.Wipe(); !errors.Is(err, state.ErrBatchOpen) {
		t.Fatalf("Wipe with an open batch = %v, want ErrBatchOpen", err)
	}
	s.Abort()
	must(t, s.Wipe())
	if s.Offset() != state.NoOffset {
		t.Fatalf("Offset after Wipe = %d, want NoOffset", s.Offset())
	}
	if got := entries(t, s, nil, nil); len(got) != 0 {
		t.Fatalf("entries after Wipe = %q", got)
	}
	// A wiped store restores from the start: offsets begin again.
	must(t, s.Restore([]state.Write{{Key: []byte("z"), Value: []byte("9")}}, 0))
	if !ec.persistent {
		return
	}
	must(t, s.Close())
	s = f.open()
	if s.Offset() != 0 {
		t.Fatalf("Offset after Wipe, restore and reopen = %d, want 0", s.Offset())
	}
	if got := entries(t, s, nil, nil); !slices.Equal(got, []string{"z=9"}) {
		t.Fatalf("entries after Wipe, restore and reopen = %q, want [z=9]", got)
	}
}

func testUnchecked(t *testing.T, ec engineCase) {
	f := newFixture(t, ec)
	s := f.open()
	want := func(s *store.Store, off, checked int64, unchecked ...int64) {
		t.Helper()
		if at := s.Position(); at.Offset != off || at.Checked != checked || !slices.Equal(at.Unchecked, unchecked) {
			t.Fatalf("Position = %+v, want offset %d, checked %d, unchecked %v", at, off, checked, unchecked)
		}
	}
	reopen := func(s *store.Store) *store.Store {
		t.Helper()
		if !ec.persistent {
			return s
		}
		must(t, s.Close())
		return f.open()
	}
	want(s, state.NoOffset, state.NoOffset)
	must(t, s.Restore([]state.Write{{Key: []byte("a"), Value: []byte("1")}}, 1)) // read back: committed
	want(s, 1, 1)
	put(t, s, "a", "2")
	must(t, s.Commit(3))
	put(t, s, "b", "1")
	must(t, s.Commit(7))
	s = reopen(s)
	want(s, 7, 1, 3, 7)
	put(t, s, "c", "1")
	if err := s.Checked(); !errors.Is(err, state.ErrBatchOpen) {
		t.Fatalf("Checked with an open batch = %v, want ErrBatchOpen", err)
	}
	s.Abort()
	must(t, s.Checked())
	s = reopen(s)
	want(s, 7, 7)
	put(t, s, "c", "1")
	must(t, s.Commit(9))
	must(t, s.Restore([]state.Write{{Key: []byte("d"), Value: []byte("1")}}, 12)) // 9 still unchecked
	s = reopen(s)
	want(s, 12, 7, 9)
	must(t, s.Wipe())
	s = reopen(s)
	want(s, state.NoOffset, state.NoOffset)
}

// The memory engine's size follows every kind of write: a new key adds its
// key and value, an overwrite replaces the old value's bytes, a delete
// takes the key's bytes away, a wipe empties it.
func TestMemorySizeBytes(t *testing.T) {
	b, err := state.Memory().Open("", "s", state.Task{Topic: "in"})
	if err != nil {
		t.Fatal(err)
	}
	sized := b.(state.Sized)
	steps := []struct {
		writes []state.Write
		want   int64
	}{
		{[]state.Write{{Key: []byte("a"), Value: []byte("123")}, {Key: []byte("bb"), Value: []byte("4")}}, 4 + 3},
		{[]state.Write{{Key: []byte("a"), Value: []byte("1")}}, 2 + 3},
		{[]state.Write{{Key: []byte("bb")}}, 2},
		{[]state.Write{{Key: []byte("zz")}}, 2}, // deleting a missing key
	}
	for i, s := range steps {
		if err := b.Apply(s.writes, state.Position{Offset: int64(i), Checked: int64(i)}); err != nil {
			t.Fatal(err)
		}
		if got, _ := sized.SizeBytes(); got != s.want {
			t.Fatalf("step %d: %d bytes, want %d", i, got, s.want)
		}
	}
	if err := b.(state.Wiper).Wipe(); err != nil {
		t.Fatal(err)
	}
	if got, _ := sized.SizeBytes(); got != 0 {
		t.Fatalf("%d bytes after Wipe", got)
	}
}
