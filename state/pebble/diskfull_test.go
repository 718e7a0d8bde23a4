package pebble

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/cockroachdb/pebble/v2/vfs/errorfs"
	"github.com/eosflow/eosflow/state"
)

// within runs fn and fails t if it does not return within d: a full disk
// must never leave a store's call hanging.
func within(t *testing.T, d time.Duration, what string, fn func() error) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- fn() }()
	select {
	case err := <-done:
		return err
	case <-time.After(d):
		t.Fatalf("%s did not return within %s on a full disk", what, d)
		return nil
	}
}

// applyN applies batch i: key k<i%500> set to i, at changelog offset i.
func applyN(b state.Backend, i int64) error {
	v := binary.BigEndian.AppendUint64(nil, uint64(i))
	v = append(v, make([]byte, 1000)...)
	w := []state.Write{{Key: fmt.Appendf(nil, "k%03d", i%500), Value: v}}
	return b.Apply(w, state.Position{Offset: i, Checked: i})
}

// checkConsistent fails t unless b holds exactly what batches 0..offset
// wrote: data and offset from the same point, none torn.
func checkConsistent(t *testing.T, b state.Backend) int64 {
	t.Helper()
	at, err := b.Position()
	must(t, err)
	want := map[string]int64{}
	for i := int64(0); i <= at.Offset; i++ {
		want[fmt.Sprintf("k%03d", i%500)] = i
	}
	got := 0
	must(t, b.Range(nil, nil, func(k, v []byte) bool {
		got++
		if i := int64(binary.BigEndian.Uint64(v)); want[string(k)] != i {
			t.Errorf("key %s holds batch %d, want %d at offset %d", k, i, want[string(k)], at.Offset)
		}
		return true
	}))
	if got != len(want) {
		t.Fatalf("%d keys at offset %d, want %d", got, at.Offset, len(want))
	}
	return at.Offset
}

// Below the free-space margin a store refuses to open and to write, with
// a *state.DiskFullError naming the directory and the space it needs, and
// applies nothing; once space is back it writes again.
func TestFullDiskRefusesWrites(t *testing.T) {
	fs := vfs.NewMem()
	e := &engine{fs: fs, minFree: 1 << 20}
	fs.TestingSetDiskUsage(vfs.DiskUsage{AvailBytes: 1 << 10, TotalBytes: 4 << 20, UsedBytes: 4<<20 - 1<<10})
	_, err := e.Open("/state", "counts", task)
	var df *state.DiskFullError
	if !errors.As(err, &df) || !errors.Is(err, syscall.ENOSPC) || df.Free != 1<<10 || df.Need < 1<<20 {
		t.Fatalf("opening on a full disk: %v (%+v), want a *state.DiskFullError with 1 KiB free and at least 1 MiB needed", err, df)
	}
	fs.TestingSetDiskUsage(vfs.DiskUsage{AvailBytes: 64 << 20, TotalBytes: 128 << 20, UsedBytes: 64 << 20})
	b, err := e.Open("/state", "counts", task)
	must(t, err)
	for i := int64(0); i < 10; i++ {
		must(t, applyN(b, i))
	}
	fs.TestingSetDiskUsage(vfs.DiskUsage{AvailBytes: 1 << 10, TotalBytes: 128 << 20, UsedBytes: 128<<20 - 1<<10})
	err = applyN(b, 10)
	if !errors.As(err, &df) || !strings.Contains(err.Error(), "/state/counts") && !strings.Contains(err.Error(), df.Dir) {
		t.Fatalf("writing on a full disk: %v, want a *state.DiskFullError", err)
	}
	for _, want := range []string{df.Dir, "ENOSPC", "1.0 KiB free", "needs at least", "df -h " + df.Dir} {
		if !strings.Contains(err.Error(), want) {
			t.Fatalf("the error does not say %q: %v", want, err)
		}
	}
	if off := checkConsistent(t, b); off != 9 {
		t.Fatalf("offset %d after a refused write, want 9", off)
	}
	fs.TestingSetDiskUsage(vfs.DiskUsage{AvailBytes: 64 << 20, TotalBytes: 128 << 20, UsedBytes: 64 << 20})
	must(t, applyN(b, 10))
	must(t, b.Close())
}

// pebble writes to disk in the background: a flush that fails with
// ENOSPC is retried without end, and pebble's Flush waits for it. The
// store notes the failure, refuses writes (before pebble stalls them),
// and closes without flushing; what it holds after a reopen is whole, at
// an offset the changelog continues from. When space returns while it is
// open, a flush succeeds and writes go on.
func TestENOSPCInFlushStopsWritesAndCloseReturns(t *testing.T) {
	var full atomic.Bool
	inj := &errorfs.Counter{Injector: errorfs.InjectorFunc(func(op errorfs.Op) error {
		if full.Load() && strings.HasSuffix(op.Path, ".sst") && op.Kind.ReadOrWrite() == errorfs.OpIsWrite {
			return syscall.ENOSPC
		}
		return nil
	})}
	e := &engine{fs: errorfs.Wrap(vfs.NewMem(), inj), memTableSize: 256 << 10}
	b, err := e.Open("/state", "counts", task)
	must(t, err)
	i := int64(0)
	for ; i < 300; i++ { // more than a memtable: some of it flushed
		must(t, applyN(b, i))
	}
	full.Store(true)
	for ; ; i++ {
		err = within(t, 10*time.Second, "Apply", func() error { return applyN(b, i) })
		if err != nil || i > 5000 {
			break
		}
	}
	var df *state.DiskFullError
	if !errors.As(err, &df) || !errors.Is(err, syscall.ENOSPC) || df.Err == nil {
		t.Fatalf("after %d batches on a full disk: %v, want a *state.DiskFullError from pebble's ENOSPC", i, err)
	}
	if inj.Load() == 0 {
		t.Fatal("no write failed with ENOSPC: the test proves nothing")
	}
	t.Logf("batch %d refused after %d ENOSPC writes: %v", i, inj.Load(), err)

	full.Store(false)
	deadline := time.Now().Add(10 * time.Second)
	for applyN(b, i) != nil {
		if time.Now().After(deadline) {
			t.Fatal("writes still refused 10s after space returned")
		}
		time.Sleep(10 * time.Millisecond)
	}
	for i++; i < 2000; i++ {
		must(t, applyN(b, i))
	}
	full.Store(true)
	for ; ; i++ {
		if err = applyN(b, i); err != nil || i > 8000 {
			break
		}
	}
	if !errors.Is(err, state.ErrDiskFull) {
		t.Fatalf("the disk filled again, yet Apply returned %v", err)
	}
	_ = within(t, 10*time.Second, "Close", b.Close)
	full.Store(false)
	b, err = e.Open("/state", "counts", task)
	must(t, err)
	defer b.Close()
	if off := checkConsistent(t, b); off < 0 || off >= i {
		t.Fatalf("reopened at offset %d, want one below the refused batch %d", off, i)
	}
}
