package pebble

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/eosflow/eosflow/internal/store"

	pebbledb "github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/eosflow/eosflow/state"
	"github.com/eosflow/eosflow/state/statetest"
)

// TestPebbleCrash commits batches, then opens a crash image of the
// filesystem (only what was synced survives, as after a power cut): the
// store must hold exactly the data of the offset it reports, and
// restoring the changelog from there must reach the final state.
func TestPebbleCrash(t *testing.T) {
	for _, unsynced := range []int{0, 30, 100} {
		t.Run(fmt.Sprintf("unsynced %d%%", unsynced), func(t *testing.T) {
			fs := vfs.NewCrashableMem()
			e := &engine{fs: fs, memTableSize: 256 << 10}
			s, err := store.Open(e, "/state", "counts", task)
			must(t, err)
			defer s.Close()
			log := statetest.Changelog(6000, 7)
			for i := range log {
				log[i].Value = pad(log[i].Value)
			}
			const batch = 20
			for i := 0; i < len(log); i += batch {
				for _, w := range log[i : i+batch] {
					if w.Value == nil {
						must(t, s.Delete(w.Key))
					} else {
						must(t, s.Put(w.Key, w.Value))
					}
				}
				must(t, s.Commit(int64(i+batch-1)))
			}
			rng := rand.New(rand.NewPCG(uint64(unsynced), 1))
			crashed := fs.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: unsynced, RNG: rng})

			r, err := store.Open(&engine{fs: crashed}, "/state", "counts", task)
			must(t, err)
			defer r.Close()
			off := r.Offset()
			t.Logf("crash image applied up to offset %d of %d", off, len(log)-1)
			if unsynced == 0 && off >= int64(len(log)-1) {
				t.Fatalf("nothing was lost (offset %d): the crash did not drop the memtable", off)
			}
			if got, want := entries(t, r, nil, nil), statetest.Model(log[:off+1]); !slices.Equal(got, want) {
				t.Fatalf("data does not match offset %d:\n got %d entries\nwant %d entries", off, len(got), len(want))
			}
			must(t, r.Restore(log[off+1:], int64(len(log)-1)))
			if got, want := entries(t, r, nil, nil), statetest.Model(log); !slices.Equal(got, want) {
				t.Fatal("restore from the crash image's offset did not reach the final state")
			}
		})
	}
}

// pad makes values large enough for memtables to fill and flush.
func pad(v []byte) []byte {
	if v == nil {
		return nil
	}
	return append(v, make([]byte, 200)...)
}

func TestPebbleLayout(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"counts", "sessions"} {
		s, err := store.Open(New(CacheSize(1<<20), MemTableSize(1<<20)), dir, name, task)
		must(t, err)
		put(t, s, "k", name)
		must(t, s.Commit(0))
		must(t, s.Close())
	}
	for _, name := range []string{"counts", "sessions"} {
		if m, _ := filepath.Glob(filepath.Join(dir, "orders-3", name, "MANIFEST-*")); len(m) == 0 {
			t.Errorf("store %s: no pebble database in <dir>/orders-3/%s", name, name)
		}
		s, err := store.Open(New(), dir, name, task)
		must(t, err)
		wantGet(t, s, "k", name, true) // the stores do not share data
		must(t, s.Close())
	}
}

// TestPebbleKeyspace puts keys that look like the engine's own.
func TestPebbleKeyspace(t *testing.T) {
	s, err := store.Open(New(), t.TempDir(), "counts", task)
	must(t, err)
	defer s.Close()
	keys := []string{"", "m", "moffset", "offset", "d", "\x00", "\xff\xff"}
	for _, k := range keys {
		put(t, s, k, "v")
	}
	must(t, s.Commit(12))
	if got := entries(t, s, nil, nil); len(got) != len(keys) {
		t.Fatalf("Range = %q, want %d entries", got, len(keys))
	}
	if s.Offset() != 12 {
		t.Fatalf("Offset = %d", s.Offset())
	}
}

// The engine needs a state directory it can write to; Open names the
// store whose engine failed.
func TestOpenErrors(t *testing.T) {
	if _, err := store.Open(New(), "", "s", task); !errors.Is(err, state.ErrInvalid) {
		t.Fatalf("Open without a state directory = %v, want state.ErrInvalid", err)
	}
	file := filepath.Join(t.TempDir(), "file")
	must(t, os.WriteFile(file, nil, 0o644))
	_, err := store.Open(New(), file, "s", task) // the state directory is a file
	var se *state.StoreError
	if !errors.As(err, &se) || se.Store != "s" || se.Task != task {
		t.Fatalf("Open under a file = %v, want a *state.StoreError naming the store", err)
	}
}

