package dedup

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/bits-and-blooms/bloom/v3"
	"github.com/redis/go-redis/v9"
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

// BloomOptions size the filter of NewRedisBloom. Every instance sharing a
// filter must use the same ones.
type BloomOptions struct {
	// Entries is how many ids are marked per Retention: each generation
	// is sized for that many. Count the ids marked in the busiest
	// Retention (rate × Retention); more than that and the false-positive
	// rate climbs fast (twice as many: about 12 times the rate at 1%).
	Entries int64
	// FalsePositiveRate is the chance that an id never marked is reported
	// as seen, such as 0.01. Each generation is sized for half of it, so an
	// id checked against two full generations stays within this rate.
	FalsePositiveRate float64
	// Retention is how long an id is remembered at least; it is forgotten
	// within twice that. Mark refuses a ttl longer than it.
	Retention time.Duration
}

// BloomParams describe a RedisBloom filter, so that its false-positive rate
// and its memory can be stated and checked.
type BloomParams struct {
	// Entries, FalsePositiveRate and Retention are the configured
	// BloomOptions.
	Entries           int64
	FalsePositiveRate float64
	Retention         time.Duration
	// Bits (m) and Hashes (k) are one generation's filter, sized for
	// Entries at FalsePositiveRate/2: an id sets or checks Hashes bits.
	Bits   uint64
	Hashes int
	// Bytes is one generation's bitmap, ⌈Bits/8⌉. Redis holds two
	// generations at most: see MemoryBytes.
	Bytes int64
}

// MemoryBytes is what the filter takes in Redis at most, two generations'
// bitmaps, for the maxmemory setting. Redis's allocator (jemalloc) rounds
// each bitmap up to its size class: up to a quarter more.
func (p BloomParams) MemoryBytes() int64 { return RedisBloomGenerations * p.Bytes }

// RedisBloomGenerations is how many filters a RedisBloom keeps in Redis at
// once: the current time slice's and the one before.
const RedisBloomGenerations = 2

// MaxRedisBloomBits is the largest generation one Redis string holds:
// SETBIT takes offsets below 2³² (a 512 MB string).
const MaxRedisBloomBits = 1 << 32

// SizeBloom sizes one generation of a RedisBloom for entries ids at
// false-positive rate fp, without the checks of BloomOptions.Params: for
// capacity planning, where a size beyond Redis's limit is an answer too.
// A generation is sized for half the rate, as an id is checked against
// two generations and each may say "seen" wrongly: 1 - (1 - fp/2)² < fp.
// m and k come from the filter library (bloom.EstimateParameters), the
// target lowered until a full generation's rate, (1 - e^(-kn/m))^k, is at
// most fp/2: the library's whole k costs a little over its formula's.
func SizeBloom(entries, fp float64) BloomParams {
	// Clamp before converting: a float64 beyond uint's range converts
	// to an undefined value, and no Redis string holds such a filter.
	n := uint(min(max(math.Ceil(entries), 1), 1<<52))
	var m, k uint
	// A few steps suffice; the bound stops a fp outside (0, 1), which
	// Params refuses first.
	target := fp / 2
	for range 1000 {
		m, k = bloom.EstimateParameters(n, target)
		if FullRate(float64(m), int(k), float64(n)) <= fp/2 {
			break
		}
		target *= 0.995
	}
	return BloomParams{Entries: int64(n), FalsePositiveRate: fp, Bits: uint64(m), Hashes: int(k), Bytes: int64((m + 7) / 8)}
}

// FullRate is the false-positive rate of a Bloom filter of m bits and k
// hashes holding n ids: (1 - e^(-kn/m))^k.
func FullRate(m float64, k int, n float64) float64 {
	return math.Pow(1-math.Exp(-float64(k)*n/m), float64(k))
}

// Params validates o and computes the filter it describes, without a
// server: for sizing a Redis before building the store.
func (o BloomOptions) Params() (BloomParams, error) {
	switch {
	case o.Entries <= 0:
		return BloomParams{}, fmt.Errorf("%w: bloom entries %d: give the ids marked per retention window (rate × retention), such as 10000000", ErrInvalid, o.Entries)
	case !(o.FalsePositiveRate > 0 && o.FalsePositiveRate < 1):
		return BloomParams{}, fmt.Errorf("%w: bloom false-positive rate %v: must be between 0 and 1, such as 0.01 (1 in 100 new ids reported as seen)", ErrInvalid, o.FalsePositiveRate)
	case o.Retention < MinTTL:
		return BloomParams{}, fmt.Errorf("%w: bloom retention %v: use at least %v; keep ids twice the longest redelivery window", ErrInvalid, o.Retention, MinTTL)
	}
	p := SizeBloom(float64(o.Entries), o.FalsePositiveRate)
	if p.Bits > MaxRedisBloomBits {
		return BloomParams{}, fmt.Errorf("%w: bloom filter of %d entries at false-positive rate %v needs %.0f MB per generation, beyond the 512 MB a Redis string holds: lower Entries (a shorter Retention) or raise FalsePositiveRate",
			ErrInvalid, o.Entries, o.FalsePositiveRate, math.Ceil(float64(p.Bytes)/1e6))
	}
	p.Entries, p.Retention = o.Entries, o.Retention
	return p, nil
}

