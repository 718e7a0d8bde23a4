package deduptest

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/eosflow/eosflow/dedup"
)

// RunLeaser checks the promises of dedup.Leaser, which mark-before
// relies on: a claimed id is pending for its owner, never reported done,
// until Complete; another owner waits while the lease lives and takes it
// over once it expired; Release removes only its owner's pending mark; of
// concurrent claims exactly one wins. open opens a store for the running
// test, as Backend.Open does.
func RunLeaser(t *testing.T, open func(t *testing.T) dedup.Leaser) {
	t.Helper()
	t.Run("PendingUntilComplete", func(t *testing.T) { testPendingUntilComplete(t, open(t)) })
	t.Run("ExpiredLeaseIsTakenOver", func(t *testing.T) { testLeaseTakeover(t, open(t)) })
	t.Run("ReleaseByOwnerOnly", func(t *testing.T) { testRelease(t, open(t)) })
	t.Run("ConcurrentClaimsOneWins", func(t *testing.T) { testConcurrentClaims(t, open(t)) })
	t.Run("InvalidClaims", func(t *testing.T) { testInvalidClaims(t, open(t)) })
}

func claim(t *testing.T, s dedup.Leaser, id, owner string, lease time.Duration) dedup.Claim {
	t.Helper()
	c, err := s.Claim(t.Context(), id, owner, lease, time.Minute)
	if err != nil {
		t.Fatalf("Claim(%q, %q, %v): %v", id, owner, lease, err)
	}
	return c
}

func testPendingUntilComplete(t *testing.T, s dedup.Leaser) {
	id := ids(t, 1)[0]
	if c := claim(t, s, id, "a", time.Minute); c.State != dedup.Claimed {
		t.Fatalf("first Claim by a = %+v, want claimed", c)
	}
	if c := claim(t, s, id, "a", time.Minute); c.State != dedup.Claimed {
		t.Fatalf("a's second Claim of its own pending id = %+v, want claimed (renewed)", c)
	}
	c := claim(t, s, id, "b", time.Minute)
	if c.State != dedup.Pending || c.Owner != "a" || c.Left <= 0 || c.Left > time.Minute {
		t.Fatalf("Claim by b of a's pending id = %+v, want pending for a with up to 1m left", c)
	}
	if mark(t, s, id, time.Minute) {
		t.Fatal("Mark of a pending id = true, want false: it is remembered")
	}
	if !seen(t, s, id) {
		t.Fatal("Seen of a pending id = false")
	}
	if err := s.Complete(t.Context(), id, time.Minute); err != nil {
		t.Fatal(err)
	}
	for _, owner := range []string{"a", "b"} {
		if c := claim(t, s, id, owner, time.Minute); c.State != dedup.Done {
			t.Fatalf("Claim by %s after Complete = %+v, want done", owner, c)
		}
	}
	if err := s.Release(t.Context(), id, "a"); err != nil {
		t.Fatal(err)
	}
	if c := claim(t, s, id, "b", time.Minute); c.State != dedup.Done {
		t.Fatalf("Claim after the owner's Release of a done id = %+v, want done: Release removes pending marks only", c)
	}
}

// testLeaseTakeover claims with a short lease: another owner finds it
// pending (never done) until the lease expired, then takes it over.
func testLeaseTakeover(t *testing.T, s dedup.Leaser) {
	id := ids(t, 1)[0]
	const lease = 300 * time.Millisecond
	if c := claim(t, s, id, "a", lease); c.State != dedup.Claimed {
		t.Fatalf("first Claim = %+v, want claimed", c)
	}
	deadline := time.Now().Add(10 * time.Second)
	pending := 0
	for {
		c := claim(t, s, id, "b", time.Minute)
		if c.State == dedup.Claimed {
			break
		}
		if c.State != dedup.Pending || c.Owner != "a" {
			t.Fatalf("Claim by b while a's lease runs = %+v, want pending for a: a pending effect must never be skipped", c)
		}
		pending++
		if time.Now().After(deadline) {
			t.Fatalf("b still finds the id pending %v after a's %v lease", 10*time.Second, lease)
		}
		time.Sleep(min(c.Left, 50*time.Millisecond) + time.Millisecond)
	}
	if pending == 0 {
		t.Fatal("b claimed at once: a's lease was not held")
	}
	if err := s.Release(t.Context(), id, "a"); err != nil {
		t.Fatal(err)
	}
	if c := claim(t, s, id, "c", time.Minute); c.State != dedup.Pending || c.Owner != "b" {
		t.Fatalf("Claim by c after b took over and a released = %+v, want pending for b: a no longer owns it", c)
	}
}

func testRelease(t *testing.T, s dedup.Leaser) {
	id := ids(t, 1)[0]
	claim(t, s, id, "a", time.Minute)
	if err := s.Release(t.Context(), id, "b"); err != nil {
		t.Fatal(err)
	}
	if c := claim(t, s, id, "b", time.Minute); c.State != dedup.Pending {
		t.Fatalf("Claim after another owner's Release = %+v, want still pending for a", c)
	}
	if err := s.Release(t.Context(), id, "a"); err != nil {
		t.Fatal(err)
	}
	if c := claim(t, s, id, "b", time.Minute); c.State != dedup.Claimed {
		t.Fatalf("Claim after the owner's Release = %+v, want claimed: a failed effect runs again", c)
	}
}

func testConcurrentClaims(t *testing.T, s dedup.Leaser) {
	const goroutines, idCount = 16, 10
	for _, id := range ids(t, idCount) {
		var wg sync.WaitGroup
		states := make([]dedup.Claim, goroutines)
		errs := make([]error, goroutines)
		for g := range goroutines {
			wg.Go(func() {
				states[g], errs[g] = s.Claim(t.Context(), id, fmt.Sprint("owner-", g), time.Minute, time.Minute)
			})
		}
		wg.Wait()
		won := 0
		for g := range goroutines {
			if errs[g] != nil {
				t.Fatal(errs[g])
			}
			switch states[g].State {
			case dedup.Claimed:
				won++
			case dedup.Pending:
			default:
				t.Fatalf("concurrent Claim = %+v, want claimed or pending", states[g])
			}
		}
		if won != 1 {
			t.Fatalf("%d of %d concurrent claims of %q won, want exactly 1", won, goroutines, id)
		}
	}
}

func testInvalidClaims(t *testing.T, s dedup.Leaser) {
	for _, c := range []struct {
		id, owner string
		lease     time.Duration
	}{{"", "a", time.Minute}, {"x", "", time.Minute}, {"x", "a", 0}} {
		if _, err := s.Claim(t.Context(), c.id, c.owner, c.lease, time.Minute); !errors.Is(err, dedup.ErrInvalid) {
			t.Errorf("Claim(%q, %q, %v) = %v, want ErrInvalid", c.id, c.owner, c.lease, err)
		}
	}
}
