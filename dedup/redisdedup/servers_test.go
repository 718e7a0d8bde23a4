package redisdedup_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/eosflow/eosflow/dedup"
	"github.com/eosflow/eosflow/dedup/redisdedup"
	"github.com/eosflow/eosflow/tools/servertest"
)

func TestNewRejectsBadArguments(t *testing.T) {
	for _, c := range []struct {
		url  string
		opts []redisdedup.Option
	}{
		{"http://127.0.0.1:1", nil},
		{"redis://127.0.0.1:1/0", []redisdedup.Option{redisdedup.Timeout(-time.Second)}},
	} {
		if _, err := redisdedup.New(c.url, c.opts...); !errors.Is(err, dedup.ErrInvalid) {
			t.Errorf("New(%q, %d options): err = %v, want ErrInvalid", c.url, len(c.opts), err)
		}
	}
}

// A Redis URL that does not parse is refused without repeating it: it may
// hold a password.
func TestNewHidesThePasswordOfABadURL(t *testing.T) {
	_, err := redisdedup.New("redis://app:s3cr%t@127.0.0.1:1/0")
	if err == nil || strings.Contains(err.Error(), "s3cr") || !errors.Is(err, dedup.ErrInvalid) {
		t.Fatalf("error %v: want ErrInvalid without the password", err)
	}
}

func TestClosedStoresRefuseCalls(t *testing.T) {
	r, err := redisdedup.New("redis://127.0.0.1:1/0")
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if err := r.Close(); err != nil {
		t.Fatalf("second Close: %v, want nil", err)
	}
	if _, err := r.Mark(t.Context(), "a", time.Minute); !errors.Is(err, dedup.ErrClosed) {
		t.Errorf("Mark on a closed Redis store: %v, want ErrClosed", err)
	}
}

// TestSortedSetPurgeRemovesOnlyExpiredMembers is the article's
// ZREMRANGEBYSCORE cleanup: expired members go, live ones stay marked.
func TestSortedSetPurgeRemovesOnlyExpiredMembers(t *testing.T) {
	url := servertest.RedisURL(t)
	key := fmt.Sprintf("eosflow:dedup-test:purge:%d", time.Now().UnixNano())
	z, err := redisdedup.NewSortedSet(url, key)
	if err != nil {
		t.Fatal(err)
	}
	defer z.Close()
	defer dropRedisKey(t, url, key)
	for i := range 5 {
		if _, err := z.Mark(t.Context(), fmt.Sprint("short-", i), 50*time.Millisecond); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := z.Mark(t.Context(), "long", time.Hour); err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond)
	if n, err := z.Purge(t.Context()); err != nil || n != 5 {
		t.Errorf("Purge = %d, %v; want the 5 expired members", n, err)
	}
	if first, err := z.Mark(t.Context(), "long", time.Hour); err != nil || first {
		t.Errorf(`Mark("long") after Purge = %v, %v; want false: a live id must survive Purge`, first, err)
	}
	if err := z.Forget(t.Context(), "long"); err != nil {
		t.Fatal(err)
	}
	if n, err := z.Purge(t.Context()); err != nil || n != 0 {
		t.Errorf("Purge of an empty set = %d, %v; want 0, nil", n, err)
	}
	if _, err := redisdedup.NewSortedSet(url, ""); !errors.Is(err, dedup.ErrInvalid) {
		t.Errorf("NewSortedSet with an empty key: %v, want ErrInvalid", err)
	}
}

// A SortedSet's pending ids live in a hash beside the set. An id that
// expired while pending and was marked again (Mark) is done: its stale
// pending entry must not make a Claim take it over and run the effect
// again. Purge removes the pending entries of the members it removes.
func TestSortedSetPendingEntriesFollowTheirMembers(t *testing.T) {
	url := servertest.RedisURL(t)
	key := fmt.Sprintf("eosflow:dedup-test:pending:%d", time.Now().UnixNano())
	z, err := redisdedup.NewSortedSet(url, key)
	if err != nil {
		t.Fatal(err)
	}
	defer z.Close()
	defer dropRedisKey(t, url, key)
	defer dropRedisKey(t, url, "{"+key+"}:pending")
	ctx := t.Context()
	for _, id := range []string{"remarked", "purged"} {
		if c, err := z.Claim(ctx, id, "a", 50*time.Millisecond, 50*time.Millisecond); err != nil || c.State != dedup.Claimed {
			t.Fatalf("Claim(%s) = %+v, %v", id, c, err)
		}
	}
	time.Sleep(150 * time.Millisecond)
	if first, err := z.Mark(ctx, "remarked", time.Hour); err != nil || !first {
		t.Fatalf("Mark of an expired pending id = %v, %v; want first", first, err)
	}
	if c, err := z.Claim(ctx, "remarked", "b", time.Minute, time.Hour); err != nil || c.State != dedup.Done {
		t.Errorf("Claim by b of an id marked done = %+v, %v; want done", c, err)
	}
	if n, err := z.Purge(ctx); err != nil || n != 1 {
		t.Errorf("Purge = %d, %v; want the expired pending member", n, err)
	}
	opt, _ := redis.ParseURL(url)
	c := redis.NewClient(opt)
	defer c.Close()
	if n, err := c.HLen(ctx, "{"+key+"}:pending").Result(); err != nil || n != 0 {
		t.Errorf("pending entries left after Purge: %d, %v; want 0", n, err)
	}
}

// A sorted set key with braces but no hash tag is refused: its pending
// hash could not share its hash slot in Redis Cluster.
func TestSortedSetRefusesAKeyWithBracesButNoTag(t *testing.T) {
	for _, key := range []string{"a}b", "a{}b", "{}ids"} {
		if _, err := redisdedup.NewSortedSet("redis://127.0.0.1:1/0", key); !errors.Is(err, dedup.ErrInvalid) {
			t.Errorf("NewSortedSet(%q): %v, want ErrInvalid", key, err)
		}
	}
	for _, key := range []string{"ids", "{app}:ids"} {
		if _, err := redisdedup.NewSortedSet("redis://127.0.0.1:1/0", key); err != nil {
			t.Errorf("NewSortedSet(%q): %v", key, err)
		}
	}
}
