package pgsink

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"

	"github.com/eosflow/eosflow/config"
	"github.com/eosflow/eosflow/eos"
	"github.com/eosflow/eosflow/internal/kafkautil"
)

// DefaultOffsetsTable is the table the input offsets and fencing tokens
// live in, when no OffsetsTable option is given.
const DefaultOffsetsTable = "eosflow_offsets"

// createLock is the advisory lock the instances take to create the tables.
const createLock int64 = 0x656f73666c6f77 // "eosflow"

// DefaultBatchTimeout bounds one batch's database transaction, when no
// BatchTimeout option is given.
const DefaultBatchTimeout = 30 * time.Second

// Batch is what a Handler writes: the records of one poll, in offset order
// per partition, from the partitions this instance holds.
type Batch struct {
	Records []*kgo.Record

	s          *Sink
	unchanged  int
	deadLetter int
}

// Unchanged counts n statements of the batch that changed no row: a
// duplicate that ON CONFLICT DO NOTHING skipped, a stale version. They are
// reported in Stats.Unchanged once the batch commits.
func (b *Batch) Unchanged(n int) { b.unchanged += n }

// DeadLetter writes r and why it failed into the dead-letter table, in the
// batch's transaction, so the record is kept exactly once with the rows
// and offsets. Without a DeadLetters option it returns an error naming the
// record, which fails the batch.
func (b *Batch) DeadLetter(ctx context.Context, tx pgx.Tx, r *kgo.Record, cause error) error {
	if b.s.deadSQL == "" {
		return fmt.Errorf("record %s/%d@%d: %w (set pgsink.DeadLetters to keep such records in a table instead of failing)", r.Topic, r.Partition, r.Offset, cause)
	}
	if _, err := tx.Exec(ctx, b.s.deadSQL, b.s.cfg.AppID, r.Topic, r.Partition, r.Offset, r.Key, r.Value, cause.Error()); err != nil {
		return err
	}
	b.deadLetter++
	return nil
}

// Handler writes a batch's rows in tx, the transaction its offsets commit
// in. It must not commit or roll back tx. An error rolls the batch back: a
// lost connection, a serialization failure or a deadlock is retried from
// the stored offsets; any other error stops Run.
type Handler func(ctx context.Context, tx pgx.Tx, b *Batch) error

// Stats counts what a Sink did; every count is taken when its batch
// commits.
type Stats struct {
	Records      uint64 // input records committed
	Batches      uint64 // database transactions committed
	Unchanged    uint64 // statements that changed no row (Batch.Unchanged)
	DeadLettered uint64 // records written to the dead-letter table
	Claims       uint64 // partitions claimed (each assignment bumps the partition's token)
	Fenced       uint64 // batches rolled back because another instance had claimed a partition
	Retries      uint64 // batches rolled back by a database failure and redone
	// LostAnswers counts batches whose commit returned an error (the
	// connection died) although they had committed, as the offsets table
	// showed when read back; they are counted committed, not redone.
	LostAnswers uint64
}

// Option configures New.
type Option interface{ apply(*Sink) }

type optFunc func(*Sink)

func (f optFunc) apply(s *Sink) { f(s) }

// OffsetsTable names the offsets table, overriding DefaultOffsetsTable; it
// may be schema-qualified. Rows are keyed by the group (config app_id), so
// pipelines can share it.
func OffsetsTable(name string) Option { return optFunc(func(s *Sink) { s.table = name }) }

// DeadLetters names a table (created if missing) that Batch.DeadLetter
// writes records into, overriding the default of failing the batch.
func DeadLetters(table string) Option { return optFunc(func(s *Sink) { s.deadTable = table }) }

// BatchTimeout bounds each batch's transaction, overriding
// DefaultBatchTimeout: past it the batch rolls back and is redone, and
// recovery_timeout of such failures stops Run.
func BatchTimeout(d time.Duration) Option { return optFunc(func(s *Sink) { s.batchTimeout = d }) }

// Logger sets the structured logger, overriding a no-op logger.
func Logger(l *zap.Logger) Option { return optFunc(func(s *Sink) { s.log = l }) }

