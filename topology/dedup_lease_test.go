package topology_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/eosflow/eosflow/codec"
	"github.com/eosflow/eosflow/dedup"
	"github.com/eosflow/eosflow/topology"
)

// An effect that runs past its lease keeps its mark while it runs: the
// lease is renewed, so another instance finds the mark pending all along
// and never takes it over to run the effect a second time beside this one.
// Once the effect returned, the mark is done.
func TestDedupMarkBeforeRenewsTheLeaseWhileTheEffectRuns(t *testing.T) {
	const leaseFor = 600 * time.Millisecond
	store := newFlaky(t)
	ctx := context.Background()
	var takenOver []string
	var mu sync.Mutex
	effect := func(context.Context, topology.Record[string]) error {
		deadline := time.Now().Add(4 * leaseFor)
		for time.Now().Before(deadline) {
			c, err := store.Memory.Claim(ctx, "a", "other-instance", leaseFor, time.Minute)
			if err != nil || c.State != dedup.Pending {
				mu.Lock()
				takenOver = append(takenOver, c.State.String())
				mu.Unlock()
				return nil
			}
			time.Sleep(leaseFor / 4)
		}
		return nil
	}
	var lost []error
	top := topology.New("dedup")
	in := topology.Source(top, "in", "in", codec.String())
	once := topology.Dedup(in, "once", byValue, store, effect, topology.MarkBefore(), topology.DedupLease(leaseFor),
		topology.FailOpen(func(_ context.Context, _ string, err error) { lost = append(lost, err) }))
	topology.To(once, "out", "out", codec.String())
	r := newRig(t, top)
	r.must("in", 0, "", "a")
	if len(takenOver) != 0 {
		t.Fatalf("another instance claimed the mark while the effect ran (found %v): the lease was not renewed", takenOver)
	}
	if len(lost) != 0 {
		t.Fatalf("a renewal reported the lease lost: %v", lost)
	}
	if c, err := store.Memory.Claim(ctx, "a", "other-instance", leaseFor, time.Minute); err != nil || c.State != dedup.Done {
		t.Fatalf("after the effect the mark is %+v (%v), want done", c, err)
	}
}

// A renewal that finds the mark taken over (this instance was paused past
// the whole lease) says so to onErr: the effect may run twice.
func TestDedupMarkBeforeReportsALostLease(t *testing.T) {
	const leaseFor = 600 * time.Millisecond
	store := newFlaky(t)
	ctx := context.Background()
	effect := func(context.Context, topology.Record[string]) error {
		// The pause: the store answers no renewal until the lease
		// expired and the other instance took the mark over.
		setDown(store, -1)
		time.Sleep(2 * leaseFor)
		if c, err := store.Memory.Claim(ctx, "a", "other-instance", time.Minute, time.Minute); err != nil || c.State != dedup.Claimed {
			t.Errorf("the other instance's claim: %+v, %v", c, err)
		}
		setDown(store, 0)
		time.Sleep(2 * leaseFor)
		return nil
	}
	var mu sync.Mutex
	var lost []error
	top := topology.New("dedup")
	in := topology.Source(top, "in", "in", codec.String())
	once := topology.Dedup(in, "once", byValue, store, effect, topology.MarkBefore(), topology.DedupLease(leaseFor),
		topology.FailOpen(func(_ context.Context, _ string, err error) { mu.Lock(); lost = append(lost, err); mu.Unlock() }))
	topology.To(once, "out", "out", codec.String())
	r := newRig(t, top)
	r.must("in", 0, "", "a")
	mu.Lock()
	defer mu.Unlock()
	if len(lost) != 1 || !strings.Contains(lost[0].Error(), "lease") || !strings.Contains(lost[0].Error(), "other-instance") {
		t.Fatalf("onErr heard %v; want one lost lease naming the other owner", lost)
	}
}

// setDown makes the next n calls of f fail (-1: all of them).
func setDown(f *flakyStore, n int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.down = n
}
