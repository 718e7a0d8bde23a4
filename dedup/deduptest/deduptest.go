// Package deduptest is the conformance suite of dedup.Store and
// dedup.Leaser: the promises topology.Dedup relies on, which a store of
// your own can prove as the stores of dedup, redisdedup and pgdedup do,
// from a test:
//
//	func TestConformance(t *testing.T) {
//		deduptest.Run(t, deduptest.Backend{Open: func(t *testing.T) dedup.Store { return newMyStore(t) }})
//	}
//
// A store under the suite reports bad arguments with errors matching
// dedup.ErrInvalid, a server it cannot reach with dedup.ErrStore, and a
// Forget it cannot do with dedup.ErrCannotForget.
package deduptest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/eosflow/eosflow/dedup"
)

// Backend is a store under the suite.
type Backend struct {
	// Open opens a store for the running test; ids of one test never
	// collide with another's, so stores may share a server.
	Open func(t *testing.T) dedup.Store
	// OpenRetention, when set, opens a store that keeps ids for a
	// retention fixed here, between retention and twice it, whatever a
	// Mark's ttl (as a Bloom filter's generations do); the expiry cases
	// use it in place of Open.
	OpenRetention func(t *testing.T, retention time.Duration) dedup.Store
	// CannotForget says Forget fails with dedup.ErrCannotForget.
	CannotForget bool
	// Unreachable, when set, builds the store against addr with a call
	// timeout and makes one call: the suite checks that a server where
	// nothing listens, or one that never answers, is a prompt error
	// naming addr. A store may fail in its constructor or in the call.
	Unreachable func(ctx context.Context, addr string, timeout time.Duration) error
}

// Run checks the promises of dedup.Store: the first mark wins, exactly
// one of concurrent marks wins, an expired or forgotten id is new again,
// bad arguments are refused, and an unreachable server is a prompt
// error naming its address.
func Run(t *testing.T, b Backend) {
	t.Helper()
	if b.Unreachable != nil {
		t.Run("UnreachableIsPromptError", func(t *testing.T) { testUnreachable(t, closedPort(t), b.Unreachable) })
		t.Run("SilentServerIsPromptError", func(t *testing.T) { testUnreachable(t, silentServer(t), b.Unreachable) })
	}
	if b.Open == nil {
		return
	}
	t.Run("FirstMarkWins", func(t *testing.T) { testFirstMarkWins(t, b.Open(t)) })
	t.Run("ConcurrentMarksOneWins", func(t *testing.T) { testConcurrentMarks(t, b.Open(t), lifetime{}) })
	if b.OpenRetention == nil {
		t.Run("ConcurrentMarksOfExpiredIdsOneWins", func(t *testing.T) {
			testConcurrentMarks(t, b.Open(t), lifetime{ttl: 100 * time.Millisecond, gone: 300 * time.Millisecond, live: time.Minute})
		})
		t.Run("ExpiredIsNewAgain", func(t *testing.T) { testExpiry(t, b.Open(t)) })
	} else {
		// Ids live between the retention and twice it.
		const retention = time.Second
		t.Run("ConcurrentMarksOfExpiredIdsOneWins", func(t *testing.T) {
			testConcurrentMarks(t, b.OpenRetention(t, retention), lifetime{ttl: retention, gone: 2*retention + 500*time.Millisecond, live: retention})
		})
		t.Run("ExpiredAfterRetentionWithinTwice", func(t *testing.T) { testRetentionExpiry(t, b.OpenRetention(t, retention), retention) })
	}
	if b.CannotForget {
		t.Run("ForgetIsRefused", func(t *testing.T) { testForgetRefused(t, b.Open(t)) })
	} else {
		t.Run("Forget", func(t *testing.T) { testForget(t, b.Open(t)) })
	}
	t.Run("InvalidArguments", func(t *testing.T) { testInvalid(t, b.Open(t)) })
}

// ids returns n ids unique to this test and this run, so runs sharing a
// server, and rows left by earlier runs, cannot collide.
func ids(t *testing.T, n int) []string {
	out := make([]string, n)
	run := time.Now().UnixNano()
	for i := range out {
		out[i] = fmt.Sprintf("%s/%d/%d", t.Name(), run, i)
	}
	return out
}

func mark(t *testing.T, s dedup.Store, id string, ttl time.Duration) bool {
	t.Helper()
	first, err := s.Mark(t.Context(), id, ttl)
	if err != nil {
		t.Fatalf("Mark(%q, %v): %v", id, ttl, err)
	}
	return first
}

func seen(t *testing.T, s dedup.Store, id string) bool {
	t.Helper()
	ok, err := s.Seen(t.Context(), id)
	if err != nil {
		t.Fatalf("Seen(%q): %v", id, err)
	}
	return ok
}