// ClientOpts adds franz-go options (a dialer, hooks). They are applied
// first, so none can switch off what the sink depends on: the group,
// read_committed, manual commits and the offsets from the database.
func ClientOpts(opts ...kgo.Opt) Option {
	return optFunc(func(s *Sink) { s.extra = append(s.extra, opts...) })
}

// Sink consumes topics as the consumer group cfg.AppID and writes them into
// Postgres with a Handler, exactly once. See the package documentation.
type Sink struct {
	cfg          config.Config
	pool         *pgxpool.Pool
	topics       []string
	handle       Handler
	table        string
	deadTable    string
	batchTimeout time.Duration
	log          *zap.Logger
	extra        []kgo.Opt

	addr                                  string
	tableSQL                              string
	claimSQL, commitSQL, readSQL, deadSQL string

	mu       sync.Mutex
	owned    map[tp]*claim    // partitions claimed and not revoked
	fencedAt map[tp]time.Time // partitions fenced in the table but not yet revoked by the group
	claimErr error            // a claim that retries could not heal; Run returns it
	failing  time.Time        // when the batches began to fail, zero while they commit
	failures int
	adm      *kadm.Client // Run's admin client
	life     sync.Mutex   // orders Run's start against Close
	closed   chan struct{}
	once     sync.Once
	wg       sync.WaitGroup

	records, batches, unchanged, dead, claims, fenced, retries, lost atomic.Uint64
}

type tp struct {
	topic     string
	partition int32
}

// claim is this instance's hold on a partition: the token its commits must
// match, and the offset the next record must have at least.
type claim struct {
	token int64
	next  int64
}

var identifier = regexp.MustCompile(`^([A-Za-z_][A-Za-z0-9_]*\.)?[A-Za-z_][A-Za-z0-9_]*$`)

// New checks its arguments and returns a Sink; it does not connect yet.
// cfg gives the brokers, security, group (app_id), instance id (static
// membership), max_batch_records, session and rebalance timeouts and
// recovery_timeout; its guarantee is not used: the database transaction
// is the commit. pool is the database the handler writes to.
func New(cfg config.Config, pool *pgxpool.Pool, topics []string, h Handler, opts ...Option) (*Sink, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if pool == nil || h == nil || len(topics) == 0 {
		return nil, fmt.Errorf("%w: New needs a pool, at least one topic and a handler", ErrInvalid)
	}
	s := &Sink{cfg: cfg, pool: pool, topics: slices.Clone(topics), handle: h, table: DefaultOffsetsTable,
		batchTimeout: DefaultBatchTimeout, log: zap.NewNop(), owned: map[tp]*claim{}, fencedAt: map[tp]time.Time{}, closed: make(chan struct{})}
	for _, o := range opts {
		o.apply(s)
	}
	for _, t := range []string{s.table, s.deadTable} {
		if t != "" && !identifier.MatchString(t) {
			return nil, fmt.Errorf("%w: table name %q: use letters, digits and underscores, optionally schema.table", ErrInvalid, t)
		}
	}
	if s.batchTimeout <= 0 {
		return nil, fmt.Errorf("%w: BatchTimeout %s: want a positive duration, e.g. 30s", ErrInvalid, s.batchTimeout)
	}
	pc := pool.Config().ConnConfig
	s.addr = net.JoinHostPort(pc.Host, strconv.Itoa(int(pc.Port)))
	t := quote(s.table)
	s.tableSQL = `CREATE TABLE IF NOT EXISTS ` + t + ` (
	group_id text NOT NULL,
	topic text NOT NULL,
	partition integer NOT NULL,
	next_offset bigint NOT NULL,
	token bigint NOT NULL,
	owner text NOT NULL,
	updated_at timestamptz NOT NULL DEFAULT now(),
	PRIMARY KEY (group_id, topic, partition))`
	s.claimSQL = `INSERT INTO ` + t + ` AS o (group_id, topic, partition, next_offset, token, owner)
VALUES ($1, $2, $3, -1, 1, $4)
ON CONFLICT (group_id, topic, partition) DO UPDATE SET token = o.token + 1, owner = EXCLUDED.owner, updated_at = now()
RETURNING next_offset, token`
	s.commitSQL = `UPDATE ` + t + ` SET next_offset = $5, updated_at = now()
WHERE group_id = $1 AND topic = $2 AND partition = $3 AND token = $4 AND next_offset <= $6`
	s.readSQL = `SELECT topic, partition, next_offset, token FROM ` + t + ` WHERE group_id = $1`
	if s.deadTable != "" {
		d := quote(s.deadTable)
		s.tableSQL += `;
CREATE TABLE IF NOT EXISTS ` + d + ` (
	group_id text NOT NULL,
	topic text NOT NULL,
	partition integer NOT NULL,
	"offset" bigint NOT NULL,
	key bytea,
	value bytea,
	error text NOT NULL,
	at timestamptz NOT NULL DEFAULT now(),
	PRIMARY KEY (group_id, topic, partition, "offset"))`
		s.deadSQL = `INSERT INTO ` + d + ` (group_id, topic, partition, "offset", key, value, error) VALUES ($1, $2, $3, $4, $5, $6, $7)`
	}
	return s, nil
}

