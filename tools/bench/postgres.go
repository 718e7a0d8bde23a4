package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eosflow/eosflow/config"
	"github.com/eosflow/eosflow/internal/kafkautil"
	"github.com/eosflow/eosflow/sink/pgsink"
)

// pgTable is the table of rows of the run appID, a valid unquoted
// identifier; its offsets table (the sink's) is pgTable + "_offsets".
func pgTable(appID string) string { return strings.NewReplacer("-", "_", ".", "_").Replace(appID) }

// pgOffsetsTable is the offsets table of the sink writing into table.
func pgOffsetsTable(table string) string { return table + "_offsets" }

// copyRows writes each record as one row of table with COPY: its topic,
// partition, offset and value. The table has no unique key, so a record
// written twice shows as two rows.
func copyRows(table string) func(ctx context.Context, tx pgx.Tx, recs []*kgo.Record) error {
	cols := []string{"topic", "partition", "offset", "value"}
	return func(ctx context.Context, tx pgx.Tx, recs []*kgo.Record) error {
		rows := make([][]any, len(recs))
		for i, r := range recs {
			rows[i] = []any{r.Topic, r.Partition, r.Offset, string(r.Value)}
		}
		_, err := tx.CopyFrom(ctx, pgx.Identifier{table}, cols, pgx.CopyFromRows(rows))
		return err
	}
}

// workPostgres runs a postgres case until ctx ends: the exactly-once sink
// or the at-least-once loop, writing the input into spec.Table.
func workPostgres(ctx context.Context, cfg config.Config, spec WorkerSpec, ready io.Writer) error {
	if spec.PostgresURL == "" || spec.Table == "" {
		return fmt.Errorf("bench worker: pipeline %s needs a table and a database URL in %s", PipelinePostgres, EnvPostgresURL)
	}
	pool, err := pgxpool.New(ctx, spec.PostgresURL)
	if err != nil {
		return fmt.Errorf("bench worker: the postgres url: %w", err)
	}
	defer pool.Close()
	write := copyRows(spec.Table)
	switch spec.Case {
	case PostgresExactlyOnce:
		s, err := pgsink.New(cfg, pool, []string{spec.Input}, func(ctx context.Context, tx pgx.Tx, b *pgsink.Batch) error {
			return write(ctx, tx, b.Records)
		}, pgsink.OffsetsTable(pgOffsetsTable(spec.Table)))
		if err != nil {
			return err
		}
		fmt.Fprintln(ready, ReadyLine)
		return s.Run(ctx)
	case PostgresAtLeastOnce:
		fmt.Fprintln(ready, ReadyLine)
		return atLeastOnceIntoPostgres(ctx, cfg, spec.Input, pool, write)
	}
	return fmt.Errorf("bench worker: case %q is not one of pipeline %s; use %s", spec.Case, PipelinePostgres, strings.Join(PostgresCases(), ", "))
}

// atLeastOnceIntoPostgres is the loop most consumers write by hand: poll
// up to MaxBatchRecords, write them in a database transaction, then commit
// their offsets to Kafka and wait for the answer. A crash between the two
// commits writes the batch again. Its client fetches as pgsink.Sink's does.
// It returns nil when ctx ends.
func atLeastOnceIntoPostgres(ctx context.Context, cfg config.Config, input string, pool *pgxpool.Pool, write func(context.Context, pgx.Tx, []*kgo.Record) error) error {
	opts, err := kafkautil.ConnOptions(cfg)
	if err != nil {
		return err
	}
	cl, err := kgo.NewClient(append(opts,
		kgo.ConsumerGroup(cfg.AppID), kgo.ConsumeTopics(input),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.SessionTimeout(cfg.SessionTimeout), kgo.RebalanceTimeout(cfg.RebalanceTimeout),
		kgo.InstanceID(cfg.InstanceID), kgo.DisableAutoCommit(), kgo.BlockRebalanceOnPoll(),
		kgo.MaxBufferedRecords(2*cfg.MaxBatchRecords+1000), kgo.MaxBufferedBytes(kafkautil.MaxBufferedBytes),
	)...)
	if err != nil {
		return err
	}
	defer cl.Close()
	for {
		fs := cl.PollRecords(ctx, cfg.MaxBatchRecords)
		if fs.IsClientClosed() || ctx.Err() != nil {
			cl.AllowRebalance()
			return nil
		}
		if err := fatalFetchError(fs); err != nil {
			return err
		}
		if recs := fs.Records(); len(recs) > 0 {
			err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error { return write(ctx, tx, recs) })
			if err == nil {
				err = cl.CommitRecords(ctx, recs...)
			}
			if err != nil {
				if ctx.Err() != nil {
					return nil
				}
				return fmt.Errorf("at-least-once loop: batch %s/%d@%d: %w", recs[0].Topic, recs[0].Partition, recs[0].Offset, err)
			}
		}
		cl.AllowRebalance()
	}
}