// The engine records when it last applied, with the data: the runtime reads
// it to tell a store too old to catch up from a compacted changelog.
func TestPebbleAppliedAt(t *testing.T) {
	dir := t.TempDir()
	s, err := store.Open(New(), dir, "counts", task)
	must(t, err)
	if at, err := s.AppliedAt(); err != nil || !at.IsZero() {
		t.Fatalf("AppliedAt of a fresh store = %v, %v; want the zero time", at, err)
	}
	before := time.Now().Add(-time.Millisecond)
	put(t, s, "a", "1")
	must(t, s.Commit(3))
	must(t, s.Close())
	s, err = store.Open(New(), dir, "counts", task)
	must(t, err)
	defer s.Close()
	at, err := s.AppliedAt()
	must(t, err)
	if at.Before(before) || at.After(time.Now()) {
		t.Fatalf("AppliedAt after a commit and reopen = %v, want between %v and now", at, before)
	}
	must(t, s.Wipe())
	if at, err := s.AppliedAt(); err != nil || !at.IsZero() {
		t.Fatalf("AppliedAt after Wipe = %v, %v; want the zero time", at, err)
	}
}

// A pebble store written before the check was kept holds an offset and no
// check: its last applied record is the one left to read back, as the
// restore did then; the rest of the position is read as it was written.
func TestPebblePositionWithoutCheck(t *testing.T) {
	dir := t.TempDir()
	b, err := New().Open(dir, "counts", task)
	must(t, err)
	pb := b.(*backend)
	must(t, pb.Apply([]state.Write{{Key: []byte("a"), Value: []byte("1")}}, state.Position{Offset: 9, Checked: 4, Unchecked: []int64{6, 9}}))
	if at, err := pb.Position(); err != nil || at.Offset != 9 || at.Checked != 4 || !slices.Equal(at.Unchecked, []int64{6, 9}) {
		t.Fatalf("Position = %+v, %v; want offset 9, checked 4, unchecked [6 9]", at, err)
	}
	must(t, pb.db.Delete(checkKey, pebbledb.NoSync)) // as an older version left it
	if at, err := pb.Position(); err != nil || at.Offset != 9 || at.Checked != 8 || !slices.Equal(at.Unchecked, []int64{9}) {
		t.Fatalf("Position without a check = %+v, %v; want offset 9, checked 8, unchecked [9]", at, err)
	}
	must(t, pb.db.Set(checkKey, []byte{1, 2, 3}, pebbledb.NoSync))
	if _, err := pb.Position(); err == nil {
		t.Fatal("a check of 3 bytes was read without an error")
	}
	must(t, b.Close())
}

// TestPebbleFlushInterval crashes a store that never filled a memtable:
// with a flush interval, or after a Flush (what the runtime calls when a
// restore ends), the crash image keeps what was written before the
// flush, so a restore reads only what came after it; without either, the
// crash loses every write and the restore starts over.
func TestPebbleFlushInterval(t *testing.T) {
	for _, c := range []struct {
		name  string
		every time.Duration
		flush bool
		want  int64
	}{
		{"no flush", 0, false, state.NoOffset},
		{"every 1ms", time.Millisecond, false, 1},
		{"Flush", 0, true, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			fs := vfs.NewCrashableMem()
			s, err := store.Open(&engine{fs: fs, flushEvery: c.every}, "/state", "counts", task)
			must(t, err)
			defer s.Close()
			put(t, s, "a", "1")
			must(t, s.Commit(0))
			time.Sleep(5 * time.Millisecond)
			put(t, s, "b", "2")
			must(t, s.Commit(1)) // past the interval: starts a flush of both
			if c.flush {
				must(t, s.Flush())
			}
			var off int64
			for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
				off = crashedOffset(t, fs)
				if off == c.want || time.Now().After(deadline) {
					break
				}
			}
			if off != c.want {
				t.Fatalf("the crash image holds offset %d, want %d", off, c.want)
			}
		})
	}
}

// crashedOffset opens a crash image of fs (unsynced writes dropped) and
// returns the offset its store holds.
func crashedOffset(t *testing.T, fs *vfs.MemFS) int64 {
	t.Helper()
	r, err := store.Open(&engine{fs: fs.CrashClone(vfs.CrashCloneCfg{})}, "/state", "counts", task)
	must(t, err)
	defer r.Close()
	return r.Offset()
}
