package eos_test

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/eosflow/eosflow/config"
	"github.com/eosflow/eosflow/state"
	"github.com/eosflow/eosflow/state/pebble"
	"github.com/eosflow/eosflow/tools/conformance"
)

// A pebble store that restored its changelog and then crashed (the crash
// image keeps only what was flushed) restores only what came after the
// restore: the restore's end flushed it. The timed flush is off, so that
// only the restore's flush can keep the restored records.
func TestCrashAfterARestoreReadsOnlyTheTail(t *testing.T) {
	t.Parallel()
	const n = 600
	env, changelog, restored := countedHalf(t, n)

	fs := vfs.NewCrashableMem()
	dir := t.TempDir()
	engine := func(fs vfs.FS) state.Engine { return pebble.New(pebble.FS(fs), pebble.FlushInterval(0)) }
	cfg := env.Config("app", "b", config.ExactlyOnce)
	cfg.MaxBatchRecords, cfg.StateDir = 100, dir
	x := conformance.Start(t, cfg, conformance.CountTopology("in", "out", engine(fs)))
	conformance.SeedRange(t, env, "in", n/2, n)
	x.WaitCommitted(t, n/2, 60*time.Second)
	if got := x.R.Stats().Restored; got != restored {
		t.Fatalf("the fresh store restored %d records, want the changelog's %d", got, restored)
	}
	crashed := crashImage(t, fs, dir, int64(restored)-1)
	x.Stop()
	if err := x.Wait(t, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	tail := uint64(len(conformance.Drain(t, env, changelog, 1))) - restored

	y := conformance.Start(t, cfg, conformance.CountTopology("in", "out", engine(crashed)))
	y.WaitCommitted(t, 0, 60*time.Second)
	conformance.SeedRange(t, env, "in", n, n+10)
	y.WaitCommitted(t, 10, 60*time.Second)
	t.Logf("restored %d records fresh, %d after the crash (%d written since)", restored, y.R.Stats().Restored, tail)
	if got := y.R.Stats().Restored; got > tail {
		t.Fatalf("after the crash the store restored %d records, want at most the %d written after its restore", got, tail)
	}
	y.Stop()
	if err := y.Wait(t, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	conformance.CheckCounts(t, env, "out", changelog, n+10)
}

// crashImage waits, up to 10 s, for a crash image of fs (unsynced writes
// dropped) whose store holds at least changelog offset want, and returns it.
func crashImage(t *testing.T, fs *vfs.MemFS, dir string, want int64) *vfs.MemFS {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		img := fs.CrashClone(vfs.CrashCloneCfg{})
		b, err := pebble.New(pebble.FS(img)).Open(filepath.Join(dir, "app", "b"), "counts", state.Task{Topic: "in", Partition: 0})
		if err != nil {
			t.Fatal(err)
		}
		at, err := b.Position()
		_ = b.Close()
		if err != nil {
			t.Fatal(err)
		}
		if at.Offset >= want {
			return fs.CrashClone(vfs.CrashCloneCfg{})
		}
		if time.Now().After(deadline) {
			t.Fatalf("no crash image holds the restore: its store is at offset %d, want %d", at.Offset, want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
