package dedup_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/eosflow/eosflow/dedup"
	"github.com/eosflow/eosflow/dedup/deduptest"
	"github.com/eosflow/eosflow/tools/servertest"
)

// A backend is one Store implementation under test.
type backend struct {
	name string
	// skip, when not empty, is why this backend cannot run here.
	skip string
	deduptest.Backend
}

// backends are the stores under test: memory always; Redis and Postgres
// on the servers servertest finds (a URL, else a container), else they skip.
func backends(t *testing.T) []backend {
	redisURL, noRedis := servertest.LookupRedis(t)
	pgURL, noPostgres := servertest.LookupPostgres(t)
	bs := []backend{
		{
			name: "memory", Backend: deduptest.Backend{
				Open: func(t *testing.T) dedup.Store {
					m, err := dedup.NewMemory()
					if err != nil {
						t.Fatal(err)
					}
					return m
				},
			}},
		{
			name: "redis", Backend: deduptest.Backend{
				Open: func(t *testing.T) dedup.Store {
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
				Unreachable: func(ctx context.Context, addr string, timeout time.Duration) error {
					r, err := dedup.NewRedis("redis://"+addr+"/0", dedup.Timeout(timeout))
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
				Unreachable: func(ctx context.Context, addr string, timeout time.Duration) error {
					z, err := dedup.NewRedisSortedSet("redis://"+addr+"/0", "ids", dedup.Timeout(timeout))
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
				Open: func(t *testing.T) dedup.Store { return openBloom(t, redisURL, time.Minute) },
				OpenRetention: func(t *testing.T, retention time.Duration) dedup.Store {
					return openBloom(t, redisURL, retention)
				},
				CannotForget: true,
				Unreachable: func(ctx context.Context, addr string, timeout time.Duration) error {
					b, err := dedup.NewRedisBloom("redis://"+addr+"/0", "ids", dedup.BloomOptions{Entries: 1000, FalsePositiveRate: 0.01, Retention: time.Minute}, dedup.Timeout(timeout))
					if err != nil {
						return err
					}
					defer b.Close()
					_, err = b.Mark(ctx, "m-1", time.Minute)
					return err
				},
			}},
		{
			name: "postgres", Backend: deduptest.Backend{
				Open: func(t *testing.T) dedup.Store {
					p, err := dedup.NewPostgres(t.Context(), pgURL, dedup.Table("eosflow_dedup_test"))
					if err != nil {
						t.Fatalf("EOS_POSTGRES_URL=%s: %v", pgURL, err)
					}
					t.Cleanup(func() { p.Close() })
					return p
				},
				Unreachable: func(ctx context.Context, addr string, timeout time.Duration) error {
					p, err := dedup.NewPostgres(ctx, "postgres://postgres@"+addr+"/eosflow?sslmode=disable", dedup.Timeout(timeout))
					if err != nil {
						return err
					}
					defer p.Close()
					_, err = p.Mark(ctx, "m-1", time.Minute)
					return err
				},
			}},
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

// TestConformance runs every store through the same promises: the first
// mark wins, exactly one of concurrent marks wins, an expired or forgotten
// id is new again, bad arguments are refused, and an unreachable server is a
// prompt error naming its address.
func TestConformance(t *testing.T) {
	for _, b := range backends(t) {
		t.Run(b.name, func(t *testing.T) {
			// The unreachable cases need no server, so they run everywhere.
			if b.skip != "" {
				deduptest.Run(t, deduptest.Backend{Unreachable: b.Unreachable})
				t.Skip(b.skip)
			}
			deduptest.Run(t, b.Backend)
		})
	}
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
