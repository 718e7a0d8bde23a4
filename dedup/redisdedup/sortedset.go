package redisdedup

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/eosflow/eosflow/dedup"
	"github.com/eosflow/eosflow/dedup/internal/check"
)

// The sorted set's scripts take the time from the Redis server, so instances
// with skewed clocks agree on what has expired. Scores are expiry times in
// Unix milliseconds.
const nowMillisLua = `local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
`

var (
	// KEYS[1] the set, KEYS[2] its pending hash (see zPendingKey).
	zMark = redis.NewScript(nowMillisLua + `local s = redis.call('ZSCORE', KEYS[1], ARGV[1])
if s and tonumber(s) > now then return 0 end
redis.call('ZADD', KEYS[1], now + tonumber(ARGV[2]), ARGV[1])
redis.call('HDEL', KEYS[2], ARGV[1])
return 1`)
	zSeen = redis.NewScript(nowMillisLua + `local s = redis.call('ZSCORE', KEYS[1], ARGV[1])
if s and tonumber(s) > now then return 1 end
return 0`)
	// The pending entries of expired members go with them; there are
	// few (one per effect running), so they are walked, not the set.
	zPurge = redis.NewScript(nowMillisLua + `for _, id in ipairs(redis.call('HKEYS', KEYS[2])) do
  local s = redis.call('ZSCORE', KEYS[1], id)
  if not s or tonumber(s) <= now then redis.call('HDEL', KEYS[2], id) end
end
return redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)`)
)

// SortedSet is a dedup.Store in one Redis sorted set, the article's variant:
// each id is a member scored with its expiry time, a Lua script checks and
// adds it in one step (ZSCORE, then ZADD), and Purge removes expired members
// with ZREMRANGEBYSCORE. One key holds every id, so the ids can be listed,
// counted (ZCARD) and dropped together, and cost less memory per id than a
// key each (the article's ~80 bytes for a UUID).
//
// What it risks: what Redis risks (a restart without persistence, or an
// evicting maxmemory-policy, forgets ids, and their redeliveries repeat their
// effects), and, as nothing expires by itself, a set that grows until Purge
// runs; expired members already count as absent. All ids live on one key,
// so in Redis Cluster one node holds and serves them all: use one set per
// pipeline, or the key-per-id Store, when that node would be too hot.
type SortedSet struct {
	client  *redis.Client
	addr    string
	key     string
	cfg     config
	closed  atomic.Bool
	closeFn func() error
}

// NewSortedSet returns a store on the sorted set key of the Redis at url
// (redis://host:port/db). Options are those of New; Prefix does not apply,
// the key names the set. It does not connect yet.
func NewSortedSet(url, key string, opts ...Option) (*SortedSet, error) {
	if key == "" {
		return nil, fmt.Errorf("%w: empty sorted set key: name one per pipeline, such as %q", dedup.ErrInvalid, DefaultPrefix+"my-app")
	}
	if strings.ContainsAny(key, "{}") && !hasHashTag(key) {
		return nil, fmt.Errorf("%w: sorted set key %q has braces but no hash tag, so its pending hash could not share its hash slot: drop the braces, or tag it whole, such as %q", dedup.ErrInvalid, key, "{"+strings.NewReplacer("{", "", "}", "").Replace(key)+"}")
	}
	r, err := New(url, opts...)
	if err != nil {
		return nil, err
	}
	return &SortedSet{client: r.client, addr: r.addr, key: key, cfg: r.cfg, closeFn: r.client.Close}, nil
}

// Addr is the host:port the store talks to.
func (z *SortedSet) Addr() string { return z.addr }

// Mark adds id with score now+ttl unless it is a member whose score is still
// in the future; Redis runs a script without interleaving other commands, so
// exactly one concurrent caller adds it.
func (z *SortedSet) Mark(ctx context.Context, id string, ttl time.Duration) (bool, error) {
	if err := check.Mark(id, ttl); err != nil {
		return false, err
	}
	n, err := z.run(ctx, "mark", id, zMark, id, check.Millis(ttl))
	return n == 1, err
}

// Seen reports whether id is a member that has not expired.
func (z *SortedSet) Seen(ctx context.Context, id string) (bool, error) {
	if err := check.ID(id); err != nil {
		return false, err
	}
	n, err := z.run(ctx, "seen", id, zSeen, id)
	return n == 1, err
}

// Forget removes id from the set (ZREM), pending or done.
func (z *SortedSet) Forget(ctx context.Context, id string) error {
	if err := check.ID(id); err != nil {
		return err
	}
	ctx, cancel, err := z.begin(ctx)
	if err != nil {
		return err
	}
	defer cancel()
	_, err = z.client.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.ZRem(ctx, z.key, id)
		p.HDel(ctx, zPendingKey(z.key), id)
		return nil
	})
	if err != nil {
		return z.fail("forget", id, err)
	}
	return nil
}

// Purge removes expired members and returns how many: the article's periodic
// ZREMRANGEBYSCORE cleanup. Run it from one instance, every few minutes or a
// tenth of the retention, whichever is shorter.
func (z *SortedSet) Purge(ctx context.Context) (int64, error) {
	return z.run(ctx, "purge", "", zPurge)
}

// Ping checks that the server answers, for a readiness check at start.
func (z *SortedSet) Ping(ctx context.Context) error {
	ctx, cancel, err := z.begin(ctx)
	if err != nil {
		return err
	}
	defer cancel()
	if err := z.client.Ping(ctx).Err(); err != nil {
		return z.fail("ping", "", err)
	}
	return nil
}

// Close closes the connections; it is idempotent.
func (z *SortedSet) Close() error {
	if z.closed.Swap(true) {
		return nil
	}
	return z.closeFn()
}

func (z *SortedSet) run(ctx context.Context, op, id string, s *redis.Script, args ...any) (int64, error) {
	ctx, cancel, err := z.begin(ctx)
	if err != nil {
		return 0, err
	}
	defer cancel()
	n, err := s.Run(ctx, z.client, []string{z.key, zPendingKey(z.key)}, args...).Int64()
	if err != nil {
		return 0, z.fail(op, id, err)
	}
	return n, nil
}

func (z *SortedSet) begin(ctx context.Context) (context.Context, context.CancelFunc, error) {
	if z.closed.Load() {
		return nil, nil, dedup.ErrClosed
	}
	ctx, cancel := context.WithTimeout(ctx, z.cfg.timeout)
	return ctx, cancel, nil
}

func (z *SortedSet) fail(op, id string, err error) error {
	return &dedup.StoreError{Store: "redis", Addr: z.addr, Op: op, ID: id, Err: err}
}
