package sim

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"time"

	"github.com/eosflow/eosflow/sink/pgsink"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.uber.org/zap"
)

// pgTables names one run's tables: its rows and the sink's offsets. A
// random part keeps concurrent runs, replays and the remains of a killed
// run apart.
type pgTables struct{ rows, offsets string }

func newPgTables() pgTables {
	var b [6]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand)
	base := "sim_" + hex.EncodeToString(b[:])
	return pgTables{rows: base + "_rows", offsets: base + "_offsets"}
}

// setupPg opens the run's database and creates its rows table; the
// sink creates its offsets table.
func (s *sim) setupPg(ctx context.Context) error {
	if s.cfg.Postgres == "" {
		return fmt.Errorf("pipeline %s needs a database: set Config.Postgres (eosctl: --postgres-url or EOS_POSTGRES_URL)", PgSink)
	}
	pc, err := pgxpool.ParseConfig(s.cfg.Postgres)
	if err != nil {
		return fmt.Errorf("database %s: %w", s.cfg.Postgres, err)
	}
	if pc.ConnConfig.TLSConfig != nil {
		return errors.New("the Postgres sink's schedules read each commit off the wire: give a URL with sslmode=disable")
	}
	pc.MaxConns = 1 // many runs share one server
	pool, err := pgxpool.NewWithConfig(ctx, pc)
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
	pc.ConnConfig.DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error) {
		return w.dialPg(ctx, network, addr, func() (action, int) { return s.onPgCommit(idx, w) }, s.strike)
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
// to send (its tables' creation, a claim of partitions or a batch): cut
// before the server sees it, its answer lost (struck when the answer
// comes and is dropped), or a crash.
func (s *sim) onPgCommit(idx int, w *wire) (action, int) {
	i, ok := s.step(idx, w, PgCommit)
	if !ok {
		s.hearing.committed.Store(time.Now().UnixNano())
		return pass, -1
	}
	defer s.acted()
	switch s.sched.Steps[i].Fault {
	case PgFail:
		s.strike(i)
		return dropReq, i
	case PgLost:
		return loseResp, i
	case Crash:
		s.strike(i)
		s.crash(idx, w)
		s.events <- event{idx: idx, wire: w, step: i, fault: Crash}
		return dropReq, i
	}
	return pass, -1
}

// pgCaughtUp reports whether the sink's offsets in the database cover
// the whole input.
func (s *sim) pgCaughtUp(ctx context.Context) bool {
	stored, err := s.storedOffsets(ctx)
	if err != nil {
		return false
	}
	var next int64
	for _, n := range stored {
		next += max(n, 0)
	}
	return next >= int64(s.inputs)
}

// judgeRows checks, per input partition, that each record is one row
// and the stored offset is the partition's end.
func (s *sim) judgeRows(ctx context.Context) error {
	ends, err := s.inputEnds(ctx)
	if err != nil {
		return as(KindSetup, err)
	}
	got, err := s.partitionRows(ctx)
	if err != nil {
		return as(KindSetup, fmt.Errorf("reading the rows: %w", err))
	}
	for p, end := range ends {
		g := got[p]
		if g.rows != end || g.distinct != end || end > 0 && g.last != end-1 || max(g.stored, 0) != end {
			return as(KindRows, fmt.Errorf("partition %d of %d records: rows=%d distinct=%d last offset %d; stored offset %d", p, end, g.rows, g.distinct, g.last, g.stored))
		}
	}
	return nil
}

// partRows is what the database holds of one input partition.
type partRows struct{ rows, distinct, last, stored int64 }

// partitionRows reads, per partition, the rows and the stored offset.
func (s *sim) partitionRows(ctx context.Context) (map[int32]partRows, error) {
	out := map[int32]partRows{}
	rows, err := s.pg.Query(ctx, `SELECT partition, count(*), count(DISTINCT "offset"), max("offset") FROM `+s.tables.rows+` GROUP BY partition`)
	if err != nil {
		return nil, err
	}
	for rows.Next() {
		var p int32
		var g partRows
		if err := rows.Scan(&p, &g.rows, &g.distinct, &g.last); err != nil {
			return nil, err
		}
		out[p] = g
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	stored, err := s.storedOffsets(ctx)
	if err != nil {
		return nil, err
	}
	for p, next := range stored {
		g := out[p]
		g.stored = next
		out[p] = g
	}
	return out, nil
}

// storedOffsets reads the sink's next offset per input partition, as
// the database holds it (negative: claimed, nothing committed yet).
func (s *sim) storedOffsets(ctx context.Context) (map[int32]int64, error) {
	rows, err := s.pg.Query(ctx, `SELECT partition, next_offset FROM `+s.tables.offsets+` WHERE group_id = $1 AND topic = $2`, appID, input)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[int32]int64{}
	for rows.Next() {
		var p int32
		var next int64
		if err := rows.Scan(&p, &next); err != nil {
			return nil, err
		}
		out[p] = next
	}
	return out, rows.Err()
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
