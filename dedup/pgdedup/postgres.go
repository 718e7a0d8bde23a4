// Package pgdedup holds the dedup store on PostgreSQL (New): a table with a
// unique id and an expiry, a durable dedup.Store and dedup.Leaser. It is a
// package of its own so that a pipeline that does not use PostgreSQL does
// not link its client. See package dedup for what each store risks.
package pgdedup

import (
	"context"
	"errors"
	"fmt"
	"net"
	"regexp"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.uber.org/zap"

	"github.com/eosflow/eosflow/dedup"
	"github.com/eosflow/eosflow/dedup/internal/check"
	"github.com/eosflow/eosflow/dedup/internal/health"
)

// Store is a dedup.Leaser, checked when compiling.
var _ dedup.Leaser = (*Store)(nil)

// DefaultTable is the table a Store keeps its ids in, when no Table option
// is given.
const DefaultTable = "eosflow_dedup"

// Option configures New.
type Option func(*config)

type config struct {
	table   string
	timeout time.Duration
	log     *zap.Logger
}

// Table names the table of ids, overriding DefaultTable ("eosflow_dedup"); it
// may be schema-qualified (schema.table). One table per pipeline keeps their
// ids apart.
func Table(name string) Option {
	return func(c *config) { c.table = name }
}

// Timeout bounds each call of the store, including the connection it may
// need to open, overriding dedup.DefaultTimeout (5s). A caller's earlier
// context deadline still wins.
func Timeout(d time.Duration) Option {
	return func(c *config) { c.timeout = d }
}

// Logger logs when PostgreSQL stops answering within Timeout (the first
// failed call, then one line every 5s while it stays silent, with the
// address and a command to check it) and when it answers again,
// overriding a no-op logger.
func Logger(l *zap.Logger) Option {
	return func(c *config) { c.log = l }
}

var tableName = regexp.MustCompile(`^([A-Za-z_][A-Za-z0-9_]*\.)?[A-Za-z_][A-Za-z0-9_]*$`)

// Store is a dedup.Store in a PostgreSQL table (id text primary key, expires_at
// timestamptz): the unique key makes INSERT ... ON CONFLICT decide which mark
// is first, and a row whose expires_at has passed counts as absent, so an
// expired id can be marked again before Purge deletes it. Expiry follows the
// database's clock, so the instances' clocks need not agree.
//
// What it risks: little that Redis risks (ids are durable and never evicted),
// but every Mark is a write to the database, so it costs a round trip and a
// commit per message, and expired rows stay until Purge deletes them. When the
// effect itself is a write to this database, put the id in that write's
// transaction instead (the article's database-constraint pattern): then the
// effect and its mark commit together and neither mark-before's loss nor
// mark-after's repeat can happen.
//
// After the server restarts, a call on a pooled connection that died with it
// can fail once (unexpected EOF); it is not retried, since a Mark whose answer
// was lost may have been applied. The next call gets a new connection.
type Store struct {
	pool   *pgxpool.Pool
	addr   string
	cfg    config
	table  string // sanitized
	closed atomic.Bool
	watch  *health.Watch // nil without a Logger

	markSQL, seenSQL, forgetSQL, purgeSQL string
	// The leases' statements (postgres_lease.go).
	claimSQL, holderSQL, completeSQL, releaseSQL string
}

// New connects to the database at url (postgres://user@host:port/db?...)
// and creates the table and its expiry index if they are missing, so that a
// wrong address or missing privileges fail at start, within Timeout.
func New(ctx context.Context, url string, opts ...Option) (*Store, error) {
	cfg := config{table: DefaultTable, timeout: dedup.DefaultTimeout}
	for _, o := range opts {
		o(&cfg)
	}
	if err := check.Timeout(cfg.timeout, dedup.DefaultTimeout); err != nil {
		return nil, err
	}
	if !tableName.MatchString(cfg.table) {
		return nil, fmt.Errorf("%w: table name %q: use letters, digits and underscores, optionally schema.table", dedup.ErrInvalid, cfg.table)
	}
	pc, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("%w: postgres url: %v: want postgres://user@host:port/db", dedup.ErrInvalid, err)
	}
	if pc.ConnConfig.ConnectTimeout == 0 || pc.ConnConfig.ConnectTimeout > cfg.timeout {
		pc.ConnConfig.ConnectTimeout = cfg.timeout
	}
	p := &Store{
		addr:  net.JoinHostPort(pc.ConnConfig.Host, strconv.Itoa(int(pc.ConnConfig.Port))),
		cfg:   cfg,
		table: pgx.Identifier(splitTable(cfg.table)).Sanitize(),
	}
	p.markSQL = `INSERT INTO ` + p.table + ` AS d (id, expires_at)
VALUES ($1, clock_timestamp() + $2 * interval '1 millisecond')
ON CONFLICT (id) DO UPDATE SET expires_at = EXCLUDED.expires_at, owner = NULL, lease_until = NULL
WHERE d.expires_at <= clock_timestamp()
RETURNING true`
	p.seenSQL = `SELECT EXISTS (SELECT 1 FROM ` + p.table + ` WHERE id = $1 AND expires_at > clock_timestamp())`
	p.forgetSQL = `DELETE FROM ` + p.table + ` WHERE id = $1`
	p.purgeSQL = `DELETE FROM ` + p.table + ` WHERE expires_at <= clock_timestamp()`
	p.leaseStatements()
	if cfg.log != nil {
		p.watch = &health.Watch{Log: cfg.log, Store: "postgres", Addr: p.addr, Timeout: cfg.timeout, Inspect: inspect(p.addr)}
		pc.ConnConfig.Tracer = answered{p.watch}
	}

	pool, err := pgxpool.NewWithConfig(ctx, pc)
	if err != nil {
		return nil, p.fail("connect", "", err)
	}
	p.pool = pool
	if err := p.createTable(ctx); err != nil {
		pool.Close()
		return nil, err
	}
	return p, nil
}

