package dedup_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/eosflow/eosflow/dedup"
)

// fakeClock is a time source that moves only when told.
type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time      { return c.t }
func (c *fakeClock) add(d time.Duration) { c.t = c.t.Add(d) }
func newClock() *fakeClock               { return &fakeClock{t: time.Unix(1_700_000_000, 0)} }
func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

func TestMemoryFullEvictsSoonestExpiring(t *testing.T) {
	ctx := context.Background()
	clk := newClock()
	m := must(dedup.NewMemory(dedup.MaxEntries(3), dedup.Clock(clk.now)))
	for id, ttl := range map[string]time.Duration{"a": 3 * time.Minute, "b": time.Minute, "c": 2 * time.Minute} {
		if !must(m.Mark(ctx, id, ttl)) {
			t.Fatalf("Mark(%q) = false on an empty store", id)
		}
	}
	if !must(m.Mark(ctx, "d", time.Hour)) {
		t.Fatal(`Mark("d") on a full store = false`)
	}
	if got := m.Evictions(); got != 1 {
		t.Fatalf("Evictions = %d, want 1", got)
	}
	if must(m.Seen(ctx, "b")) {
		t.Error(`"b", the id expiring soonest, is still there; want it evicted`)
	}
	for _, id := range []string{"a", "c", "d"} {
		if !must(m.Seen(ctx, id)) {
			t.Errorf("%q was evicted; only the soonest-expiring id should be", id)
		}
	}
	if m.Len() != 3 {
		t.Errorf("Len = %d, want 3 (MaxEntries)", m.Len())
	}
}

func TestMemoryExpiredIdsDoNotCountAgainstMaxEntries(t *testing.T) {
	ctx := context.Background()
	clk := newClock()
	m := must(dedup.NewMemory(dedup.MaxEntries(2), dedup.Clock(clk.now)))
	must(m.Mark(ctx, "a", time.Second))
	must(m.Mark(ctx, "b", time.Second))
	clk.add(time.Second) // both expire now: expiry is exclusive
	if must(m.Seen(ctx, "a")) {
		t.Fatal(`Seen("a") at its expiry = true`)
	}
	must(m.Mark(ctx, "c", time.Minute))
	must(m.Mark(ctx, "d", time.Minute))
	if got := m.Evictions(); got != 0 {
		t.Errorf("Evictions = %d, want 0: the expired ids should have made room", got)
	}
	if m.Len() != 2 {
		t.Errorf("Len = %d, want 2", m.Len())
	}
}

func TestMemoryTTLRoundsUpToMilliseconds(t *testing.T) {
	ctx := context.Background()
	clk := newClock()
	m := must(dedup.NewMemory(dedup.Clock(clk.now)))
	must(m.Mark(ctx, "a", 1500*time.Microsecond))
	clk.add(1999 * time.Microsecond)
	if !must(m.Seen(ctx, "a")) {
		t.Fatal("a 1.5ms ttl expired before 2ms; want it rounded up, never down")
	}
	clk.add(time.Microsecond)
	if must(m.Seen(ctx, "a")) {
		t.Fatal("a 1.5ms ttl still lives at 2ms")
	}
}

func TestNewMemoryRejectsBadOptions(t *testing.T) {
	for _, opts := range [][]dedup.MemoryOption{{dedup.MaxEntries(0)}, {dedup.MaxEntries(-1)}, {dedup.Clock(nil)}} {
		if _, err := dedup.NewMemory(opts...); !errors.Is(err, dedup.ErrInvalid) {
			t.Errorf("NewMemory(%v): err = %v, want ErrInvalid", opts, err)
		}
	}
}

// Mark before the effect: a duplicate delivery finds the id marked and skips
// the effect. If the effect fails, Forget lets the retry run it; a crash
// between Mark and the effect would lose it, which is what this mode risks.
func ExampleMemory() {
	ctx := context.Background()
	store, err := dedup.NewMemory(dedup.MaxEntries(100_000))
	if err != nil {
		panic(err)
	}
	charge := func(id string) error { fmt.Println("charged", id); return nil }
	for _, id := range []string{"order-1", "order-2", "order-1"} { // order-1 is delivered twice
		first, err := store.Mark(ctx, id, 8*time.Hour) // twice a 4h redelivery window
		if err != nil {
			panic(err) // fail closed; fail open would charge anyway
		}
		if !first {
			fmt.Println("skipped", id)
			continue
		}
		if err := charge(id); err != nil {
			_ = store.Forget(ctx, id) // let the redelivery try again
		}
	}
	// Output:
	// charged order-1
	// charged order-2
	// skipped order-1
}