// RedisBloom is a Store whose ids live in a Bloom filter in Redis bitmaps,
// shared by every instance (after a rebalance another instance sees the
// partition's redeliveries, so a filter in one process would miss them).
// Its memory is fixed, whatever the ids' length: at a 1% false-positive
// rate, two generations of 11 bits for each id marked per Retention, about
// 2.8 bytes, where the Redis store takes 104 bytes beyond each id's own.
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
// the same reason Forget fails (ErrCannotForget): mark after the effect.
// What Redis risks applies too (a restart without persistence, or an
// evicting maxmemory-policy, forgets every id); size maxmemory with
// Params().MemoryBytes() and use noeviction. The scripts build the
// generation keys from the server's clock, so the filter needs one Redis
// server, not Redis Cluster.
type RedisBloom struct {
	client  *redis.Client
	addr    string
	key     string
	params  BloomParams
	cfg     redisConfig
	closed  atomic.Bool
	closeFn func() error
}

// NewRedisBloom returns a Bloom filter store named name on the Redis at url
// (redis://host:port/db): its generations are the keys prefix + name +
// ":" + a generation number. Options are those of NewRedis. It does not
// connect yet.
func NewRedisBloom(url, name string, o BloomOptions, opts ...RedisOption) (*RedisBloom, error) {
	if name == "" {
		return nil, fmt.Errorf("%w: empty bloom filter name: name one per pipeline, such as %q", ErrInvalid, "my-app")
	}
	p, err := o.Params()
	if err != nil {
		return nil, err
	}
	r, err := NewRedis(url, opts...)
	if err != nil {
		return nil, err
	}
	return &RedisBloom{client: r.client, addr: r.addr, key: r.cfg.prefix + name, params: p, cfg: r.cfg, closeFn: r.client.Close}, nil
}

// Addr is the host:port the store talks to.
func (b *RedisBloom) Addr() string { return b.addr }

// Params describes the filter: the configured options, its bits and hashes
// per generation, its memory.
func (b *RedisBloom) Params() BloomParams { return b.params }

// FalsePositiveRate is the configured chance that an id never marked is
// reported as seen. Its presence tells topology.Dedup that the store is
// approximate.
func (b *RedisBloom) FalsePositiveRate() float64 { return b.params.FalsePositiveRate }

// Retention is how long an id is remembered at least, the longest ttl
// Mark accepts.
func (b *RedisBloom) Retention() time.Duration { return b.params.Retention }

// Mark sets id's bits in the current generation unless all of them are
// set in the current or the previous one; one script does both, so
// exactly one concurrent caller sets them. ttl must not exceed the
// Retention; the id is kept between Retention and twice that, whatever
// ttl says.
func (b *RedisBloom) Mark(ctx context.Context, id string, ttl time.Duration) (bool, error) {
	if err := check(id, ttl); err != nil {
		return false, err
	}
	if ttl > b.params.Retention {
		return false, fmt.Errorf("%w: ttl %v for id %q is longer than the bloom filter's retention %v: pass a ttl of at most %v (topology.DedupRetention), or build the store with a Retention of at least %v",
			ErrInvalid, ttl, id, b.params.Retention, b.params.Retention, ttl)
	}
	n, err := b.run(ctx, "mark", id, bloomMark)
	return n == 1, err
}

// Seen reports whether all of id's bits are set in the current or the
// previous generation: true for every id marked within the Retention, and
// for about FalsePositiveRate of the others.
func (b *RedisBloom) Seen(ctx context.Context, id string) (bool, error) {
	if err := checkID(id); err != nil {
		return false, err
	}
	n, err := b.run(ctx, "seen", id, bloomSeen)
	return n == 1, err
}

// Forget returns an error wrapping ErrCannotForget: clearing id's bits
// would clear other ids' too.
func (b *RedisBloom) Forget(ctx context.Context, id string) error {
	if err := checkID(id); err != nil {
		return err
	}
	if b.closed.Load() {
		return ErrClosed
	}
	return fmt.Errorf("%w: id %q: its bits are shared with other ids; mark after the effect succeeded (topology.MarkAfter) instead of forgetting a failed one, or use an exact store (NewRedis, NewPostgres)", ErrCannotForget, id)
}

// Ping checks that the server answers, for a readiness check at start.
func (b *RedisBloom) Ping(ctx context.Context) error {
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
func (b *RedisBloom) Close() error {
	if b.closed.Swap(true) {
		return nil
	}
	return b.closeFn()
}

// run runs script s for id with the filter's shape and id's bit positions.
func (b *RedisBloom) run(ctx context.Context, op, id string, s *redis.Script) (int64, error) {
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
func (b *RedisBloom) args(id string) []any {
	m := b.params.Bits
	locs := bloom.Locations([]byte(id), uint(b.params.Hashes))
	args := make([]any, 0, 2+len(locs))
	args = append(args, millis(b.params.Retention), strconv.FormatUint(m, 10))
	for _, l := range locs {
		args = append(args, strconv.FormatUint(l%m, 10))
	}
	return args
}

func (b *RedisBloom) begin(ctx context.Context) (context.Context, context.CancelFunc, error) {
	if b.closed.Load() {
		return nil, nil, ErrClosed
	}
	ctx, cancel := context.WithTimeout(ctx, b.cfg.timeout)
	return ctx, cancel, nil
}

func (b *RedisBloom) fail(op, id string, err error) error {
	return &StoreError{Store: "redis", Addr: b.addr, Op: op, ID: id, Err: err}
}