func testFirstMarkWins(t *testing.T, s dedup.Store) {
	id := ids(t, 2)
	if seen(t, s, id[0]) {
		t.Fatalf("Seen(%q) before any Mark = true", id[0])
	}
	if !mark(t, s, id[0], time.Minute) {
		t.Fatalf("first Mark(%q) = false, want true", id[0])
	}
	for i := range 3 {
		if mark(t, s, id[0], time.Minute) {
			t.Fatalf("Mark(%q) number %d = true, want false: the id is remembered", id[0], i+2)
		}
	}
	if !seen(t, s, id[0]) {
		t.Fatalf("Seen(%q) after Mark = false", id[0])
	}
	if seen(t, s, id[1]) {
		t.Fatalf("Seen(%q) = true for an id never marked", id[1])
	}
	if !mark(t, s, id[1], time.Minute) {
		t.Fatalf("Mark(%q) = false for an id never marked", id[1])
	}
}

// lifetime says how ids expire in a store under test: marked with ttl, an
// id is forgotten within gone; marked with live, it outlives the test case.
// The zero lifetime means that nothing is marked to expire.
type lifetime struct{ ttl, gone, live time.Duration }

// testConcurrentMarks races many Marks of each id; with an expiring
// lifetime, every id was marked before and has expired, so the marks race
// to take over an expired entry (in Postgres: a row still there, in a Bloom
// filter: an older generation) rather than to create one.
func testConcurrentMarks(t *testing.T, s dedup.Store, life lifetime) {
	const goroutines, idCount = 32, 20
	id := ids(t, idCount)
	ttl := time.Minute
	if life != (lifetime{}) {
		for _, i := range id {
			if !mark(t, s, i, life.ttl) {
				t.Fatalf("first Mark(%q) = false", i)
			}
		}
		time.Sleep(life.gone)
		ttl = life.live
	}
	wins := make([]atomic.Int32, idCount)
	var wg sync.WaitGroup
	errs := make(chan error, goroutines)
	start := make(chan struct{})
	for g := range goroutines {
		wg.Go(func() {
			<-start
			for k := range idCount {
				i := (k + g) % idCount // each goroutine starts at another id
				first, err := s.Mark(t.Context(), id[i], ttl)
				if err != nil {
					errs <- err
					return
				}
				if first {
					wins[i].Add(1)
				}
			}
		})
	}
	close(start)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for i := range wins {
		if n := wins[i].Load(); n != 1 {
			t.Errorf("id %q: %d of %d concurrent Marks returned first=true, want exactly 1", id[i], n, goroutines)
		}
	}
}

func testExpiry(t *testing.T, s dedup.Store) {
	const ttl = time.Second
	id := ids(t, 2)
	if !mark(t, s, id[0], ttl) {
		t.Fatalf("first Mark(%q) = false", id[0])
	}
	if !mark(t, s, id[1], 30*time.Second) {
		t.Fatalf("first Mark(%q) = false", id[1])
	}
	if mark(t, s, id[0], ttl) {
		t.Fatalf("Mark(%q) within its ttl = true", id[0])
	}
	time.Sleep(ttl + 300*time.Millisecond)
	if seen(t, s, id[0]) {
		t.Fatalf("Seen(%q) = true %v after a Mark with ttl %v", id[0], ttl+300*time.Millisecond, ttl)
	}
	if !mark(t, s, id[0], time.Minute) {
		t.Fatalf("Mark(%q) after its ttl = false, want true: an expired id is new", id[0])
	}
	if mark(t, s, id[0], time.Minute) {
		t.Fatalf("Mark(%q) after it was marked again = true: the new mark must live", id[0])
	}
	if !seen(t, s, id[1]) || mark(t, s, id[1], time.Minute) {
		t.Fatalf("id %q with a 30s ttl was forgotten after %v", id[1], ttl+300*time.Millisecond)
	}
}

