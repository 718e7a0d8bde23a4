package dedup_test

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

	"github.com/redis/go-redis/v9"

	"github.com/eosflow/eosflow/dedup"
	"github.com/eosflow/eosflow/internal/servertest"
)

// A backend is one Store implementation under test: how to open it against
// its server, and one that points at a port where nothing listens.
type backend struct {
	name string
	// skip, when not empty, is why this backend cannot run here.
	skip string
	open func(t *testing.T) dedup.Store
	// openRetention, when set, opens a store that keeps ids for a
	// retention fixed here, between retention and twice it, whatever a
	// Mark's ttl (a Bloom filter's generations); the expiry cases use it.
	openRetention func(t *testing.T, retention time.Duration) dedup.Store
	// cannotForget: Forget fails with dedup.ErrCannotForget.
	cannotForget bool
	// unreachable builds the store against addr with the given Timeout and
	// makes one call; a store may fail in its constructor (Postgres connects
	// there) or in the call.
	unreachable func(ctx context.Context, addr string, timeout time.Duration) error
}

// backends are the stores under test: memory always; Redis and Postgres
// on the servers servertest finds (a URL, else a container), else they skip.
func backends(t *testing.T) []backend {
	redisURL, noRedis := servertest.LookupRedis(t)
	pgURL, noPostgres := servertest.LookupPostgres(t)
	bs := []backend{
		{
			name: "memory",
			open: func(t *testing.T) dedup.Store {
				m, err := dedup.NewMemory()
				if err != nil {
					t.Fatal(err)
				}
				return m
			},
		},
		{
			name: "redis",
			open: func(t *testing.T) dedup.Store {
				r, err := dedup.NewRedis(redisURL, dedup.Prefix("eosflow:dedup-test:"+t.Name()+":"))
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { r.Close() })
				if err := r.Ping(t.Context()); err != nil {
					t.Fatalf("EOS_REDIS_URL=%s: %v", redisURL, err)
				}
				return r
			},
			unreachable: func(ctx context.Context, addr string, timeout time.Duration) error {
				r, err := dedup.NewRedis("redis://"+addr+"/0", dedup.Timeout(timeout))
				if err != nil {
					return err
				}
				defer r.Close()
				_, err = r.Mark(ctx, "m-1", time.Minute)
				return err
			},
		},
		{
			name: "redis-sorted-set",
			open: func(t *testing.T) dedup.Store {
				key := "eosflow:dedup-test:" + t.Name()
				z, err := dedup.NewRedisSortedSet(redisURL, key)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { z.Close(); dropRedisKey(t, redisURL, key); dropRedisKey(t, redisURL, "{"+key+"}:pending") })
				if err := z.Ping(t.Context()); err != nil {
					t.Fatalf("EOS_REDIS_URL=%s: %v", redisURL, err)
				}
				return z
			},
			unreachable: func(ctx context.Context, addr string, timeout time.Duration) error {
				z, err := dedup.NewRedisSortedSet("redis://"+addr+"/0", "ids", dedup.Timeout(timeout))
				if err != nil {
					return err
				}
				defer z.Close()
				_, err = z.Mark(ctx, "m-1", time.Minute)
				return err
			},
		},
		{
			name: "redis-bloom",
			open: func(t *testing.T) dedup.Store { return openBloom(t, redisURL, time.Minute) },
			openRetention: func(t *testing.T, retention time.Duration) dedup.Store {
				return openBloom(t, redisURL, retention)
			},
			cannotForget: true,
			unreachable: func(ctx context.Context, addr string, timeout time.Duration) error {
				b, err := dedup.NewRedisBloom("redis://"+addr+"/0", "ids", dedup.BloomOptions{Entries: 1000, FalsePositiveRate: 0.01, Retention: time.Minute}, dedup.Timeout(timeout))
				if err != nil {
					return err
				}
				defer b.Close()
				_, err = b.Mark(ctx, "m-1", time.Minute)
				return err
			},
		},
		{
			name: "postgres",
			open: func(t *testing.T) dedup.Store {
				p, err := dedup.NewPostgres(t.Context(), pgURL, dedup.Table("eosflow_dedup_test"))
				if err != nil {
					t.Fatalf("EOS_POSTGRES_URL=%s: %v", pgURL, err)
				}
				t.Cleanup(func() { p.Close() })
				return p
			},
			unreachable: func(ctx context.Context, addr string, timeout time.Duration) error {
				p, err := dedup.NewPostgres(ctx, "postgres://postgres@"+addr+"/eosflow?sslmode=disable", dedup.Timeout(timeout))
				if err != nil {
					return err
				}
				defer p.Close()
				_, err = p.Mark(ctx, "m-1", time.Minute)
				return err
			},
		},
	}
	for i := range bs {
		switch {
		case strings.HasPrefix(bs[i].name, "redis") && redisURL == "":
			bs[i].skip = noRedis
		case bs[i].name == "postgres" && pgURL == "":
			bs[i].skip = noPostgres
		}
	}
	return bs
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