// Stats returns what the Sink did so far.
func (s *Sink) Stats() Stats {
	return Stats{Records: s.records.Load(), Batches: s.batches.Load(), Unchanged: s.unchanged.Load(),
		DeadLettered: s.dead.Load(), Claims: s.claims.Load(), Fenced: s.fenced.Load(), Retries: s.retries.Load(), LostAnswers: s.lost.Load()}
}

// Close stops Run and waits for it: the batch in hand commits or rolls
// back first (within batch_timeout, or recovery_timeout while the
// database is down), so its outcome is known and counted. It is idempotent.
func (s *Sink) Close() {
	s.life.Lock()
	s.once.Do(func() { close(s.closed) })
	s.life.Unlock()
	s.wg.Wait()
}

// inspect is the query that shows the group's stored offsets.
func (s *Sink) inspect() string {
	return fmt.Sprintf("SELECT * FROM %s WHERE group_id = '%s'", quote(s.table), strings.ReplaceAll(s.cfg.AppID, "'", "''"))
}

func (s *Sink) dbError(op, batch string, err error) error {
	return &DatabaseError{Addr: s.addr, Op: op, Batch: batch, Err: err, Inspect: s.inspect()}
}

// Run consumes and writes until ctx ends or Close is called (nil), or a
// failure that retries cannot heal. It checks the brokers, topics and
// database first, so a wrong address fails within connect_timeout.
func (s *Sink) Run(ctx context.Context) error {
	s.life.Lock()
	select {
	case <-s.closed:
		s.life.Unlock()
		return nil
	default:
	}
	s.wg.Add(1) // under life: a Close that began first sees it and waits
	s.life.Unlock()
	defer s.wg.Done()
	// Close ends polling; the batch in hand keeps ctx, so a commit sent
	// to the database is not cut off with its outcome unknown.
	polling, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-s.closed:
			cancel()
		case <-polling.Done():
		}
	}()

	if err := s.preflight(ctx); err != nil {
		return err
	}
	opts, err := kafkautil.ConnOptions(s.cfg, s.extra...)
	if err != nil {
		return err
	}
	// The claims check stored offsets against the partitions' ends.
	admin, err := kgo.NewClient(opts...)
	if err != nil {
		return err
	}
	defer admin.Close()
	s.adm = kadm.NewClient(admin)
	opts = append(opts,
		kgo.ConsumerGroup(s.cfg.AppID),
		kgo.ConsumeTopics(s.topics...),
		// A stored offset the log no longer holds resumes at the
		// earliest record still there, never at the end.
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.SessionTimeout(s.cfg.SessionTimeout),
		kgo.RebalanceTimeout(s.cfg.RebalanceTimeout),
		kgo.InstanceID(s.cfg.InstanceID),
		kgo.DisableAutoCommit(),
		// A rebalance waits until the batch in hand committed or rolled
		// back, so partitions change hands between transactions.
		kgo.BlockRebalanceOnPoll(),
		kgo.AdjustFetchOffsetsFn(s.claimPartitions),
		kgo.OnPartitionsRevoked(s.release),
		kgo.OnPartitionsLost(s.release),
		kgo.MaxBufferedRecords(2*s.cfg.MaxBatchRecords+1000),
		kgo.MaxBufferedBytes(kafkautil.MaxBufferedBytes),
	)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return err
	}
	defer func() {
		// A poll that ended with ctx may have left a rebalance blocked;
		// leaving the group in Close waits for it.
		cl.AllowRebalance()
		cl.Close()
		s.leaveGroup()
	}()
	return s.loop(ctx, polling, cl)
}

