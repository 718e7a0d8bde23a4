package sim

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"os"
	"sync/atomic"
	"time"

	"github.com/eosflow/eosflow/sink/pgsink"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.uber.org/zap"
)

// pgCommit is the simple-protocol query pgx sends to commit a
// transaction: 'Q', its length, "commit" and a NUL.
var pgCommit = append([]byte{'Q', 0, 0, 0, 11}, "commit\x00"...)

// pgTables names one run's tables: its rows and the sink's offsets. The
// process id and a counter keep concurrent runs and replays apart.
type pgTables struct{ rows, offsets string }

var pgRuns atomic.Int64

func newPgTables() pgTables {
	base := fmt.Sprintf("sim_%d_%d", os.Getpid(), pgRuns.Add(1))
	return pgTables{rows: base + "_rows", offsets: base + "_offsets"}
}

// setupPg opens the run's database and creates its rows table; the
// sink creates its offsets table.
func (s *sim) setupPg(ctx context.Context) error {
	if s.cfg.Postgres == "" {
		return fmt.Errorf("pipeline %s needs a database: set Config.Postgres (eosctl: --postgres-url or EOS_POSTGRES_URL)", PgSink)
	}
	pool, err := pgxpool.New(ctx, s.cfg.Postgres)
	if err != nil {
		return fmt.Errorf("database %s: %w", s.cfg.Postgres, err)
	}
	s.pg, s.tables = pool, newPgTables()
	_, err = pool.Exec(ctx, `CREATE TABLE `+s.tables.rows+` (partition int NOT NULL, "offset" bigint NOT NULL, key text, value text)`)
	return err
}

// dropPg drops the run's tables and closes its database.
func (s *sim) dropPg() {
	if s.pg == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, _ = s.pg.Exec(ctx, `DROP TABLE IF EXISTS `+s.tables.rows+`, `+s.tables.offsets)
	s.pg.Close()
}

// startSink builds member idx of the Postgres sink pipeline: package
// pgsink writing a row per record, its database connections on w.
func (s *sim) startSink(idx int, w *wire, log *zap.Logger, opts []pgsink.Option) (member, error) {
	pc, err := pgxpool.ParseConfig(s.cfg.Postgres)
	if err != nil {
		return nil, err
	}
	pc.MaxConns = 2 // many runs share one server
	pc.ConnConfig.TLSConfig, pc.ConnConfig.Fallbacks = nil, nil
	pc.ConnConfig.DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error) {
		return w.dialPg(ctx, network, addr, func() action { return s.onPgCommit(idx, w) })
	}
	pool, err := pgxpool.NewWithConfig(context.Background(), pc)
	if err != nil {
		return nil, err
	}
	opts = append(opts, pgsink.OffsetsTable(s.tables.offsets), pgsink.Logger(log))
	sk, err := pgsink.New(s.config(idx), pool, []string{input}, s.writeRows(idx, w), opts...)
	if err != nil {
		pool.Close()
		return nil, err
	}
	return sinkMember{sk, pool}, nil
}

// writeRows is the sink's handler: a row per record, the user code
// reaching point Record on each.
func (s *sim) writeRows(idx int, w *wire) pgsink.Handler {
	return func(ctx context.Context, tx pgx.Tx, b *pgsink.Batch) error {
		rows := make([][]any, 0, len(b.Records))
		for _, r := range b.Records {
			s.onRecord(idx, w)
			rows = append(rows, []any{r.Partition, r.Offset, string(r.Key), string(r.Value)})
		}
		_, err := tx.CopyFrom(ctx, pgx.Identifier{s.tables.rows}, []string{"partition", "offset", "key", "value"}, pgx.CopyFromRows(rows))
		return err
	}
}

// sinkMember is a pgsink.Sink as a member, its pool closed with it.
type sinkMember struct {
	*pgsink.Sink
	pool *pgxpool.Pool
}

// Run runs the sink, then closes its pool (in the background: a crashed
// incarnation's connections are already cut).
func (m sinkMember) Run(ctx context.Context) error {
	defer func() { go m.pool.Close() }()
	return m.Sink.Run(ctx)
}

// Close stops the sink; its batch in hand commits or rolls back first.
func (m sinkMember) Close() error {
	m.Sink.Close()
	return nil
}

