package pebble

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/eosflow/eosflow/internal/store"

	"github.com/eosflow/eosflow/state"
)

// commitAt makes store name of task under dir hold one key applied at
// offset (state.NoOffset: opened, never written), and closes it.
func commitAt(t *testing.T, dir, name string, task state.Task, offset int64) {
	t.Helper()
	s, err := store.Open(New(), dir, name, task)
	must(t, err)
	if offset != state.NoOffset {
		put(t, s, "k", "v")
		must(t, s.Commit(offset))
	}
	must(t, s.Close())
}

func TestInspect(t *testing.T) {
	dir := t.TempDir()
	commitAt(t, dir, "counts", state.Task{Topic: "orders", Partition: 1}, 41)
	commitAt(t, dir, "counts", state.Task{Topic: "orders", Partition: 0}, 7)
	commitAt(t, dir, "sessions", state.Task{Topic: "orders", Partition: 0}, state.NoOffset)
	commitAt(t, dir, "totals", state.Task{Topic: "eu-orders-v2", Partition: 12}, 3)
	// Neither a task directory nor a store: skipped.
	must(t, os.MkdirAll(filepath.Join(dir, "orders-0", "not-pebble"), 0o755))
	must(t, os.MkdirAll(filepath.Join(dir, "lost+found"), 0o755))
	must(t, os.WriteFile(filepath.Join(dir, "orders-x"), nil, 0o644))

	open, err := store.Open(New(), dir, "held", state.Task{Topic: "orders", Partition: 2})
	must(t, err)
	defer open.Close()

	got, err := Inspect(dir)
	must(t, err)
	want := []struct {
		name   string
		task   state.Task
		offset int64
		inUse  bool
	}{
		{"totals", state.Task{Topic: "eu-orders-v2", Partition: 12}, 3, false},
		{"counts", state.Task{Topic: "orders", Partition: 0}, 7, false},
		{"sessions", state.Task{Topic: "orders", Partition: 0}, state.NoOffset, false},
		{"counts", state.Task{Topic: "orders", Partition: 1}, 41, false},
		{"held", state.Task{Topic: "orders", Partition: 2}, state.NoOffset, true},
	}
	if len(got) != len(want) {
		t.Fatalf("Inspect found %d stores, want %d: %+v", len(got), len(want), got)
	}
	for i, w := range want {
		g := got[i]
		if g.Name != w.name || g.Task != w.task || g.Offset != w.offset || errors.Is(g.Err, state.ErrInUse) != w.inUse ||
			(!w.inUse && g.Err != nil) || g.Dir != filepath.Join(dir, fmt.Sprintf("%s-%d", w.task.Topic, w.task.Partition), w.name) {
			t.Errorf("store %d: got %+v, want %+v", i, g, w)
		}
	}
	// Inspecting did not take the store away from its user.
	put(t, open, "k", "v")
	must(t, open.Commit(0))
}

func TestInspectMissingDir(t *testing.T) {
	got, err := Inspect(filepath.Join(t.TempDir(), "nope"))
	if err != nil || len(got) != 0 {
		t.Fatalf("Inspect of a missing dir = %+v, %v; want nothing", got, err)
	}
}

// A store another process holds is reported as in use, not as a failure:
// the lock is taken with fcntl, whose error differs from the in-process
// one.
func TestInspectStoreHeldByAnotherProcess(t *testing.T) {
	if dir := os.Getenv("STATE_TEST_HOLD_DIR"); dir != "" {
		s, err := store.Open(New(), dir, "counts", task)
		must(t, err)
		os.Stdout.WriteString("held\n")
		_, _ = bufio.NewReader(os.Stdin).ReadString('\n') // until the parent closes stdin
		must(t, s.Close())
		return
	}
	dir := t.TempDir()
	commitAt(t, dir, "counts", task, 5)
	cmd := exec.Command(os.Args[0], "-test.run=^TestInspectStoreHeldByAnotherProcess$")
	cmd.Env = append(os.Environ(), "STATE_TEST_HOLD_DIR="+dir)
	stdin, err := cmd.StdinPipe()
	must(t, err)
	stdout, err := cmd.StdoutPipe()
	must(t, err)
	must(t, cmd.Start())
	defer func() { stdin.Close(); _ = cmd.Wait() }()
	if line, err := bufio.NewReader(stdout).ReadString('\n'); err != nil || line != "held\n" {
		t.Fatalf("helper process: %q, %v", line, err)
	}
	got, err := Inspect(dir)
	must(t, err)
	if len(got) != 1 || !errors.Is(got[0].Err, state.ErrInUse) {
		t.Fatalf("Inspect = %+v, want the store reported in use", got)
	}
	stdin.Close()
	must(t, cmd.Wait())
	got, err = Inspect(dir)
	must(t, err)
	if len(got) != 1 || got[0].Err != nil || got[0].Offset != 5 {
		t.Fatalf("after the holder stopped: %+v, want offset 5", got)
	}
}