// leaveGroup takes this static member out of the group when
// leave_group_on_close asks for it, so a scale-down moves its partitions
// at once instead of after session_timeout.
func (s *Sink) leaveGroup() {
	if !s.cfg.LeaveGroupOnClose {
		return
	}
	opts, err := kafkautil.ConnOptions(s.cfg, s.extra...)
	if err != nil {
		return
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.ConnectTimeout)
	defer cancel()
	resp, err := kadm.NewClient(cl).LeaveGroup(ctx, kadm.LeaveGroup(s.cfg.AppID).InstanceIDs(s.cfg.InstanceID).Reason("eosflow pgsink shutdown"))
	if err == nil {
		err = resp.Error()
	}
	if err != nil {
		s.log.Warn("could not leave the group; its partitions move after session_timeout", zap.Error(err))
	}
}

// preflight fails fast on an unreachable broker or database, a missing
// topic, and tables that cannot be made.
func (s *Sink) preflight(ctx context.Context) error {
	opts, err := kafkautil.ConnOptions(s.cfg, s.extra...)
	if err != nil {
		return err
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return err
	}
	defer cl.Close()
	pctx, cancel := context.WithTimeout(ctx, s.cfg.ConnectTimeout)
	defer cancel()
	if err := cl.Ping(pctx); err != nil {
		return fmt.Errorf("%w: no answer from %s within %s (%v); check brokers (EOS_BROKERS) and that Kafka is running",
			eos.ErrUnreachable, strings.Join(s.cfg.Brokers, ","), s.cfg.ConnectTimeout, err)
	}
	details, err := kadm.NewClient(cl).ListTopics(pctx, s.topics...)
	if err != nil {
		return fmt.Errorf("pgsink: listing topics on %s: %w", strings.Join(s.cfg.Brokers, ","), err)
	}
	var missing []string
	for _, t := range s.topics {
		if d, ok := details[t]; !ok || errors.Is(d.Err, kerr.UnknownTopicOrPartition) {
			missing = append(missing, t)
		} else if d.Err != nil {
			return fmt.Errorf("pgsink: topic %s: %w", t, d.Err)
		}
	}
	if len(missing) > 0 {
		return &eos.MissingTopicsError{Topics: missing, Brokers: s.cfg.Brokers}
	}
	// A database that is restarting gets connect_timeout to answer.
	// Instances starting together take turns: two concurrent CREATE
	// TABLE IF NOT EXISTS of one new table make one fail (23505 on
	// pg_type).
	for {
		err := pgx.BeginFunc(pctx, s.pool, func(tx pgx.Tx) error {
			if _, err := tx.Exec(pctx, "SELECT pg_advisory_xact_lock($1)", createLock); err != nil {
				return err
			}
			_, err := tx.Exec(pctx, s.tableSQL)
			return err
		})
		if err == nil {
			break
		}
		if !transient(err) || pctx.Err() != nil {
			return s.dbError("create tables", "", err)
		}
		s.log.Warn("waiting for postgres", zap.String("op", "create tables"), zap.String("postgres", s.addr), zap.Error(err))
		select {
		case <-pctx.Done():
		case <-time.After(200 * time.Millisecond):
		}
	}
	return nil
}

