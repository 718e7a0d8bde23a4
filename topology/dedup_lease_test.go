package topology_test

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/eosflow/eosflow/codec"
	"github.com/eosflow/eosflow/dedup"
	"github.com/eosflow/eosflow/topology"
)

// An effect that runs past its lease keeps its mark while it runs, in
// either mode: the lease is renewed, so another instance finds the mark
// pending all along and never takes it over to run the effect a second
// time beside this one. Once the effect returned, the mark is done.
func TestDedupRenewsTheLeaseWhileTheEffectRuns(t *testing.T) {
	for _, m := range leaseModes {
		t.Run(m.name, func(t *testing.T) { renewsTheLease(t, m.opt) })
	}
}

func renewsTheLease(t *testing.T, mode topology.DedupOption) {
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
	top := topology.New()
	in := topology.Source(top, "in", codec.String())
	once := topology.Dedup(in, "once", byValue, store, effect, mode, topology.DedupLease(leaseFor),
		topology.FailOpen(func(_ context.Context, _ string, err error) { lost = append(lost, err) }))
	topology.To(once, "out", codec.String())
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
// the whole lease) says so to onErr, in either mode: the effect may run
// twice.
func TestDedupReportsALostLease(t *testing.T) {
	for _, m := range leaseModes {
		t.Run(m.name, func(t *testing.T) { reportsALostLease(t, m.opt) })
	}
}

func reportsALostLease(t *testing.T, mode topology.DedupOption) {
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
	top := topology.New()
	in := topology.Source(top, "in", codec.String())
	once := topology.Dedup(in, "once", byValue, store, effect, mode, topology.DedupLease(leaseFor),
		topology.FailOpen(func(_ context.Context, _ string, err error) { mu.Lock(); lost = append(lost, err); mu.Unlock() }))
	topology.To(once, "out", codec.String())
	r := newRig(t, top)
	r.must("in", 0, "", "a")
	mu.Lock()
	defer mu.Unlock()
	if len(lost) != 1 || !strings.Contains(lost[0].Error(), "lease") || !strings.Contains(lost[0].Error(), "other-instance") {
		t.Fatalf("onErr heard %v; want one lost lease naming the other owner", lost)
	}
}

// claims counts f's calls of Claim.
func claims(f *flakyStore) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, c := range f.calls {
		if c == "claim" {
			n++
		}
	}
	return n
}

// setDown makes the next n calls of f fail (-1: all of them).
func setDown(f *flakyStore, n int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.down = n
}

// leaseModes are both modes, which with a store that holds leases both
// claim ids under a lease.
var leaseModes = []struct {
	name string
	opt  topology.DedupOption
}{{"MarkBefore", topology.MarkBefore()}, {"MarkAfter", topology.MarkAfter()}}

// A store call that fails, failing open, runs the effect unmarked; once it
// succeeded the id is marked (completed, whoever holds it), so its
// redelivery does not run it again.
func TestDedupFailingOpenCompletesTheEffect(t *testing.T) {
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			store := newFlaky(t)
			setDown(store, 1)
			fx := &effects{}
			r := newRig(t, dedupTop(m.store(store), fx, m.opt, topology.FailOpen(func(context.Context, string, error) {})))
			r.must("in", 0, "", "a")
			r.must("in", 0, "", "a")
			if want := []string{"a"}; !slices.Equal(fx.ran, want) {
				t.Fatalf("effects ran for %v, want %v (store calls %v)", fx.ran, want, store.calls)
			}
		})
	}
}

// Two engines of one topology (two workers of a process) claim as owners
// of their own: an id one is running is pending for the other, which
// waits for it and skips it once done, instead of taking the claim for
// its own and running the effect beside it.
func TestDedupEnginesOfOneTopologyClaimApart(t *testing.T) {
	for _, m := range leaseModes {
		t.Run(m.name, func(t *testing.T) {
			store := newFlaky(t)
			started, release := make(chan struct{}), make(chan struct{})
			var mu sync.Mutex
			var running, most, runs int
			effect := func(context.Context, topology.Record[string]) error {
				mu.Lock()
				running++
				runs++
				most = max(most, running)
				first := runs == 1
				mu.Unlock()
				if first {
					close(started)
					<-release
				}
				mu.Lock()
				running--
				mu.Unlock()
				return nil
			}
			top := topology.New()
			in := topology.Source(top, "in", codec.String())
			topology.To(topology.Dedup(in, "once", byValue, store, effect, m.opt), "out", codec.String())
			a, b := newRig(t, top), newRig(t, top)
			var wg sync.WaitGroup
			wg.Add(2)
			go func() { defer wg.Done(); a.must("in", 0, "", "x") }()
			select {
			case <-started:
			case <-time.After(10 * time.Second):
				t.Fatal("the first engine's effect never started")
			}
			go func() { defer wg.Done(); b.must("in", 0, "", "x") }()
			// b finds x pending, and waits: its claims go on.
			for deadline := time.Now().Add(10 * time.Second); claims(store) < 3; time.Sleep(10 * time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatalf("the second engine never claimed x again (store calls %v)", store.calls)
				}
			}
			close(release)
			wg.Wait()
			if runs != 1 || most != 1 {
				t.Fatalf("the effect ran %d times, %d at once; want once", runs, most)
			}
		})
	}
}
