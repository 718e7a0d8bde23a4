// Package redisdedup holds the dedup stores on Redis: one key per id (New),
// the article's sorted set (NewSortedSet), and a Bloom filter in bitmaps
// (NewBloom). Each implements dedup.Store; New's and NewSortedSet's are
// dedup.Leasers. It is a package of its own so that a pipeline that does
// not use Redis does not link the Redis client. See package dedup for what
// each store risks.
package redisdedup

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"

	"github.com/eosflow/eosflow/dedup"
	"github.com/eosflow/eosflow/dedup/internal/check"
	"github.com/eosflow/eosflow/dedup/internal/health"
)

// DefaultPrefix starts every key a Redis store writes, when no Prefix option
// is given, so the ids share a Redis database with other data safely.
const DefaultPrefix = "eosflow:dedup:"

// What each store promises topology.Dedup, checked when compiling.
var (
	_ dedup.Leaser      = (*Store)(nil)
	_ dedup.Leaser      = (*SortedSet)(nil)
	_ dedup.Approximate = (*Bloom)(nil)
	_ dedup.Retainer    = (*Bloom)(nil)
)

// Option configures New, NewSortedSet and NewBloom.
type Option func(*config)

type config struct {
	prefix  string
	timeout time.Duration
	log     *zap.Logger
}

// Prefix starts every key with p, overriding DefaultPrefix
// ("eosflow:dedup:"): one prefix per pipeline keeps their ids apart.
func Prefix(p string) Option {
	return func(c *config) { c.prefix = p }
}

// Timeout bounds each call of a store, including the connection it may
// need to open, overriding dedup.DefaultTimeout (5s). A caller's earlier
// context deadline still wins.
func Timeout(d time.Duration) Option {
	return func(c *config) { c.timeout = d }
}

// Logger logs when Redis stops answering within Timeout (the first
// failed call, then one line every 5s while it stays silent, with the
// address and a command to check it) and when it answers again,
// overriding a no-op logger.
func Logger(l *zap.Logger) Option {
	return func(c *config) { c.log = l }
}

// Store is a dedup.Store on a Redis server: one key per id, written with
// SET key 1 NX PX ttl (the article's SETNX with expiry), so Redis expires ids
// by itself and one command both checks and marks. Every instance of a
// pipeline can share it.
//
// What it risks: Redis keeps ids in memory. Without persistence a restart of
// Redis forgets them, and with a maxmemory-policy that evicts (allkeys-*,
// volatile-*) a full Redis drops ids early; either way the next redelivery of
// a forgotten id repeats its effect. Use noeviction and size memory with
// `eosctl dedup size`. Against a failover replica that had not received the
// latest writes, a mark can be lost the same way.
type Store struct {
	client  *redis.Client
	addr    string
	cfg     config
	closed  atomic.Bool
	closeFn func() error
}

// New returns a store on the Redis at url (redis://[user:pass@]host:port/db
// or rediss:// for TLS). It does not connect yet: the first call does, and
// Ping checks the server at start.
func New(url string, opts ...Option) (*Store, error) {
	cfg := config{prefix: DefaultPrefix, timeout: dedup.DefaultTimeout}
	for _, o := range opts {
		o(&cfg)
	}
	if err := check.Timeout(cfg.timeout, dedup.DefaultTimeout); err != nil {
		return nil, err
	}
	ro, err := redis.ParseURL(url)
	if err != nil {
		// The parse error quotes the URL, password included: say what
		// is wrong without it.
		return nil, fmt.Errorf("%w: the redis url does not parse (not repeated here: it may hold a password); want redis://[user:password@]host:port/db, with a password's special characters percent-encoded", dedup.ErrInvalid)
	}
	// Bound connecting and each command by the timeout, so a server that
	// does not answer is an error, not a stalled pipeline; a refused
	// connection is reported as such instead of being retried until the
	// deadline hides the cause. Commands are not retried: a Mark whose
	// answer was lost may have been applied, and its retry would find its
	// own mark and report a repeat (under MarkBefore, a lost effect).
	ro.DialTimeout = cfg.timeout
	ro.ReadTimeout = cfg.timeout
	ro.WriteTimeout = cfg.timeout
	ro.DialerRetries = 1
	ro.MaxRetries = -1
	c := redis.NewClient(ro)
	if cfg.log != nil {
		c.AddHook(watchHook{&health.Watch{Log: cfg.log, Store: "redis", Addr: ro.Addr, Timeout: cfg.timeout, Inspect: inspect(ro.Addr)}})
	}
	return &Store{client: c, addr: ro.Addr, cfg: cfg, closeFn: c.Close}, nil
}

// Addr is the host:port the store talks to.
func (r *Store) Addr() string { return r.addr }

// Mark runs SET key 1 NX PX ttl: Redis executes one command at a time, so
// exactly one concurrent caller gets OK.
func (r *Store) Mark(ctx context.Context, id string, ttl time.Duration) (bool, error) {
	if err := check.Mark(id, ttl); err != nil {
		return false, err
	}
	ctx, cancel, err := r.begin(ctx)
	if err != nil {
		return false, err
	}
	defer cancel()
	err = r.client.SetArgs(ctx, r.cfg.prefix+id, "1", redis.SetArgs{Mode: "NX", TTL: time.Duration(check.Millis(ttl)) * time.Millisecond}).Err()
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, redis.Nil):
		return false, nil
	default:
		return false, r.fail("mark", id, err)
	}
}

// Seen runs EXISTS key; Redis never reports an expired key.
func (r *Store) Seen(ctx context.Context, id string) (bool, error) {
	if err := check.ID(id); err != nil {
		return false, err
	}
	ctx, cancel, err := r.begin(ctx)
	if err != nil {
		return false, err
	}
	defer cancel()
	n, err := r.client.Exists(ctx, r.cfg.prefix+id).Result()
	if err != nil {
		return false, r.fail("seen", id, err)
	}
	return n == 1, nil
}

// Forget runs DEL key.
func (r *Store) Forget(ctx context.Context, id string) error {
	if err := check.ID(id); err != nil {
		return err
	}
	ctx, cancel, err := r.begin(ctx)
	if err != nil {
		return err
	}
	defer cancel()
	if err := r.client.Del(ctx, r.cfg.prefix+id).Err(); err != nil {
		return r.fail("forget", id, err)
	}
	return nil
}

// Ping checks that the server answers, for a readiness check at start.
func (r *Store) Ping(ctx context.Context) error {
	ctx, cancel, err := r.begin(ctx)
	if err != nil {
		return err
	}
	defer cancel()
	if err := r.client.Ping(ctx).Err(); err != nil {
		return r.fail("ping", "", err)
	}
	return nil
}

// Close closes the connections; it is idempotent.
func (r *Store) Close() error {
	if r.closed.Swap(true) {
		return nil
	}
	return r.closeFn()
}

func (r *Store) begin(ctx context.Context) (context.Context, context.CancelFunc, error) {
	if r.closed.Load() {
		return nil, nil, dedup.ErrClosed
	}
	ctx, cancel := context.WithTimeout(ctx, r.cfg.timeout)
	return ctx, cancel, nil
}

func (r *Store) fail(op, id string, err error) error {
	return &dedup.StoreError{Store: "redis", Addr: r.addr, Op: op, ID: id, Err: err}
}