// claimPartitions runs when the group assigns partitions, before they are
// fetched: it bumps each one's token in the offsets table, which fences
// the previous owner's commits, and starts each where the table says (at
// the start of the partition when the table has no row yet). Kafka's
// committed offsets are ignored.
func (s *Sink) claimPartitions(ctx context.Context, fetched map[string]map[int32]kgo.Offset) (map[string]map[int32]kgo.Offset, error) {
	owner := s.cfg.InstanceID
	if owner == "" {
		owner = "pid-" + strconv.Itoa(os.Getpid())
	}
	var claimed map[tp]*claim
	err := s.retry(ctx, "claim partitions", func() string { return describe(fetched) }, func(ctx context.Context) error {
		claimed = map[tp]*claim{}
		return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
			b := &pgx.Batch{}
			var order []tp
			for topic, ps := range fetched {
				for p := range ps {
					order = append(order, tp{topic, p})
					b.Queue(s.claimSQL, s.cfg.AppID, topic, p, owner)
				}
			}
			res := tx.SendBatch(ctx, b)
			for _, k := range order {
				c := &claim{}
				if err := res.QueryRow().Scan(&c.next, &c.token); err != nil {
					res.Close()
					return err
				}
				claimed[k] = c
			}
			return res.Close()
		})
	})
	if err != nil {
		if ctx.Err() == nil {
			s.mu.Lock()
			s.claimErr = err
			s.mu.Unlock()
		}
		return nil, err
	}
	s.log.Info("claimed partitions", zap.String("group", s.cfg.AppID), zap.String("partitions", describeClaims(claimed)))
	if err := s.checkEnds(ctx, claimed); err != nil {
		if ctx.Err() == nil {
			s.mu.Lock()
			s.claimErr = err
			s.mu.Unlock()
		}
		return nil, err
	}
	out := make(map[string]map[int32]kgo.Offset, len(fetched))
	s.mu.Lock()
	defer s.mu.Unlock()
	for k, c := range claimed {
		if out[k.topic] == nil {
			out[k.topic] = map[int32]kgo.Offset{}
		}
		if c.next < 0 {
			out[k.topic][k.partition] = kgo.NewOffset().AtStart()
			c.next = 0
		} else {
			out[k.topic][k.partition] = kgo.NewOffset().At(c.next)
		}
		s.owned[k] = c
		s.claims.Add(1)
	}
	return out, nil
}

// checkEnds refuses a stored offset past its partition's end: the topic
// was deleted and made again, or the table belongs to another cluster.
// Reading on from there would skip every record below it.
func (s *Sink) checkEnds(ctx context.Context, claimed map[tp]*claim) error {
	topics := map[string]bool{}
	for k, c := range claimed {
		if c.next > 0 {
			topics[k.topic] = true
		}
	}
	if len(topics) == 0 {
		return nil
	}
	names := make([]string, 0, len(topics))
	for t := range topics {
		names = append(names, t)
	}
	ends, err := s.adm.ListEndOffsets(ctx, names...)
	if err != nil { // a check, not a need: the claim stands
		s.log.Warn("could not list end offsets to check the stored offsets", zap.Strings("topics", names), zap.Error(err))
		return nil
	}
	for k, c := range claimed {
		e, ok := ends.Lookup(k.topic, k.partition)
		if c.next > 0 && ok && e.Err == nil && c.next > e.Offset {
			return s.dbError("claim partitions", fmt.Sprintf("%s/%d", k.topic, k.partition),
				fmt.Errorf("the stored offset %d is past the partition's end %d: the topic was deleted and made again, or the table holds another cluster's offsets; reading on would skip every record below %d; if the topic is new, reset it with: UPDATE %s SET next_offset = -1 WHERE group_id = '%s' AND topic = '%s'",
					c.next, e.Offset, c.next, quote(s.table), s.cfg.AppID, k.topic))
		}
	}
	return nil
}

// release forgets revoked or lost partitions: their records still buffered
// are dropped, and a commit to them would be fenced anyway.
func (s *Sink) release(_ context.Context, _ *kgo.Client, gone map[string][]int32) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for topic, ps := range gone {
		for _, p := range ps {
			delete(s.owned, tp{topic, p})
			delete(s.fencedAt, tp{topic, p})
		}
	}
}