func splitTable(name string) []string {
	for i := range len(name) {
		if name[i] == '.' {
			return []string{name[:i], name[i+1:]}
		}
	}
	return []string{name}
}

// createTable creates the table and index under a transaction-scoped advisory
// lock, because concurrent CREATE TABLE IF NOT EXISTS can still collide.
func (p *Store) createTable(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, p.cfg.timeout)
	defer cancel()
	index := pgx.Identifier{splitTable(p.cfg.table)[len(splitTable(p.cfg.table))-1] + "_expires_at"}.Sanitize()
	err := pgx.BeginFunc(ctx, p.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtext($1))`, "eosflow.dedup."+p.cfg.table); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS `+p.table+` (
	id text PRIMARY KEY,
	expires_at timestamptz NOT NULL
)`); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `CREATE INDEX IF NOT EXISTS `+index+` ON `+p.table+` (expires_at)`); err != nil {
			return err
		}
		// A pending mark (Claim) has an owner and a lease; a table
		// made before leases gets the columns, its rows done marks.
		_, err := tx.Exec(ctx, `ALTER TABLE `+p.table+` ADD COLUMN IF NOT EXISTS owner text, ADD COLUMN IF NOT EXISTS lease_until timestamptz`)
		return err
	})
	if err != nil {
		return p.fail("create table "+p.table, "", err)
	}
	return nil
}

// Addr is the host:port the store talks to.
func (p *Store) Addr() string { return p.addr }

// Mark inserts the id, or takes over its row when that row has expired; a row
// that still lives makes the statement return nothing. Postgres serializes
// concurrent inserts of one key on its unique index, so exactly one of them
// gets a row back.
func (p *Store) Mark(ctx context.Context, id string, ttl time.Duration) (bool, error) {
	if err := check.Mark(id, ttl); err != nil {
		return false, err
	}
	ctx, cancel, err := p.begin(ctx)
	if err != nil {
		return false, err
	}
	defer cancel()
	var first bool
	err = p.pool.QueryRow(ctx, p.markSQL, id, check.Millis(ttl)).Scan(&first)
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, pgx.ErrNoRows):
		return false, nil
	default:
		return false, p.fail("mark", id, err)
	}
}

// Seen reports whether the id has a row that has not expired.
func (p *Store) Seen(ctx context.Context, id string) (bool, error) {
	if err := check.ID(id); err != nil {
		return false, err
	}
	ctx, cancel, err := p.begin(ctx)
	if err != nil {
		return false, err
	}
	defer cancel()
	var seen bool
	if err := p.pool.QueryRow(ctx, p.seenSQL, id).Scan(&seen); err != nil {
		return false, p.fail("seen", id, err)
	}
	return seen, nil
}

// Forget deletes the id's row.
func (p *Store) Forget(ctx context.Context, id string) error {
	if err := check.ID(id); err != nil {
		return err
	}
	ctx, cancel, err := p.begin(ctx)
	if err != nil {
		return err
	}
	defer cancel()
	if _, err := p.pool.Exec(ctx, p.forgetSQL, id); err != nil {
		return p.fail("forget", id, err)
	}
	return nil
}

// Purge deletes expired rows and returns how many. Expired rows already count
// as absent, so Purge only reclaims space; run it periodically (every few
// minutes, or a tenth of the retention) from one instance, as the article's
// TTL cleanup does for Redis sorted sets.
func (p *Store) Purge(ctx context.Context) (int64, error) {
	ctx, cancel, err := p.begin(ctx)
	if err != nil {
		return 0, err
	}
	defer cancel()
	tag, err := p.pool.Exec(ctx, p.purgeSQL)
	if err != nil {
		return 0, p.fail("purge", "", err)
	}
	return tag.RowsAffected(), nil
}

// Ping checks that the database answers, for a readiness check.
func (p *Store) Ping(ctx context.Context) error {
	ctx, cancel, err := p.begin(ctx)
	if err != nil {
		return err
	}
	defer cancel()
	if err := p.pool.Ping(ctx); err != nil {
		return p.fail("ping", "", err)
	}
	return nil
}

// Close closes the pool's connections, waiting for calls in flight; it is
// idempotent.
func (p *Store) Close() error {
	if p.closed.Swap(true) {
		return nil
	}
	p.pool.Close()
	return nil
}

func (p *Store) begin(ctx context.Context) (context.Context, context.CancelFunc, error) {
	if p.closed.Load() {
		return nil, nil, dedup.ErrClosed
	}
	ctx, cancel := context.WithTimeout(ctx, p.cfg.timeout)
	return ctx, cancel, nil
}

func (p *Store) fail(op, id string, err error) error {
	p.watch.Failed(op, err)
	return &dedup.StoreError{Store: "postgres", Addr: p.addr, Op: op, ID: id, Err: err}
}
