package conformance

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/eosflow/eosflow/config"
	"github.com/eosflow/eosflow/state"
	"github.com/eosflow/eosflow/state/pebble"
	"github.com/eosflow/eosflow/tools/kafkatest"
	"github.com/eosflow/eosflow/topology"
)

// smallVolume mounts a tmpfs of size (as mount's size= takes it) on a new
// directory and unmounts it when t ends; it skips t unless run as root.
func smallVolume(t *testing.T, size string) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("mounting a small tmpfs needs root: run as root to fill a state directory")
	}
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+size, "tmpfs", dir).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs on %s: %v: %s", dir, err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", "-l", dir).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v: %s", dir, err, out)
		}
	})
	return dir
}

// fillDisk writes a file in dir until a write fails, fails t unless it
// failed with ENOSPC and statfs then shows no space free, and returns the
// file's path.
func fillDisk(t *testing.T, dir string) string {
	t.Helper()
	path := filepath.Join(dir, "filler")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 64<<10)
	for {
		if _, err = f.Write(buf); err != nil {
			break
		}
	}
	if !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("filling %s stopped with %v, not ENOSPC: the disk is not full", dir, err)
	}
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		t.Fatal(err)
	}
	if free := st.Bavail * uint64(st.Bsize); free != 0 {
		t.Fatalf("statfs shows %d bytes free in %s after ENOSPC: the disk is not full", free, dir)
	}
	return path
}

// FullStateDirStopsAndRecovers fills the state directory's volume mid-run
// (a tmpfs; it skips unless run as root). Run stops with a
// *state.DiskFullError (ENOSPC) that names the directory, the store and
// the task, and says how to free space; it does not hang, and pebble does
// not end the process; a restart on the still-full disk stops at open.
// Once space is back, a restart restores what the stopped stores missed
// from the changelog, and every count is exact.
func FullStateDirStopsAndRecovers(t *testing.T, env *kafkatest.Env) {
	dir := smallVolume(t, "8m")
	in, out, app := env.Name("in"), env.Name("out"), env.Name("app")
	env.CreateTopics(t, 3, in, out)
	changelog := topology.ChangelogTopic(app, "counts")
	cfg := env.Config(app, "a", config.ExactlyOnce)
	cfg.MaxBatchRecords = 100
	cfg.StateDir = dir
	engine := pebble.New(pebble.MinFreeSpace(1<<20), pebble.MemTableSize(256<<10))
	const n = 3000
	SeedRange(t, env, in, 0, n/3)
	x := Start(t, cfg, CountTopology(in, out, engine))
	x.WaitCommitted(t, n/3, 60*time.Second)

	filler := fillDisk(t, dir)
	SeedRange(t, env, in, n/3, 2*n/3)
	err := x.Wait(t, 60*time.Second)
	t.Logf("Run returned: %v", err)
	var df *state.DiskFullError
	switch {
	case !errors.As(err, &df):
		t.Fatalf("Run returned %v, want a *state.DiskFullError", err)
	case !errors.As(err, new(*state.StoreError)):
		t.Fatalf("the error does not name the store and task in a *state.StoreError: %v", err)
	case !errors.Is(err, syscall.ENOSPC) || !errors.Is(err, state.ErrDiskFull):
		t.Fatalf("the error does not match ENOSPC and state.ErrDiskFull: %v", err)
	case !strings.HasPrefix(df.Dir, dir) || df.Need == 0:
		t.Fatalf("the error names directory %q needing %d bytes, want one under %s and a size", df.Dir, df.Need, dir)
	}
	for _, want := range []string{dir, `"counts"`, in + "/", "ENOSPC", "needs at least", "df -h", "free space or grow the volume"} {
		if !strings.Contains(err.Error(), want) {
			t.Fatalf("the error does not say %q: %v", want, err)
		}
	}
	stopped := x.R.Stats().RecordsIn
	if stopped <= n/3 {
		t.Fatalf("no batch committed after the disk filled (%d records in): the apply refused after a Kafka commit went untested", stopped)
	}

	// A restart while the disk is still full stops the same way, at open.
	early := Start(t, cfg, CountTopology(in, out, engine))
	if err := early.Wait(t, 60*time.Second); !errors.Is(err, state.ErrDiskFull) || !strings.Contains(err.Error(), "opening state store") {
		t.Fatalf("a restart on the full disk returned %v, want a state.ErrDiskFull at open", err)
	}

	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	SeedRange(t, env, in, 2*n/3, n)
	y := Start(t, cfg, CountTopology(in, out, engine))
	y.WaitCommitted(t, n-stopped, 60*time.Second)
	y.Stop()
	if err := y.Wait(t, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	t.Logf("first run %+v; after space returned %+v", x.R.Stats(), y.R.Stats())
	if y.R.Stats().Restored == 0 {
		t.Fatal("the restart restored nothing, yet the stores stopped behind their changelogs")
	}
	CheckCounts(t, env, out, changelog, n)
}