// loop polls, writes and commits batches until ctx or polling ends; a
// batch in hand is finished under ctx.
func (s *Sink) loop(ctx, polling context.Context, cl *kgo.Client) error {
	for {
		// A poll ends within a second even without records, so the
		// checks below run while the input is idle.
		pctx, cancel := context.WithTimeout(polling, time.Second)
		fetches := cl.PollRecords(pctx, s.cfg.MaxBatchRecords)
		cancel()
		if polling.Err() != nil {
			return nil
		}
		var fatal error
		fetches.EachError(func(t string, p int32, err error) {
			if errors.Is(err, context.DeadlineExceeded) {
				return // the idle poll's own bound
			}
			if kafkautil.IsFatal(err) && fatal == nil {
				fatal = fmt.Errorf("pgsink: consuming %s/%d: %w", t, p, err)
			}
			s.log.Warn("fetch error", zap.String("topic", t), zap.Int32("partition", p), zap.Error(err))
		})
		if fatal != nil {
			return fatal
		}
		if err := s.stuck(); err != nil {
			return err
		}
		recs, from := s.take(fetches.Records())
		if len(recs) > 0 {
			if err := s.commit(ctx, cl, recs, from); err != nil {
				if ctx.Err() != nil {
					return nil
				}
				return err
			}
		}
		cl.AllowRebalance()
	}
}

// take keeps the records of claimed partitions at or past each one's next
// offset (a rewind can leave older ones buffered), and the first offset
// per partition.
func (s *Sink) take(all []*kgo.Record) ([]*kgo.Record, map[tp]int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	recs := all[:0]
	from := map[tp]int64{}
	for _, r := range all {
		k := tp{r.Topic, r.Partition}
		c := s.owned[k]
		if c == nil || r.Offset < c.next {
			continue
		}
		if _, ok := from[k]; !ok {
			from[k] = r.Offset
		}
		recs = append(recs, r)
	}
	return recs, from
}

// errFenced means the stored offset of a partition of the batch was not
// this instance's to move: another instance claimed the partition, or the
// offset is past the batch's first record (an earlier commit landed after
// its answer was given up on).
type errFenced struct{ parts []tp }

func (e *errFenced) Error() string {
	return fmt.Sprintf("the offsets of partitions %s changed under the batch", describeTPs(e.parts))
}

// commit writes recs and advances the offsets in one transaction. A
// fenced partition is released; a transient failure rewinds the batch's
// partitions to the stored offsets and returns nil, so the records are
// polled again.
func (s *Sink) commit(ctx context.Context, cl *kgo.Client, recs []*kgo.Record, from map[tp]int64) error {
	next := map[tp]int64{}
	for _, r := range recs {
		next[tp{r.Topic, r.Partition}] = r.Offset + 1
	}
	tokens := s.tokens(next)
	b := &Batch{Records: recs, s: s}
	tctx, cancel := context.WithTimeout(ctx, s.batchTimeout)
	err := pgx.BeginFunc(tctx, s.pool, func(tx pgx.Tx) error { return s.write(tctx, tx, b, next, from, tokens) })
	cancel()
	if err != nil {
		return s.settle(ctx, cl, b, next, describeBatch(from, next), err)
	}
	s.mu.Lock()
	for k, n := range next {
		if c := s.owned[k]; c != nil && c.token == tokens[k] {
			c.next = n
		}
	}
	s.mu.Unlock()
	s.committed(ctx, cl, b, next)
	return nil
}

// tokens is, per partition of next, the token of this instance's claim,
// or -1 for one released meanwhile: its commit is fenced.
func (s *Sink) tokens(next map[tp]int64) map[tp]int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	tokens := make(map[tp]int64, len(next))
	for k := range next {
		tokens[k] = -1
		if c := s.owned[k]; c != nil {
			tokens[k] = c.token
		}
	}
	return tokens
}

