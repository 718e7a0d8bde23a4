package redisdedup_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/eosflow/eosflow/dedup"
	"github.com/eosflow/eosflow/dedup/deduptest"
	"github.com/eosflow/eosflow/dedup/redisdedup"
	"github.com/eosflow/eosflow/tools/servertest"
)

// A backend is one Store implementation under test.
type backend struct {
	name string
	deduptest.Backend
}

// backends are the stores under test, on the Redis servertest finds (a
// URL, else a container); url is empty, and why says why, when there is
// none.
func backends(t *testing.T) (bs []backend, url, why string) {
	url, why = servertest.LookupRedis(t)
	return []backend{
		{
			name: "redis", Backend: deduptest.Backend{
				Open: func(t *testing.T) dedup.Store {
					r, err := redisdedup.New(url, redisdedup.Prefix("eosflow:dedup-test:"+t.Name()+":"))
					if err != nil {
						t.Fatal(err)
					}
					t.Cleanup(func() { r.Close() })
					if err := r.Ping(t.Context()); err != nil {
						t.Fatalf("EOS_REDIS_URL=%s: %v", url, err)
					}
					return r
				},
				Unreachable: func(ctx context.Context, addr string, timeout time.Duration) error {
					r, err := redisdedup.New("redis://"+addr+"/0", redisdedup.Timeout(timeout))
					if err != nil {
						return err
					}
					defer r.Close()
					_, err = r.Mark(ctx, "m-1", time.Minute)
					return err
				},
			}},
		{
			name: "redis-sorted-set", Backend: deduptest.Backend{
				Open: func(t *testing.T) dedup.Store {
					key := "eosflow:dedup-test:" + t.Name()
					z, err := redisdedup.NewSortedSet(url, key)
					if err != nil {
						t.Fatal(err)
					}
					t.Cleanup(func() { z.Close(); dropRedisKey(t, url, key); dropRedisKey(t, url, "{"+key+"}:pending") })
					if err := z.Ping(t.Context()); err != nil {
						t.Fatalf("EOS_REDIS_URL=%s: %v", url, err)
					}
					return z
				},
				Unreachable: func(ctx context.Context, addr string, timeout time.Duration) error {
					z, err := redisdedup.NewSortedSet("redis://"+addr+"/0", "ids", redisdedup.Timeout(timeout))
					if err != nil {
						return err
					}
					defer z.Close()
					_, err = z.Mark(ctx, "m-1", time.Minute)
					return err
				},
			}},
		{
			name: "redis-bloom", Backend: deduptest.Backend{
				Open: func(t *testing.T) dedup.Store { return openBloom(t, url, time.Minute) },
				OpenRetention: func(t *testing.T, retention time.Duration) dedup.Store {
					return openBloom(t, url, retention)
				},
				CannotForget: true,
				Unreachable: func(ctx context.Context, addr string, timeout time.Duration) error {
					b, err := redisdedup.NewBloom("redis://"+addr+"/0", "ids", dedup.BloomOptions{Entries: 1000, FalsePositiveRate: 0.01, Retention: time.Minute}, redisdedup.Timeout(timeout))
					if err != nil {
						return err
					}
					defer b.Close()
					_, err = b.Mark(ctx, "m-1", time.Minute)
					return err
				},
			}},
	}, url, why
}

// TestConformance runs every store through the same promises: the first
// mark wins, exactly one of concurrent marks wins, an expired or forgotten
// id is new again, bad arguments are refused, and an unreachable server is a
// prompt error naming its address.
func TestConformance(t *testing.T) {
	bs, url, why := backends(t)
	for _, b := range bs {
		t.Run(b.name, func(t *testing.T) {
			// The unreachable cases need no server, so they run everywhere.
			if url == "" {
				deduptest.Run(t, deduptest.Backend{Unreachable: b.Unreachable})
				t.Skip(why)
			}
			deduptest.Run(t, b.Backend)
		})
	}
}

// TestLeaseConformance runs every store that holds leases (dedup.Leaser)
// through the promises mark-before relies on: a claimed id is pending for
// its owner, never reported done, until Complete; another owner waits
// while the lease lives and takes it over once it expired; Release removes
// only its owner's pending mark; of concurrent claims exactly one wins.
func TestLeaseConformance(t *testing.T) {
	bs, url, why := backends(t)
	for _, b := range bs {
		t.Run(b.name, func(t *testing.T) {
			if url == "" {
				t.Skip(why)
			}
			if _, ok := b.Open(t).(dedup.Leaser); !ok {
				if b.name != "redis-bloom" {
					t.Fatalf("store %s holds no leases (dedup.Leaser)", b.name)
				}
				t.Skipf("store %s holds no leases; topology.Dedup's MarkBefore falls back to Mark and Forget with it", b.name)
			}
			deduptest.RunLeaser(t, func(t *testing.T) dedup.Leaser { return b.Open(t).(dedup.Leaser) })
		})
	}
}

// openBloom opens a Bloom of 10,000 ids per retention at 1% for the
// running test, and deletes its generations afterwards.
func openBloom(t *testing.T, url string, retention time.Duration) *redisdedup.Bloom {
	const prefix = "eosflow:dedup-test:"
	name := fmt.Sprintf("%s:%d", t.Name(), time.Now().UnixNano())
	b, err := redisdedup.NewBloom(url, name, dedup.BloomOptions{Entries: 10_000, FalsePositiveRate: 0.01, Retention: retention}, redisdedup.Prefix(prefix))
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
