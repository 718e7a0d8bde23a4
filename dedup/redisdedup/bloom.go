package redisdedup

import (
	"context"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/bits-and-blooms/bloom/v3"
	"github.com/redis/go-redis/v9"

	"github.com/eosflow/eosflow/dedup"
	"github.com/eosflow/eosflow/dedup/internal/check"
)

// The filter's scripts read the time from the Redis server, so instances
// with skewed clocks agree on the current generation. KEYS[1] is the
// filter's name (prefix included); ARGV[1] the retention in milliseconds,
// ARGV[2] the bits of one generation, ARGV[3] onwards the id's bit
// positions. A generation is KEYS[1]..":"..floor(now/retention); a
// bitmap of another size was written with other BloomOptions, and reading
// it would answer wrongly, so the scripts refuse it.
const bloomLua = `local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local ret = tonumber(ARGV[1])
local bits = tonumber(ARGV[2])
local g = math.floor(now / ret)
local cur = KEYS[1] .. ':' .. string.format('%.0f', g)
local prev = KEYS[1] .. ':' .. string.format('%.0f', g - 1)
local size = math.ceil(bits / 8)
local ncur = redis.call('STRLEN', cur)
local nprev = redis.call('STRLEN', prev)
if (ncur ~= 0 and ncur ~= size) or (nprev ~= 0 and nprev ~= size) then
  local bad = ncur
  if ncur == 0 or ncur == size then bad = nprev end
  return redis.error_reply('bloom filter ' .. KEYS[1] .. ' has a generation of ' .. bad .. ' bytes, this store expects ' .. size ..
    ': every instance must use the same BloomOptions; to change them, use a new name')
end
local get = {}
for i = 3, #ARGV do
  get[#get + 1] = 'GET'; get[#get + 1] = 'u1'; get[#get + 1] = ARGV[i]
end
local function has(key, n)
  if n == 0 then return false end
  local r = redis.call('BITFIELD', key, unpack(get))
  for i = 1, #r do
    if r[i] == 0 then return false end
  end
  return true
end
local seen = has(cur, ncur) or has(prev, nprev)
`

var (
	bloomMark = redis.NewScript(bloomLua + `if seen then return 0 end
if ncur == 0 then
  -- Allocate the whole bitmap now, so Redis's maxmemory refuses a new
  -- generation at once rather than part way through it.
  redis.call('SETBIT', cur, bits - 1, 0)
  redis.call('PEXPIREAT', cur, string.format('%.0f', (g + 2) * ret))
end
local set = {}
for i = 3, #ARGV do
  set[#set + 1] = 'SET'; set[#set + 1] = 'u1'; set[#set + 1] = ARGV[i]; set[#set + 1] = 1
end
redis.call('BITFIELD', cur, unpack(set))
return 1`)
	bloomSeen = redis.NewScript(bloomLua + `if seen then return 1 end
return 0`)
)

// Bloom is a dedup.Store whose ids live in a Bloom filter in Redis bitmaps,
// shared by every instance (after a rebalance another instance sees the
// partition's redeliveries, so a filter in one process would miss them).
// Its memory is fixed, whatever the ids' length: at a 1% false-positive
// rate, two generations of 11 bits for each id marked per Retention, about
// 2.8 bytes, where the key-per-id Store takes 104 bytes beyond each id's own.
//
// What it risks: a false positive. The filter may report an id it never
// saw as seen, and the caller then skips that message's effect: about
// FalsePositiveRate of new ids are lost, more when more than Entries ids
// are marked per Retention. Use it only where losing an occasional effect
// is acceptable; topology.Dedup refuses it without
// topology.AcceptFalsePositives. It never misses an id it holds, but it
// holds each for between Retention and twice that: a filter cannot delete,
// so time is cut into generations of one Retention each, a Mark checks
// the current and the previous generation and sets the id's bits in the
// current one, and a generation expires once it is no longer checked. For
// the same reason Forget fails (dedup.ErrCannotForget): mark after the effect.
// What Redis risks applies too (a restart without persistence, or an
// evicting maxmemory-policy, forgets every id); size maxmemory with
// Params().MemoryBytes() and use noeviction. The scripts build the
// generation keys from the server's clock, so the filter needs one Redis
// server, not Redis Cluster.
type Bloom struct {
	client  *redis.Client
	addr    string
	key     string
	params  dedup.BloomParams
	cfg     config
	closed  atomic.Bool
	closeFn func() error
}

// NewBloom returns a Bloom filter store named name on the Redis at url
// (redis://host:port/db), sized by o: its generations are the keys prefix +
// name + ":" + a generation number. Options are those of New. It does not
// connect yet.
func NewBloom(url, name string, o dedup.BloomOptions, opts ...Option) (*Bloom, error) {
	if name == "" {
		return nil, fmt.Errorf("%w: empty bloom filter name: name one per pipeline, such as %q", dedup.ErrInvalid, "my-app")
	}
	p, err := o.Params()
	if err != nil {
		return nil, err
	}
	r, err := New(url, opts...)
	if err != nil {
		return nil, err
	}
	return &Bloom{client: r.client, addr: r.addr, key: r.cfg.prefix + name, params: p, cfg: r.cfg, closeFn: r.client.Close}, nil
}