// write is a batch's database transaction: the offsets first, each moved
// from from to next only under this instance's claim token (their row
// locks make a concurrent claim wait for it, and a fenced batch does no
// work), then the user's handler.
func (s *Sink) write(ctx context.Context, tx pgx.Tx, b *Batch, next, from, tokens map[tp]int64) error {
	pb := &pgx.Batch{}
	order := make([]tp, 0, len(next))
	for k, n := range next {
		order = append(order, k)
		pb.Queue(s.commitSQL, s.cfg.AppID, k.topic, k.partition, tokens[k], n, from[k])
	}
	res := tx.SendBatch(ctx, pb)
	var fenced []tp
	for _, k := range order {
		tag, err := res.Exec()
		if err != nil {
			res.Close()
			return err
		}
		if tag.RowsAffected() == 0 {
			fenced = append(fenced, k)
		}
	}
	if err := res.Close(); err != nil {
		return err
	}
	if len(fenced) > 0 {
		return &errFenced{fenced}
	}
	b.unchanged, b.deadLetter = 0, 0
	return s.handle(ctx, tx, b)
}

// settle acts on a batch's failed commit: a fenced one reads the offsets
// table again; one whose outcome is unknown reads the stored offsets,
// which show whether it committed; one that rolled back is redone after
// a backoff, until recovery_timeout.
func (s *Sink) settle(ctx context.Context, cl *kgo.Client, b *Batch, next map[tp]int64, batch string, err error) error {
	var fe *errFenced
	if errors.As(err, &fe) {
		s.fenced.Add(1)
		s.log.Warn("the offsets table changed under the batch (another instance claimed partitions, or an earlier commit of this one landed late); reading it again",
			zap.String("batch", batch), zap.String("partitions", describeTPs(fe.parts)))
		done, err := s.rewind(ctx, cl, next, batch)
		if done && err == nil {
			s.lost.Add(1)
			s.committed(ctx, cl, b, next)
		}
		return err
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if !transient(err) {
		return s.dbError("commit batch", batch, err)
	}
	done, rerr := s.rewind(ctx, cl, next, batch)
	var de *DatabaseError
	if errors.As(rerr, &de) && !pgconn.SafeToRetry(err) {
		de.Unsure = true // the commit may have been sent, its answer lost
	}
	if rerr != nil {
		return rerr
	}
	if done {
		// The commit's answer was lost, but the stored offsets show
		// that it committed: the batch is done, not redone.
		s.log.Warn("the answer to a batch's commit was lost, but it committed", zap.String("batch", batch),
			zap.String("postgres", s.addr), zap.Error(err))
		s.lost.Add(1)
		s.committed(ctx, cl, b, next)
		return nil
	}
	return s.backoff(ctx, batch, err)
}

// backoff waits before a rolled-back batch is redone, longer after each
// failure in a row, and gives up past recovery_timeout.
func (s *Sink) backoff(ctx context.Context, batch string, err error) error {
	s.retries.Add(1)
	if s.failing.IsZero() {
		s.failing = time.Now()
	}
	s.failures++
	if time.Since(s.failing) > s.cfg.RecoveryTimeout {
		return s.dbError(fmt.Sprintf("commit batch: failing for %s (recovery_timeout)", time.Since(s.failing).Round(time.Second)), batch, err)
	}
	s.log.Warn("batch rolled back; redoing it from the stored offsets", zap.String("batch", batch),
		zap.String("postgres", s.addr), zap.Int("failures", s.failures), zap.Error(err))
	select {
	case <-ctx.Done():
	case <-time.After(min(time.Duration(1<<min(s.failures, 6))*50*time.Millisecond, 5*time.Second)):
	}
	return nil
}

// stuck returns the error of a claim that could not be made, or names a
// partition fenced in the table that the group has left with this
// instance for longer than a rebalance takes: the table was edited or
// restored while the sink ran, or another process claims with this group.
func (s *Sink) stuck() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.claimErr != nil {
		return s.claimErr
	}
	bound := s.cfg.SessionTimeout + s.cfg.RebalanceTimeout
	for k, at := range s.fencedAt {
		if time.Since(at) > bound {
			return s.dbError("hold partitions", fmt.Sprintf("%s/%d", k.topic, k.partition),
				fmt.Errorf("the partition's token in the offsets table changed (another claim, an edit or a restore of the table) %s ago, but the group still assigns it to this instance; restart the sink to claim it again", time.Since(at).Round(time.Second)))
		}
	}
	return nil
}

