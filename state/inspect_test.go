package state

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"
)

// fileEngine is a Persistent whose store is a directory holding a file
// "offset" with the applied offset, or "busy" while a holder has it.
type fileEngine struct{ Engine }

func (fileEngine) AppliedOffset(path string) (int64, bool, error) {
	if _, err := os.Stat(filepath.Join(path, "busy")); err == nil {
		return NoOffset, true, fmt.Errorf("%w: %s", ErrInUse, path)
	}
	b, err := os.ReadFile(filepath.Join(path, "offset"))
	if errors.Is(err, os.ErrNotExist) {
		return NoOffset, false, nil
	}
	if err != nil {
		return NoOffset, true, err
	}
	off, err := strconv.ParseInt(string(b), 10, 64)
	return off, true, err
}

func TestInspectWalksStoreDirs(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, task Task, file, content string) {
		t.Helper()
		path := StoreDir(dir, name, task)
		must(t, os.MkdirAll(path, 0o755))
		must(t, os.WriteFile(filepath.Join(path, file), []byte(content), 0o644))
	}
	write("totals", Task{Topic: "eu-orders-v2", Partition: 12}, "offset", "3")
	write("counts", Task{Topic: "orders", Partition: 1}, "offset", "41")
	write("counts", Task{Topic: "orders", Partition: 0}, "offset", "7")
	write("held", Task{Topic: "orders", Partition: 0}, "busy", "")
	write("other", Task{Topic: "orders", Partition: 0}, "README", "not a store of the engine")
	must(t, os.MkdirAll(filepath.Join(dir, "lost+found", "x"), 0o755))      // not a task directory
	must(t, os.MkdirAll(filepath.Join(dir, "orders-0", "bad name"), 0o755)) // not a store name

	got, err := Inspect(fileEngine{}, dir)
	must(t, err)
	want := []StoreInfo{
		{Name: "totals", Task: Task{Topic: "eu-orders-v2", Partition: 12}, Offset: 3},
		{Name: "counts", Task: Task{Topic: "orders", Partition: 0}, Offset: 7},
		{Name: "held", Task: Task{Topic: "orders", Partition: 0}, Offset: NoOffset},
		{Name: "counts", Task: Task{Topic: "orders", Partition: 1}, Offset: 41},
	}
	if len(got) != len(want) {
		t.Fatalf("Inspect found %+v, want %d stores", got, len(want))
	}
	for i, w := range want {
		g := got[i]
		if g.Name != w.Name || g.Task != w.Task || g.Offset != w.Offset || g.Dir != StoreDir(dir, w.Name, w.Task) ||
			errors.Is(g.Err, ErrInUse) != (w.Name == "held") || (w.Name != "held" && g.Err != nil) {
			t.Errorf("store %d: got %+v, want %+v", i, g, w)
		}
	}
	if got, err := Inspect(fileEngine{}, filepath.Join(dir, "nope")); err != nil || len(got) != 0 {
		t.Fatalf("Inspect of a missing dir = %+v, %v; want nothing", got, err)
	}
}