// onPgCommit decides the fate of a database commit member idx is about
// to send: cut before the server sees it, its answer lost, or a crash.
func (s *sim) onPgCommit(idx int, w *wire) action {
	i, ok := s.step(idx, w, PgCommit)
	if !ok {
		s.hearing.committed.Store(time.Now().UnixNano())
		return pass
	}
	defer s.acted()
	switch s.sched.Steps[i].Fault {
	case PgFail:
		s.strike(i)
		return dropReq
	case PgLost:
		s.strike(i) // the answer is read and dropped before the commit returns
		return loseResp
	case Crash:
		s.strike(i)
		s.crash(idx, w)
		s.events <- event{idx: idx, wire: w, step: i, fault: Crash}
		return dropReq
	}
	return pass
}

// pgConn is a database connection on a member's wire: it sees each
// commit as it is sent and can cut the connection before it or after its
// answer.
type pgConn struct {
	net.Conn
	onCommit func() action
}

// dialPg is the member's database dialer.
func (w *wire) dialPg(ctx context.Context, network, addr string, onCommit func() action) (net.Conn, error) {
	var d net.Dialer
	nc, err := d.DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.dead {
		nc.Close()
		return nil, errCut
	}
	if w.others == nil {
		w.others = map[net.Conn]struct{}{}
	}
	w.others[nc] = struct{}{}
	return &pgConn{Conn: nc, onCommit: onCommit}, nil
}

// Write sends b, unless it holds a commit the schedule strikes: then the
// connection is cut before it (dropReq), or after the server's answer to
// it was read and dropped (loseResp): the commit applied, its outcome
// unknown to the client.
func (c *pgConn) Write(b []byte) (int, error) {
	if !bytes.Contains(b, pgCommit) {
		return c.Conn.Write(b)
	}
	switch c.onCommit() {
	case dropReq:
		c.Conn.Close()
		return 0, errCut
	case loseResp:
		n, err := c.Conn.Write(b)
		if err == nil {
			_ = c.Conn.SetReadDeadline(time.Now().Add(10 * time.Second))
			err = readUntilReady(c.Conn)
		}
		c.Conn.Close()
		return n, err
	}
	return c.Conn.Write(b)
}

// readUntilReady reads the server's messages up to its ReadyForQuery.
func readUntilReady(r io.Reader) error {
	var head [5]byte
	for {
		if _, err := io.ReadFull(r, head[:]); err != nil {
			return err
		}
		n := int64(binary.BigEndian.Uint32(head[1:])) - 4
		if _, err := io.CopyN(io.Discard, r, n); err != nil {
			return err
		}
		if head[0] == 'Z' {
			return nil
		}
	}
}

// pgCaughtUp reports whether the sink's offsets in the database cover
// the whole input.
func (s *sim) pgCaughtUp(ctx context.Context) bool {
	var next int64
	err := s.pg.QueryRow(ctx, `SELECT coalesce(sum(greatest(next_offset, 0)), 0) FROM `+s.tables.offsets+` WHERE group_id = $1`, appID).Scan(&next)
	return err == nil && next >= int64(s.inputs)
}

// judgeRows checks that every input record is one row, and the stored
// offsets are the input's ends.
func (s *sim) judgeRows(ctx context.Context) error {
	var rows, distinct, beyond, stored int64
	err := s.pg.QueryRow(ctx, `SELECT count(*), count(DISTINCT (partition, "offset")),
	(SELECT count(*) FROM `+s.tables.offsets+` o WHERE o.group_id = $1 AND o.next_offset < 0),
	(SELECT coalesce(sum(next_offset), 0) FROM `+s.tables.offsets+` o WHERE o.group_id = $1)
	FROM `+s.tables.rows, appID).Scan(&rows, &distinct, &beyond, &stored)
	if err != nil {
		return as(KindSetup, fmt.Errorf("reading the rows: %w", err))
	}
	n := int64(s.inputs)
	if rows != n || distinct != n || stored != n {
		return as(KindRows, fmt.Errorf("rows=%d distinct=%d want %d each; stored offsets sum to %d (%d partitions never committed)", rows, distinct, n, stored, beyond))
	}
	return nil
}

// PostgresFromEnv is the database the tests give the Postgres sink
// pipeline: EOS_POSTGRES_URL, unless another test may restart that server
// meanwhile (EOS_POSTGRES_RESTART_CMD set without EOS_POSTGRES_EXCLUSIVE=1).
// "" leaves the pipeline out.
func PostgresFromEnv() string {
	if os.Getenv("EOS_POSTGRES_RESTART_CMD") != "" && os.Getenv("EOS_POSTGRES_EXCLUSIVE") != "1" {
		return ""
	}
	return os.Getenv("EOS_POSTGRES_URL")
}