// committed counts a committed batch and commits its offsets to Kafka too.
func (s *Sink) committed(ctx context.Context, cl *kgo.Client, b *Batch, next map[tp]int64) {
	s.failing, s.failures = time.Time{}, 0
	s.records.Add(uint64(len(b.Records)))
	s.batches.Add(1)
	s.unchanged.Add(uint64(b.unchanged))
	s.dead.Add(uint64(b.deadLetter))
	s.commitKafka(ctx, cl, next)
}

// rewind reads the stored offsets of the batch's partitions and seeks
// there; a partition whose token changed is released. The commit's answer
// may have been lost: the table, not this process, knows whether it
// committed, and done reports that it did (a partition of the batch, all
// of which commit together, stores the batch's next offset).
func (s *Sink) rewind(ctx context.Context, cl *kgo.Client, parts map[tp]int64, batch string) (done bool, err error) {
	stored := map[tp]claim{}
	err = s.retry(ctx, "read stored offsets", func() string { return batch }, func(ctx context.Context) error {
		rows, err := s.pool.Query(ctx, s.readSQL, s.cfg.AppID)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var k tp
			var c claim
			if err := rows.Scan(&k.topic, &k.partition, &c.next, &c.token); err != nil {
				return err
			}
			stored[k] = c
		}
		return rows.Err()
	})
	if err != nil {
		return false, err
	}
	seek := map[string]map[int32]kgo.EpochOffset{}
	s.mu.Lock()
	for k := range parts {
		c := s.owned[k]
		if c == nil {
			continue
		}
		st, ok := stored[k]
		if !ok || st.token != c.token {
			delete(s.owned, k)
			s.fencedAt[k] = time.Now()
			continue
		}
		if st.next < 0 {
			st.next = 0
		}
		if st.next == parts[k] {
			done = true
		}
		c.next = st.next
		if seek[k.topic] == nil {
			seek[k.topic] = map[int32]kgo.EpochOffset{}
		}
		seek[k.topic][k.partition] = kgo.EpochOffset{Epoch: -1, Offset: st.next}
	}
	s.mu.Unlock()
	cl.SetOffsets(seek)
	return done, nil
}

// retry runs op until it succeeds, ctx ends, it fails with an error no
// retry heals, or failures have lasted recovery_timeout; it logs each
// failure with what it waits for.
func (s *Sink) retry(ctx context.Context, what string, batch func() string, op func(context.Context) error) error {
	start := time.Now()
	backoff := 100 * time.Millisecond
	for attempt := 1; ; attempt++ {
		octx, cancel := context.WithTimeout(ctx, s.batchTimeout)
		err := op(octx)
		cancel()
		if err == nil {
			if attempt > 1 {
				s.log.Info("postgres answers again", zap.String("op", what), zap.String("postgres", s.addr), zap.Int("attempts", attempt))
			}
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if !transient(err) || time.Since(start) > s.cfg.RecoveryTimeout {
			return s.dbError(what, batch(), err)
		}
		s.log.Warn("waiting for postgres", zap.String("op", what), zap.String("postgres", s.addr),
			zap.Int("attempt", attempt), zap.Duration("failing_for", time.Since(start)),
			zap.Duration("gives_up_after", s.cfg.RecoveryTimeout), zap.Error(err))
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 5*time.Second)
	}
}

// commitKafka commits the committed batch's offsets to Kafka too, without
// waiting: only for lag tools (eosctl group lag); they are never read.
func (s *Sink) commitKafka(ctx context.Context, cl *kgo.Client, next map[tp]int64) {
	offs := map[string]map[int32]kgo.EpochOffset{}
	for k, n := range next {
		if offs[k.topic] == nil {
			offs[k.topic] = map[int32]kgo.EpochOffset{}
		}
		offs[k.topic][k.partition] = kgo.EpochOffset{Epoch: -1, Offset: n}
	}
	cl.CommitOffsets(ctx, offs, func(_ *kgo.Client, _ *kmsg.OffsetCommitRequest, _ *kmsg.OffsetCommitResponse, err error) {
		if err != nil && ctx.Err() == nil {
			s.log.Debug("committing offsets to kafka (for lag tools only) failed", zap.Error(err))
		}
	})
}
