package redisdedup_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"

	"github.com/eosflow/eosflow/dedup"
	"github.com/eosflow/eosflow/dedup/redisdedup"
	"github.com/eosflow/eosflow/tools/dedupsize"
	"github.com/eosflow/eosflow/tools/servertest"
)

// TestStoreSizesMatchServers marks 20,000 UUID ids in a Store and in a
// SortedSet on a real Redis and compares the memory they took with what
// `eosctl dedup size --store` estimates: more than 25% off fails.
func TestStoreSizesMatchServers(t *testing.T) {
	const n = 20000
	t.Run("redis", func(t *testing.T) {
		url := servertest.RedisURL(t)
		opts, err := redis.ParseURL(url)
		if err != nil {
			t.Fatal(err)
		}
		c := redis.NewClient(opts)
		defer c.Close()
		prefix := fmt.Sprintf("size-%d:", time.Now().UnixNano())
		for _, kind := range []string{"redis", "redis-sorted-set"} {
			before := usedMemory(t, c)
			var store dedup.Store
			if kind == "redis" {
				store, err = redisdedup.New(url, redisdedup.Prefix(prefix))
			} else {
				store, err = redisdedup.NewSortedSet(url, prefix+"zset")
			}
			if err != nil {
				t.Fatal(err)
			}
			for range n {
				if _, err := store.Mark(t.Context(), uuid.NewString(), time.Hour); err != nil {
					t.Fatal(err)
				}
			}
			measured := float64(usedMemory(t, c) - before)
			idBytes := 36
			if kind == "redis" {
				idBytes += len(prefix)
			}
			dedupsize.CheckMeasured(t, kind, n, idBytes, measured)
			if c, ok := store.(interface{ Close() error }); ok {
				c.Close()
			}
			dropRedisPrefix(t, c, prefix)
		}
	})
}

func usedMemory(t *testing.T, c *redis.Client) int64 {
	t.Helper()
	s, err := c.Info(t.Context(), "memory").Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(s, "\r\n") {
		if v, ok := strings.CutPrefix(l, "used_memory:"); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatal("INFO memory has no used_memory line")
	return 0
}

func dropRedisPrefix(t *testing.T, c *redis.Client, prefix string) {
	iter := c.Scan(context.Background(), 0, prefix+"*", 1000).Iterator()
	var keys []string
	for iter.Next(context.Background()) {
		keys = append(keys, iter.Val())
		if len(keys) == 1000 {
			c.Del(context.Background(), keys...)
			keys = keys[:0]
		}
	}
	if len(keys) > 0 {
		c.Del(context.Background(), keys...)
	}
}