// testRetentionExpiry checks a store whose ids live between retention and
// twice it: still seen until retention has passed, gone by twice it, and
// new again then.
func testRetentionExpiry(t *testing.T, s dedup.Store, retention time.Duration) {
	id := ids(t, 1)[0]
	before := time.Now()
	if !mark(t, s, id, retention) {
		t.Fatalf("first Mark(%q) = false", id)
	}
	marked := time.Now()
	if mark(t, s, id, retention) {
		t.Fatalf("Mark(%q) within its retention = true", id)
	}
	var lastSeen time.Duration // when the last Seen that found it began, after the Mark returned
	for {
		start := time.Now()
		ok := seen(t, s, id)
		if !ok {
			// The server's clock read during this call is before its
			// end, and the mark's is after the Mark began (less the
			// millisecond it truncates).
			if held := time.Since(before); held < retention-2*time.Millisecond {
				t.Fatalf("Seen(%q) = false %v after the Mark began, want it remembered at least the retention %v", id, held, retention)
			}
			break
		}
		lastSeen = start.Sub(marked)
		if lastSeen >= 2*retention {
			t.Fatalf("Seen(%q) = true %v after the Mark returned, want it forgotten within twice the retention %v", id, lastSeen, retention)
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Logf("retention %v: still seen %v after the Mark, forgotten after %v", retention, lastSeen.Round(time.Millisecond), time.Since(before).Round(time.Millisecond))
	if !mark(t, s, id, retention) {
		t.Fatalf("Mark(%q) after it was forgotten = false, want true: an expired id is new", id)
	}
	if mark(t, s, id, retention) {
		t.Fatalf("Mark(%q) after it was marked again = true: the new mark must live", id)
	}
}

// testForgetRefused checks a store that cannot forget (a Bloom filter):
// Forget says so, and the mark stays.
func testForgetRefused(t *testing.T, s dedup.Store) {
	id := ids(t, 1)[0]
	if !mark(t, s, id, time.Minute) {
		t.Fatalf("first Mark(%q) = false", id)
	}
	err := s.Forget(t.Context(), id)
	if !errors.Is(err, dedup.ErrCannotForget) {
		t.Fatalf("Forget(%q) = %v, want dedup.ErrCannotForget", id, err)
	}
	if !seen(t, s, id) || mark(t, s, id, time.Minute) {
		t.Fatalf("id %q was forgotten by a Forget that failed", id)
	}
}

func testForget(t *testing.T, s dedup.Store) {
	id := ids(t, 2)
	if !mark(t, s, id[0], time.Minute) {
		t.Fatalf("first Mark(%q) = false", id[0])
	}
	if err := s.Forget(t.Context(), id[0]); err != nil {
		t.Fatalf("Forget(%q): %v", id[0], err)
	}
	if seen(t, s, id[0]) {
		t.Fatalf("Seen(%q) after Forget = true", id[0])
	}
	if !mark(t, s, id[0], time.Minute) {
		t.Fatalf("Mark(%q) after Forget = false, want true", id[0])
	}
	if err := s.Forget(t.Context(), id[1]); err != nil {
		t.Fatalf("Forget(%q) of an id never marked: %v, want nil", id[1], err)
	}
}

func testInvalid(t *testing.T, s dedup.Store) {
	id := ids(t, 1)[0]
	for _, c := range []struct {
		name string
		call func() error
	}{
		{"Mark empty id", func() error { _, err := s.Mark(t.Context(), "", time.Minute); return err }},
		{"Mark zero ttl", func() error { _, err := s.Mark(t.Context(), id, 0); return err }},
		{"Mark negative ttl", func() error { _, err := s.Mark(t.Context(), id, -time.Second); return err }},
		{"Seen empty id", func() error { _, err := s.Seen(t.Context(), ""); return err }},
		{"Forget empty id", func() error { return s.Forget(t.Context(), "") }},
	} {
		if err := c.call(); !errors.Is(err, dedup.ErrInvalid) {
			t.Errorf("%s: err = %v, want dedup.ErrInvalid", c.name, err)
		}
	}
	if seen(t, s, id) {
		t.Errorf("a refused Mark(%q) marked it", id)
	}
}

// closedPort returns a loopback address where nothing listens.
func closedPort(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

// silentServer returns the address of a listener that accepts connections
// and never answers: a hung server, or a firewall that drops replies.
func silentServer(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var conns []net.Conn
	var mu sync.Mutex
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		l.Close()
		<-done
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	return l.Addr().String()
}

func testUnreachable(t *testing.T, addr string, call func(context.Context, string, time.Duration) error) {
	const timeout = 500 * time.Millisecond
	const bound = 5 * time.Second // the timeout, and retries and backoff around it
	begin := time.Now()
	err := call(context.Background(), addr, timeout) // no deadline: the store's own bound must hold
	took := time.Since(begin)
	if err == nil {
		t.Fatalf("a store at %s, where nothing listens, returned no error", addr)
	}
	if took > bound {
		t.Errorf("the error took %v, want under %v", took, bound)
	}
	if !errors.Is(err, dedup.ErrStore) {
		t.Errorf("err = %v, want one matching dedup.ErrStore", err)
	}
	if !strings.Contains(err.Error(), addr) {
		t.Errorf("err = %q does not name the address %s", err, addr)
	}
	t.Logf("after %v: %v", took.Round(time.Millisecond), err)
}