// runPostgres measures postgres case c: Records records are seeded into a
// fresh topic, the case writes them into a fresh table, and records/s is
// taken at the case's commit point (the sink's offsets table, or the
// loop's Kafka offsets), polled every 10ms, leaving out the first Warmup
// share. The table must then hold every record exactly once, or the run
// fails: a case that loses or repeats rows reports no speed.
func (h *harness) runPostgres(ctx context.Context, c caseSpec, rep int) (runResult, error) {
	o := h.o
	id := runID(c, rep)
	in, table := id+"-in", pgTable(id)
	if err := h.createTopics(ctx, in); err != nil {
		return runResult{}, err
	}
	defer h.deleteTopics(in)
	pool, err := pgxpool.New(ctx, o.PostgresURL)
	if err != nil {
		return runResult{}, fmt.Errorf("the postgres url: %w", err)
	}
	defer pool.Close()
	err = createTable(ctx, pool, `CREATE TABLE `+table+` (topic text NOT NULL, partition integer NOT NULL, "offset" bigint NOT NULL, value text NOT NULL)`)
	if err != nil {
		return runResult{}, fmt.Errorf("creating table %s: %w; check the postgres url and that the database is up (integration/postgres/pg.sh start)", table, err)
	}
	defer func() {
		dctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_, _ = pool.Exec(dctx, "DROP TABLE IF EXISTS "+table+", "+pgOffsetsTable(table))
	}()
	if err := h.seed(ctx, in, o.Records); err != nil {
		return runResult{}, fmt.Errorf("seeding %s: %w", in, err)
	}

	done := func(ctx context.Context) (int64, error) { return h.committedOffsets(ctx, id, in) }
	point := "the group's committed Kafka offsets"
	if c.name == PostgresExactlyOnce {
		point = "the sink's offsets table"
		q := `SELECT coalesce(sum(next_offset), 0) FROM ` + pgOffsetsTable(table) + ` WHERE group_id = $1 AND topic = $2 AND next_offset > 0`
		done = func(ctx context.Context) (n int64, err error) {
			err = pool.QueryRow(ctx, q, id, in).Scan(&n)
			return n, err
		}
	}

	p, measured, err := h.start(ctx, c, id, in, "", "", 0)
	if err != nil {
		return runResult{}, err
	}
	stopped := false
	defer func() {
		if !stopped {
			_ = p.stop()
		}
	}()
	if err := h.awaitReady(ctx, p, c.name); err != nil {
		return runResult{}, err
	}
	started := time.Now()
	readyCPU, _, _ := procStats(p.pid())
	want := int64(o.Records)
	warm := max(int64(float64(want)*o.Warmup), 1)
	var (
		warmAt, doneAt time.Time
		warmN          int64
		cpu0, cpu1     time.Duration
		lastErr        error
	)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	timeout := time.NewTimer(o.RunTimeout)
	defer timeout.Stop()
	for doneAt.IsZero() {
		select {
		case <-tick.C:
		case <-p.exited():
			return runResult{}, stoppedEarly(p, c.name)
		case <-ctx.Done():
			return runResult{}, ctx.Err()
		case <-timeout.C:
			return runResult{}, fmt.Errorf("%s: not every record committed within %s (last check: %v)", c.name, o.RunTimeout, lastErr)
		}
		qctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		n, err := done(qctx)
		cancel()
		now := time.Now()
		if err != nil {
			lastErr = err // the sink creates its offsets table once it runs
			continue
		}
		if warmAt.IsZero() && n >= warm {
			warmAt, warmN = now, n
			cpu0, _, _ = procStats(p.pid())
		}
		if n >= want {
			doneAt = now
			cpu1, _, _ = procStats(p.pid())
		}
	}
	_, rss, _ := procStats(p.pid())
	stopped = true
	if err := p.stop(); err != nil {
		return runResult{}, err
	}

	var rows, distinct int64
	qctx, cancel := context.WithTimeout(ctx, time.Minute)
	err = pool.QueryRow(qctx, "SELECT count(*), count(DISTINCT value) FROM "+table).Scan(&rows, &distinct)
	cancel()
	if err != nil {
		return runResult{}, fmt.Errorf("counting the rows of %s: %w", table, err)
	}
	if rows != want || distinct != want {
		return runResult{}, fmt.Errorf("%s: table %s holds %d rows of %d distinct records for %d records (%d missing, %d written twice): the case is broken, so no speed is reported",
			c.name, table, rows, distinct, want, want-distinct, rows-distinct)
	}

	r := runResult{peakRSS: rss, measured: measured + "; rows/s at the commit point, " + point}
	window, counted := doneAt.Sub(warmAt), want-warmN
	if counted <= 0 || window <= 0 {
		// Everything committed at once (a tiny bench): measure from the
		// start instead, group join included.
		window, counted, cpu0 = doneAt.Sub(started), want, readyCPU
	}
	r.rate = float64(counted) / window.Seconds()
	r.cpu = max(cpu1-cpu0, 0)
	r.cpuPerRecord = r.cpu / time.Duration(counted)
	return r, nil
}

// committedOffsets sums group's committed Kafka offsets of topic: on a
// fresh topic, the records the group has committed.
func (h *harness) committedOffsets(ctx context.Context, group, topic string) (int64, error) {
	offs, err := h.adm.FetchOffsets(ctx, group)
	if err != nil {
		return 0, err
	}
	var n int64
	var failed error
	offs.Each(func(r kadm.OffsetResponse) {
		switch {
		case r.Err != nil:
			failed = errors.Join(failed, r.Err)
		case r.Topic == topic && r.At > 0:
			n += r.At
		}
	})
	return n, failed
}

// createTable runs sql within 30 s, again for up to 15 s while the server
// refuses connections or says it is starting or shutting down: another
// user of a shared server (a crash test) may be restarting it.
func createTable(ctx context.Context, pool *pgxpool.Pool, sql string) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	retryUntil := time.Now().Add(15 * time.Second)
	for {
		_, err := pool.Exec(ctx, sql)
		var pe *pgconn.PgError
		restarting := errors.Is(err, syscall.ECONNREFUSED) || errors.As(err, &pe) && strings.HasPrefix(pe.Code, "57P")
		if err == nil || !restarting || time.Now().After(retryUntil) {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(200 * time.Millisecond):
		}
	}
}
