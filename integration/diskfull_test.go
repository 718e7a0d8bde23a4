package integration

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
	"github.com/eosflow/eosflow/tools/conformance"
	"github.com/eosflow/eosflow/topology"
)

// The state directory fills up mid-run against Apache Kafka: Run stops
// with a *state.DiskFullError (ENOSPC) naming the directory, and once the
// space is back a restart restores from the changelogs and every count is
// exact. Needs root (it mounts a 8 MiB tmpfs) and a broker.
func TestFullStateDirStopsRunAndRestartRecovers(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mounting a small tmpfs needs root: run as root to fill a state directory")
	}
	env := realEnv(t)
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=8m", "tmpfs", dir).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs on %s: %v: %s", dir, err, out)
	}
	t.Cleanup(func() { _ = exec.Command("umount", "-l", dir).Run() })
	in, out, app := env.Name("in"), env.Name("out"), env.Name("app")
	env.CreateTopics(t, 3, in, out)
	cfg := env.Config(app, "a", config.ExactlyOnce)
	cfg.MaxBatchRecords = 100
	cfg.StateDir = dir
	engine := pebble.New(pebble.MinFreeSpace(1<<20), pebble.MemTableSize(256<<10))
	const n = 3000
	conformance.SeedRange(t, env, in, 0, n/3)
	x := conformance.Start(t, cfg, conformance.CountTopology(in, out, engine))
	x.WaitCommitted(t, n/3, 60*time.Second)

	filler := fill(t, dir)
	conformance.SeedRange(t, env, in, n/3, 2*n/3)
	err := x.Wait(t, 60*time.Second)
	t.Logf("Run returned: %v", err)
	if !errors.As(err, new(*state.DiskFullError)) || !errors.Is(err, syscall.ENOSPC) || !strings.Contains(err.Error(), dir) {
		t.Fatalf("Run returned %v, want a *state.DiskFullError (ENOSPC) naming %s", err, dir)
	}
	stopped := x.R.Stats().RecordsIn
	if stopped <= n/3 {
		t.Fatalf("no batch committed after the disk filled (%d records in): the apply refused after a commit went untested", stopped)
	}
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	conformance.SeedRange(t, env, in, 2*n/3, n)
	y := conformance.Start(t, cfg, conformance.CountTopology(in, out, engine))
	y.WaitCommitted(t, n-stopped, 60*time.Second)
	y.Stop()
	if err := y.Wait(t, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	if y.R.Stats().Restored == 0 {
		t.Fatal("the restart restored nothing, yet the stores stopped behind their changelogs")
	}
	conformance.CheckCounts(t, env, out, topology.ChangelogTopic(app, "counts"), n)
}

// fill writes a file in dir until a write fails, and fails t unless it
// failed with ENOSPC and statfs then shows no space free.
func fill(t *testing.T, dir string) string {
	t.Helper()
	path := filepath.Join(dir, "filler")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 64<<10)
	for err == nil {
		_, err = f.Write(buf)
	}
	var st syscall.Statfs_t
	if serr := syscall.Statfs(dir, &st); !errors.Is(err, syscall.ENOSPC) || serr != nil || st.Bavail != 0 {
		t.Fatalf("filling %s stopped with %v; statfs %v, %d blocks free: the disk is not full", dir, err, serr, st.Bavail)
	}
	return path
}