// Addr is the host:port the store talks to.
func (b *Bloom) Addr() string { return b.addr }

// Params describes the filter: the configured options, its bits and hashes
// per generation, its memory.
func (b *Bloom) Params() dedup.BloomParams { return b.params }

// FalsePositiveRate is the configured chance that an id never marked is
// reported as seen. Its presence tells topology.Dedup that the store is
// approximate.
func (b *Bloom) FalsePositiveRate() float64 { return b.params.FalsePositiveRate }

// Retention is how long an id is remembered at least, the longest ttl
// Mark accepts.
func (b *Bloom) Retention() time.Duration { return b.params.Retention }

// Mark sets id's bits in the current generation unless all of them are
// set in the current or the previous one; one script does both, so
// exactly one concurrent caller sets them. ttl must not exceed the
// Retention; the id is kept between Retention and twice that, whatever
// ttl says.
func (b *Bloom) Mark(ctx context.Context, id string, ttl time.Duration) (bool, error) {
	if err := check.Mark(id, ttl); err != nil {
		return false, err
	}
	if ttl > b.params.Retention {
		return false, fmt.Errorf("%w: ttl %v for id %q is longer than the bloom filter's retention %v: pass a ttl of at most %v (topology.DedupRetention), or build the store with a Retention of at least %v",
			dedup.ErrInvalid, ttl, id, b.params.Retention, b.params.Retention, ttl)
	}
	n, err := b.run(ctx, "mark", id, bloomMark)
	return n == 1, err
}

// Seen reports whether all of id's bits are set in the current or the
// previous generation: true for every id marked within the Retention, and
// for about FalsePositiveRate of the others.
func (b *Bloom) Seen(ctx context.Context, id string) (bool, error) {
	if err := check.ID(id); err != nil {
		return false, err
	}
	n, err := b.run(ctx, "seen", id, bloomSeen)
	return n == 1, err
}

// Forget returns an error wrapping dedup.ErrCannotForget: clearing id's bits
// would clear other ids' too.
func (b *Bloom) Forget(ctx context.Context, id string) error {
	if err := check.ID(id); err != nil {
		return err
	}
	if b.closed.Load() {
		return dedup.ErrClosed
	}
	return fmt.Errorf("%w: id %q: its bits are shared with other ids; mark after the effect succeeded (topology.MarkAfter) instead of forgetting a failed one, or use an exact store (redisdedup.New, pgdedup.New)", dedup.ErrCannotForget, id)
}

// Ping checks that the server answers, for a readiness check at start.
func (b *Bloom) Ping(ctx context.Context) error {
	ctx, cancel, err := b.begin(ctx)
	if err != nil {
		return err
	}
	defer cancel()
	if err := b.client.Ping(ctx).Err(); err != nil {
		return b.fail("ping", "", err)
	}
	return nil
}

// Close closes the connections; it is idempotent.
func (b *Bloom) Close() error {
	if b.closed.Swap(true) {
		return nil
	}
	return b.closeFn()
}

// run runs script s for id with the filter's shape and id's bit positions.
func (b *Bloom) run(ctx context.Context, op, id string, s *redis.Script) (int64, error) {
	ctx, cancel, err := b.begin(ctx)
	if err != nil {
		return 0, err
	}
	defer cancel()
	n, err := s.Run(ctx, b.client, []string{b.key}, b.args(id)...).Int64()
	if err != nil {
		return 0, b.fail(op, id, err)
	}
	return n, nil
}

// args are the scripts' ARGV: retention in milliseconds, bits, and id's k
// bit positions (the library's hashes, modulo m).
func (b *Bloom) args(id string) []any {
	m := b.params.Bits
	locs := bloom.Locations([]byte(id), uint(b.params.Hashes))
	args := make([]any, 0, 2+len(locs))
	args = append(args, check.Millis(b.params.Retention), strconv.FormatUint(m, 10))
	for _, l := range locs {
		args = append(args, strconv.FormatUint(l%m, 10))
	}
	return args
}

func (b *Bloom) begin(ctx context.Context) (context.Context, context.CancelFunc, error) {
	if b.closed.Load() {
		return nil, nil, dedup.ErrClosed
	}
	ctx, cancel := context.WithTimeout(ctx, b.cfg.timeout)
	return ctx, cancel, nil
}

func (b *Bloom) fail(op, id string, err error) error {
	return &dedup.StoreError{Store: "redis", Addr: b.addr, Op: op, ID: id, Err: err}
}