// TestConformance runs every store through the same promises: the first
// mark wins, exactly one of concurrent marks wins, an expired or forgotten
// id is new again, bad arguments are refused, and an unreachable server is a
// prompt error naming its address.
func TestConformance(t *testing.T) {
	for _, b := range backends(t) {
		t.Run(b.name, func(t *testing.T) {
			// These need no server, so they run everywhere.
			if b.unreachable != nil {
				t.Run("UnreachableIsPromptError", func(t *testing.T) { testUnreachable(t, closedPort(t), b.unreachable) })
				t.Run("SilentServerIsPromptError", func(t *testing.T) { testUnreachable(t, silentServer(t), b.unreachable) })
			}
			if b.skip != "" {
				t.Skip(b.skip)
			}
			t.Run("FirstMarkWins", func(t *testing.T) { testFirstMarkWins(t, b.open(t)) })
			t.Run("ConcurrentMarksOneWins", func(t *testing.T) { testConcurrentMarks(t, b.open(t), lifetime{}) })
			if b.openRetention == nil {
				t.Run("ConcurrentMarksOfExpiredIdsOneWins", func(t *testing.T) {
					testConcurrentMarks(t, b.open(t), lifetime{ttl: 100 * time.Millisecond, gone: 300 * time.Millisecond, live: time.Minute})
				})
				t.Run("ExpiredIsNewAgain", func(t *testing.T) { testExpiry(t, b.open(t)) })
			} else {
				// Ids live between the retention and twice it.
				const retention = time.Second
				t.Run("ConcurrentMarksOfExpiredIdsOneWins", func(t *testing.T) {
					testConcurrentMarks(t, b.openRetention(t, retention), lifetime{ttl: retention, gone: 2*retention + 500*time.Millisecond, live: retention})
				})
				t.Run("ExpiredAfterRetentionWithinTwice", func(t *testing.T) { testRetentionExpiry(t, b.openRetention(t, retention), retention) })
			}
			if b.cannotForget {
				t.Run("ForgetIsRefused", func(t *testing.T) { testForgetRefused(t, b.open(t)) })
			} else {
				t.Run("Forget", func(t *testing.T) { testForget(t, b.open(t)) })
			}
			t.Run("InvalidArguments", func(t *testing.T) { testInvalid(t, b.open(t)) })
		})
	}
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
	if !errors.Is(err, dedup.ErrCannotForget) || !strings.Contains(err.Error(), "MarkAfter") {
		t.Fatalf("Forget(%q) = %v, want dedup.ErrCannotForget saying to mark after instead", id, err)
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

// openBloom opens a RedisBloom of 10,000 ids per retention at 1% for the
// running test, and deletes its generations afterwards.
func openBloom(t *testing.T, url string, retention time.Duration) *dedup.RedisBloom {
	const prefix = "eosflow:dedup-test:"
	name := fmt.Sprintf("%s:%d", t.Name(), time.Now().UnixNano())
	b, err := dedup.NewRedisBloom(url, name, dedup.BloomOptions{Entries: 10_000, FalsePositiveRate: 0.01, Retention: retention}, dedup.Prefix(prefix))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		b.Close()
		opt, err := redis.ParseURL(url)
		if err != nil {
			t.Error(err)
			return
		}
		c := redis.NewClient(opt)
		defer c.Close()
		dropRedisPrefix(t, c, prefix+name+":")
	})
	if err := b.Ping(t.Context()); err != nil {
		t.Fatalf("EOS_REDIS_URL=%s: %v", url, err)
	}
	return b
}

// dropRedisKey deletes key, so a sorted set (which never expires as a whole)
// does not outlive its test on a long-running server.
func dropRedisKey(t *testing.T, url, key string) {
	opt, err := redis.ParseURL(url)
	if err != nil {
		t.Error(err)
		return
	}
	c := redis.NewClient(opt)
	defer c.Close()
	if err := c.Del(context.Background(), key).Err(); err != nil {
		t.Errorf("DEL %s: %v", key, err)
	}
}
