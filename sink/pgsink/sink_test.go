package pgsink_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest"

	"github.com/eosflow/eosflow/config"
	"github.com/eosflow/eosflow/eos"
	"github.com/eosflow/eosflow/internal/kafkautil"
	"github.com/eosflow/eosflow/sink/pgsink"
	"github.com/eosflow/eosflow/tools/kafkatest"
	"github.com/eosflow/eosflow/tools/servertest"
)

// pgURL returns the test database (servertest: EOS_POSTGRES_URL, else a
// container), skipping t without one.
func pgURL(t testing.TB) string {
	t.Helper()
	return servertest.PostgresURL(t)
}

// broker is the real cluster in EOS_KAFKA_BROKERS, else kfake.
func broker(t testing.TB) *kafkatest.Env {
	if kafkatest.RealBrokers() != nil {
		return kafkatest.Real(t)
	}
	return kafkatest.Fake(t)
}

// pool connects to the test database. Another package's test may crash
// the server meanwhile, so the test's own statements go through exec,
// which retries.
func pool(t testing.TB) *pgxpool.Pool {
	t.Helper()
	p, err := pgxpool.New(t.Context(), pgURL(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}

// exec runs fn until it succeeds, for up to a minute.
func retry(t testing.TB, p *pgxpool.Pool, fn func(context.Context, *pgxpool.Pool) error) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		err := fn(t.Context(), p)
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal(err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// table makes a table of one row per written record with no unique
// constraint, so a duplicate would show, and drops it when t ends.
func table(t testing.TB, p *pgxpool.Pool) string {
	name := fmt.Sprintf("pgsink_rows_%d", rand.Uint32())
	retry(t, p, func(ctx context.Context, p *pgxpool.Pool) error {
		_, err := p.Exec(ctx, "CREATE TABLE IF NOT EXISTS "+name+" (topic text, partition int, \"offset\" bigint, value text)")
		return err
	})
	t.Cleanup(func() {
		p.Exec(context.Background(), "DROP TABLE IF EXISTS "+name)
	})
	return name
}

// seed writes n records with values "0" .. "n-1" to topic.
func seed(t testing.TB, env *kafkatest.Env, topic string, from, n int) {
	t.Helper()
	cl := env.Client(t)
	if err := kafkautil.ProduceAll(t.Context(), cl, n, func(i int) *kgo.Record {
		v := strconv.Itoa(from + i)
		return &kgo.Record{Topic: topic, Key: []byte(v), Value: []byte(v)}
	}); err != nil {
		t.Fatal(err)
	}
}

// insertRows writes each record as one row.
func insertRows(table string) pgsink.Handler {
	return func(ctx context.Context, tx pgx.Tx, b *pgsink.Batch) error {
		rows := make([][]any, len(b.Records))
		for i, r := range b.Records {
			rows[i] = []any{r.Topic, r.Partition, r.Offset, string(r.Value)}
		}
		_, err := tx.CopyFrom(ctx, pgx.Identifier{table}, []string{"topic", "partition", "offset", "value"}, pgx.CopyFromRows(rows))
		return err
	}
}

// counts returns the table's rows and distinct values.
func counts(t testing.TB, p *pgxpool.Pool, table string) (rows, distinct int) {
	retry(t, p, func(ctx context.Context, p *pgxpool.Pool) error {
		return p.QueryRow(ctx, "SELECT count(*), count(DISTINCT value) FROM "+table).Scan(&rows, &distinct)
	})
	return rows, distinct
}

// running starts s.Run and returns a function that closes s and returns
// Run's error.
func running(t testing.TB, s *pgsink.Sink) func() error {
	errc := make(chan error, 1)
	go func() { errc <- s.Run(t.Context()) }()
	return func() error {
		s.Close()
		return <-errc
	}
}

func waitFor(t testing.TB, d time.Duration, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("waited %s for %s", d, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func testConfig(env *kafkatest.Env, group, instance string) config.Config {
	c := env.Config(group, instance, config.AtLeastOnce)
	c.MaxBatchRecords = 500
	c.RecoveryTimeout = time.Minute
	c.LeaveGroupOnClose = true
	return c
}

// TestExactlyOnceThroughLostConnectionsAndRebalances writes 12,000
// records with three instances joining and leaving, while a fifth of the
// batches lose their database connection after writing their rows (the
// server ends the session, as a crash of the process or the network
// would). Every record must be in the table once.
func TestExactlyOnceThroughLostConnectionsAndRebalances(t *testing.T) {
	p := pool(t)
	env := broker(t)
	topic, group := env.Name("pgsink-in"), env.Name("pgsink")
	env.CreateTopics(t, 4, topic)
	const n = 12000
	seed(t, env, topic, 0, n/3)
	rows := table(t, p)

	// Every fifth batch loses its connection: a random fifth let a short
	// run of about 25 batches go without a single fault now and then.
	var injected, calls atomic.Int64
	write := insertRows(rows)
	faulty := func(ctx context.Context, tx pgx.Tx, b *pgsink.Batch) error {
		if err := write(ctx, tx, b); err != nil {
			return err
		}
		if calls.Add(1)%5 == 0 {
			pid := tx.Conn().PgConn().PID()
			if _, err := p.Exec(ctx, "SELECT pg_terminate_backend($1)", pid); err != nil {
				return err
			}
			injected.Add(1)
		}
		return nil
	}
	start := func(name string) (*pgsink.Sink, func() error) {
		cfg := testConfig(env, group, name)
		cfg.LeaveGroupOnClose = true
		s, err := pgsink.New(cfg, p, []string{topic}, faulty, pgsink.Logger(zaptest.NewLogger(t, zaptest.Level(zap.WarnLevel))))
		if err != nil {
			t.Fatal(err)
		}
		return s, running(t, s)
	}
	a, stopA := start("a")
	waitFor(t, time.Minute, "a's first commits", func() bool { return a.Stats().Records > 2000 })
	b, stopB := start("b")
	waitFor(t, time.Minute, "b's partitions", func() bool { return b.Stats().Claims > 0 })
	seed(t, env, topic, n/3, n/3)
	waitFor(t, time.Minute, "b's first commits", func() bool { return b.Stats().Records > 0 })
	if err := stopA(); err != nil {
		t.Fatalf("a: %v", err)
	}
	c, stopC := start("c")
	waitFor(t, time.Minute, "c's partitions", func() bool { return c.Stats().Claims > 0 })
	seed(t, env, topic, 2*n/3, n/3)
	waitFor(t, time.Minute, "c's first commits", func() bool { return c.Stats().Records > 0 })
	waitFor(t, 2*time.Minute, "all records", func() bool {
		got, _ := counts(t, p, rows)
		return got >= n
	})
	time.Sleep(500 * time.Millisecond) // a duplicate would land now
	for name, stop := range map[string]func() error{"b": stopB, "c": stopC} {
		if err := stop(); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
	got, distinct := counts(t, p, rows)
	if got != n || distinct != n {
		t.Errorf("table holds %d rows of %d distinct records, want %d of %d", got, distinct, n, n)
	}
	// A session ended while its COMMIT runs can commit and still lose
	// the answer: the sink reads the offsets back and counts the batch
	// committed (LostAnswers) instead of redoing it.
	retries := a.Stats().Retries + b.Stats().Retries + c.Stats().Retries
	lost := a.Stats().LostAnswers + b.Stats().LostAnswers + c.Stats().LostAnswers
	if injected.Load() == 0 || retries == 0 {
		t.Errorf("%d lost connections injected, %d batches redone: want some of each", injected.Load(), retries)
	}
	committed := a.Stats().Records + b.Stats().Records + c.Stats().Records
	if committed != n {
		t.Errorf("the sinks counted %d records committed, want %d", committed, n)
	}
	t.Logf("%d lost connections, %d batches redone, %d commits whose answer was lost, claims a=%d b=%d c=%d", injected.Load(), retries, lost, a.Stats().Claims, b.Stats().Claims, c.Stats().Claims)
}

// TestControlOffsetsOutsideTheTransactionDuplicate is the negative
// control: a consumer that commits its offsets to Kafka after its own
// database commit, and dies between the two, writes records twice. The
// check above would catch it.
func TestControlOffsetsOutsideTheTransactionDuplicate(t *testing.T) {
	p := pool(t)
	env := broker(t)
	topic, group := env.Name("pgsink-in"), env.Name("pgsink-control")
	env.CreateTopics(t, 1, topic)
	const n = 2000
	seed(t, env, topic, 0, n)
	rows := table(t, p)
	for crashes := 0; ; crashes++ {
		cl := env.Client(t, kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic), kgo.DisableAutoCommit(),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(200*time.Millisecond))
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
		fs := cl.PollRecords(ctx, 500)
		cancel()
		recs := fs.Records()
		if len(recs) == 0 {
			cl.Close()
			break
		}
		retry(t, p, func(ctx context.Context, p *pgxpool.Pool) error {
			return pgx.BeginFunc(ctx, p, func(tx pgx.Tx) error {
				return insertRows(rows)(ctx, tx, &pgsink.Batch{Records: recs})
			})
		})
		if crashes%2 == 0 { // dies before committing offsets
			cl.Close()
			continue
		}
		if err := cl.CommitRecords(t.Context(), recs...); err != nil {
			t.Fatal(err)
		}
		cl.Close()
	}
	got, distinct := counts(t, p, rows)
	if distinct != n || got <= n {
		t.Fatalf("control: %d rows of %d distinct records, want duplicates of all %d", got, distinct, n)
	}
	t.Logf("control: %d rows for %d records", got, n)
}

// TestZombieIsFencedInTheDatabase claims the sink's partitions behind its
// back, as a new owner would while it was paused: its next batch must roll
// back, write nothing, and leave the partitions alone.
func TestZombieIsFencedInTheDatabase(t *testing.T) {
	p := pool(t)
	env := broker(t)
	topic, group := env.Name("pgsink-in"), env.Name("pgsink")
	env.CreateTopics(t, 2, topic)
	seed(t, env, topic, 0, 100)
	rows := table(t, p)
	s, err := pgsink.New(testConfig(env, group, "i1"), p, []string{topic}, insertRows(rows))
	if err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 1)
	go func() { errc <- s.Run(t.Context()) }()
	defer s.Close()
	waitFor(t, time.Minute, "the first records", func() bool { return s.Stats().Records == 100 })
	retry(t, p, func(ctx context.Context, p *pgxpool.Pool) error {
		_, err := p.Exec(ctx, "UPDATE eosflow_offsets SET token = token + 1, owner = 'newer' WHERE group_id = $1", group)
		return err
	})
	seed(t, env, topic, 100, 100)
	waitFor(t, time.Minute, "the fenced batch", func() bool { return s.Stats().Fenced > 0 })
	time.Sleep(time.Second)
	if got, _ := counts(t, p, rows); got != 100 {
		t.Errorf("%d rows after the fenced batch, want the first 100 only", got)
	}
	if st := s.Stats(); st.Records != 100 {
		t.Errorf("the fenced sink committed %d records, want 100", st.Records)
	}
	var next int64
	retry(t, p, func(ctx context.Context, p *pgxpool.Pool) error {
		return p.QueryRow(ctx, "SELECT sum(next_offset) FROM eosflow_offsets WHERE group_id = $1", group).Scan(&next)
	})
	if next != 100 {
		t.Errorf("stored offsets sum to %d after the fenced batch, want 100", next)
	}
	// Nobody else holds the partitions in the group: after a session and
	// a rebalance timeout, Run stops and names them rather than idle.
	select {
	case err := <-errc:
		if !errors.Is(err, pgsink.ErrDatabase) || !strings.Contains(err.Error(), "still assigns it") || !strings.Contains(err.Error(), topic+"/") {
			t.Errorf("Run: %v, want an error naming the fenced partition the group still assigns", err)
		}
	case <-time.After(time.Minute):
		t.Error("Run still runs a minute after its partitions were fenced in the table")
	}
}

// TestRestartResumesFromTheDatabase stops a sink and starts another with
// the same group: it resumes where the table says, even though Kafka's
// committed offsets say otherwise.
func TestRestartResumesFromTheDatabase(t *testing.T) {
	p := pool(t)
	env := broker(t)
	topic, group := env.Name("pgsink-in"), env.Name("pgsink")
	env.CreateTopics(t, 2, topic)
	seed(t, env, topic, 0, 1000)
	rows := table(t, p)
	s, err := pgsink.New(testConfig(env, group, "i1"), p, []string{topic}, insertRows(rows))
	if err != nil {
		t.Fatal(err)
	}
	stop := running(t, s)
	waitFor(t, time.Minute, "1000 records", func() bool { return s.Stats().Records == 1000 })
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	// The database is restored from a backup taken before the last 300
	// records of partition 0: the sink must write them again.
	retry(t, p, func(ctx context.Context, p *pgxpool.Pool) error {
		tx, err := p.Begin(ctx)
		if err != nil {
			return err
		}
		defer tx.Rollback(ctx)
		var next int64
		if err := tx.QueryRow(ctx, "SELECT next_offset FROM eosflow_offsets WHERE group_id = $1 AND partition = 0", group).Scan(&next); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, "DELETE FROM "+rows+" WHERE partition = 0 AND \"offset\" >= $1", next-300); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, "UPDATE eosflow_offsets SET next_offset = $2 WHERE group_id = $1 AND partition = 0", group, next-300); err != nil {
			return err
		}
		return tx.Commit(ctx)
	})
	if got, _ := counts(t, p, rows); got != 700 {
		t.Fatalf("%d rows after the restore, want 700", got)
	}
	s2, err := pgsink.New(testConfig(env, group, "i1"), p, []string{topic}, insertRows(rows))
	if err != nil {
		t.Fatal(err)
	}
	stop2 := running(t, s2)
	defer stop2()
	waitFor(t, time.Minute, "the 300 records again", func() bool { return s2.Stats().Records == 300 })
	time.Sleep(500 * time.Millisecond)
	if got, distinct := counts(t, p, rows); got != 1000 || distinct != 1000 {
		t.Errorf("%d rows of %d records after the restart, want 1000 of 1000", got, distinct)
	}
}

// TestPostgresRestart crashes the database server mid-run (immediate
// shutdown, recovery on start). The sink waits for it, saying so, and
// every record is in the table once. It restarts the server, so it runs
// only when the server is its alone (EOS_POSTGRES_EXCLUSIVE=1).
func TestPostgresRestart(t *testing.T) {
	restart := os.Getenv("EOS_POSTGRES_RESTART_CMD")
	if restart == "" || os.Getenv("EOS_POSTGRES_EXCLUSIVE") != "1" {
		t.Skip(`EOS_POSTGRES_RESTART_CMD and EOS_POSTGRES_EXCLUSIVE=1 are needed: this test crashes the server other tests may be using; with pg.sh: EOS_POSTGRES_EXCLUSIVE=1 EOS_POSTGRES_RESTART_CMD="$PWD/integration/postgres/pg.sh restart --hard"`)
	}
	p := pool(t)
	env := broker(t)
	topic, group := env.Name("pgsink-in"), env.Name("pgsink")
	env.CreateTopics(t, 4, topic)
	const n = 20000
	seed(t, env, topic, 0, n)
	rows := table(t, p)
	var logs strings.Builder
	var mu sync.Mutex
	logger := zap.New(zapcoreFor(&logs, &mu))
	write := insertRows(rows)
	slow := func(ctx context.Context, tx pgx.Tx, b *pgsink.Batch) error {
		time.Sleep(20 * time.Millisecond)
		return write(ctx, tx, b)
	}
	cfg := testConfig(env, group, "i1")
	cfg.MaxBatchRecords = 200
	s, err := pgsink.New(cfg, p, []string{topic}, slow, pgsink.Logger(logger))
	if err != nil {
		t.Fatal(err)
	}
	stop := running(t, s)
	waitFor(t, time.Minute, "a quarter of the records", func() bool { return s.Stats().Records > n/4 })
	before := s.Stats().Records
	out, err := execCommand(restart)
	if err != nil {
		t.Fatalf("%s: %v\n%s", restart, err, out)
	}
	waitFor(t, 3*time.Minute, "all records", func() bool { return s.Stats().Records >= n })
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	got, distinct := counts(t, p, rows)
	if got != n || distinct != n {
		t.Errorf("table holds %d rows of %d distinct records, want %d of %d", got, distinct, n, n)
	}
	mu.Lock()
	defer mu.Unlock()
	// The crash hits a batch either before its commit (rolled back and
	// redone: a retry) or during it (the answer lost, the outcome then
	// read from the table: a lost answer).
	if st := s.Stats(); st.Retries+st.LostAnswers == 0 || before >= n {
		t.Errorf("the crash did not hit the run: %d records before it, %d batches redone, %d commit answers lost", before, st.Retries, st.LostAnswers)
	}
	if !strings.Contains(logs.String(), "waiting for postgres") && !strings.Contains(logs.String(), "batch rolled back") {
		t.Errorf("the sink did not log what it waited for; log:\n%s", logs.String())
	}
	t.Logf("%d records before the crash; %+v", before, s.Stats())
}

// TestStopsWithErrorsThatNameTheFix checks what a user gets wrong: an
// unknown topic, an unreachable broker or database, and a handler error
// that no retry heals, which writes nothing and loses nothing.
func TestStopsWithErrorsThatNameTheFix(t *testing.T) {
	p := pool(t)
	env := broker(t)
	topic, group := env.Name("pgsink-in"), env.Name("pgsink")
	env.CreateTopics(t, 1, topic)
	rows := table(t, p)
	run := func(cfg config.Config, pl *pgxpool.Pool, topics []string, h pgsink.Handler) error {
		s, err := pgsink.New(cfg, pl, topics, h)
		if err != nil {
			return err
		}
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		defer cancel()
		return s.Run(ctx)
	}
	cfg := testConfig(env, group, "i1")
	t.Run("unknown topic", func(t *testing.T) {
		var mt *eos.MissingTopicsError
		if err := run(cfg, p, []string{"no-such-topic"}, insertRows(rows)); !errors.As(err, &mt) || !strings.Contains(err.Error(), "no-such-topic") {
			t.Errorf("err = %v, want a MissingTopicsError naming the topic", err)
		}
	})
	t.Run("unreachable broker", func(t *testing.T) {
		bad := cfg
		bad.Brokers = []string{"127.0.0.1:1"}
		bad.ConnectTimeout = 2 * time.Second
		start := time.Now()
		if err := run(bad, p, []string{topic}, insertRows(rows)); !errors.Is(err, eos.ErrUnreachable) || time.Since(start) > 10*time.Second {
			t.Errorf("err = %v after %s, want ErrUnreachable within seconds", err, time.Since(start))
		}
	})
	t.Run("unreachable database", func(t *testing.T) {
		pc, err := pgxpool.ParseConfig("postgres://postgres@127.0.0.1:1/x?connect_timeout=2")
		if err != nil {
			t.Fatal(err)
		}
		bad, err := pgxpool.NewWithConfig(t.Context(), pc)
		if err != nil {
			t.Fatal(err)
		}
		defer bad.Close()
		start := time.Now()
		err = run(cfg, bad, []string{topic}, insertRows(rows))
		if !errors.Is(err, pgsink.ErrDatabase) || !strings.Contains(err.Error(), "127.0.0.1:1") || time.Since(start) > 10*time.Second {
			t.Errorf("err = %v after %s, want ErrDatabase naming 127.0.0.1:1 within seconds", err, time.Since(start))
		}
	})
	t.Run("handler error", func(t *testing.T) {
		seed(t, env, topic, 0, 50)
		err := run(cfg, p, []string{topic}, func(ctx context.Context, tx pgx.Tx, b *pgsink.Batch) error {
			if err := insertRows(rows)(ctx, tx, b); err != nil {
				return err
			}
			_, err := tx.Exec(ctx, "INSERT INTO no_such_table VALUES (1)")
			return err
		})
		if !errors.Is(err, pgsink.ErrDatabase) || !strings.Contains(err.Error(), topic+"/0@0-") || !strings.Contains(err.Error(), "no_such_table") {
			t.Errorf("err = %v, want ErrDatabase naming the batch and the cause", err)
		}
		if got, _ := counts(t, p, rows); got != 0 {
			t.Errorf("%d rows after the failed batch, want 0", got)
		}
		s, err := pgsink.New(cfg, p, []string{topic}, insertRows(rows))
		if err != nil {
			t.Fatal(err)
		}
		stop := running(t, s)
		defer stop()
		waitFor(t, time.Minute, "the 50 records after the fix", func() bool { return s.Stats().Records == 50 })
	})
	t.Run("bad arguments", func(t *testing.T) {
		for _, opts := range [][]pgsink.Option{{pgsink.OffsetsTable("a;b")}, {pgsink.DeadLetters("x y")}, {pgsink.BatchTimeout(0)}} {
			if _, err := pgsink.New(cfg, p, []string{topic}, insertRows(rows), opts...); !errors.Is(err, pgsink.ErrInvalid) {
				t.Errorf("New: %v, want ErrInvalid", err)
			}
		}
		if _, err := pgsink.New(cfg, p, nil, insertRows(rows)); !errors.Is(err, pgsink.ErrInvalid) {
			t.Errorf("New without topics: %v, want ErrInvalid", err)
		}
	})
}

// execCommand runs a shell command line, as the restart variables hold.
func execCommand(line string) ([]byte, error) {
	return exec.Command("sh", "-c", line).CombinedOutput()
}

// lockedWriter serializes writes to a strings.Builder the test reads.
type lockedWriter struct {
	b  *strings.Builder
	mu *sync.Mutex
}

func (w lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

func zapcoreFor(b *strings.Builder, mu *sync.Mutex) zapcore.Core {
	return zapcore.NewCore(zapcore.NewConsoleEncoder(zap.NewDevelopmentEncoderConfig()), zapcore.AddSync(lockedWriter{b, mu}), zap.InfoLevel)
}

// TestStoredOffsetPastTheEndStops deletes and makes again the input topic
// of a sink that stored offsets for it: the new topic's records sit below
// the stored offsets, so reading on would skip them. Run must stop with an
// error that names the partition and the fix, and write nothing.
func TestStoredOffsetPastTheEndStops(t *testing.T) {
	p := pool(t)
	env := broker(t)
	topic, group := env.Name("pgsink-in"), env.Name("pgsink")
	env.CreateTopics(t, 1, topic)
	seed(t, env, topic, 0, 100)
	rows := table(t, p)
	s, err := pgsink.New(testConfig(env, group, "i1"), p, []string{topic}, insertRows(rows))
	if err != nil {
		t.Fatal(err)
	}
	stop := running(t, s)
	waitFor(t, time.Minute, "100 records", func() bool { return s.Stats().Records == 100 })
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if _, err := env.Admin(t).DeleteTopics(t.Context(), topic); err != nil {
		t.Fatal(err)
	}
	waitFor(t, time.Minute, "the topic to go", func() bool {
		d, err := env.Admin(t).ListTopics(t.Context(), topic)
		return err == nil && !d.Has(topic)
	})
	env.CreateTopics(t, 1, topic)
	seed(t, env, topic, 100, 10)
	s2, err := pgsink.New(testConfig(env, group, "i1"), p, []string{topic}, insertRows(rows))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	err = s2.Run(ctx)
	if !errors.Is(err, pgsink.ErrDatabase) || !strings.Contains(err.Error(), "past the partition's end") || !strings.Contains(err.Error(), "next_offset = -1") {
		t.Fatalf("Run: %v, want an error saying the stored offset is past the end, with the fix", err)
	}
	if got, _ := counts(t, p, rows); got != 100 {
		t.Errorf("%d rows, want the first 100 only", got)
	}
}

// TestLateCommitIsNotRepeated moves a partition's stored offset on behind
// the sink's back, with the same token, and writes those rows, as a commit
// that landed after the sink gave up on its answer would: the sink's next
// batch must not write them again.
func TestLateCommitIsNotRepeated(t *testing.T) {
	p := pool(t)
	env := broker(t)
	topic, group := env.Name("pgsink-in"), env.Name("pgsink")
	env.CreateTopics(t, 1, topic)
	seed(t, env, topic, 0, 100)
	rows := table(t, p)
	s, err := pgsink.New(testConfig(env, group, "i1"), p, []string{topic}, insertRows(rows))
	if err != nil {
		t.Fatal(err)
	}
	stop := running(t, s)
	defer stop()
	waitFor(t, time.Minute, "100 records", func() bool { return s.Stats().Records == 100 })
	retry(t, p, func(ctx context.Context, p *pgxpool.Pool) error {
		return pgx.BeginFunc(ctx, p, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, "INSERT INTO "+rows+` SELECT $1, 0, o, o::text FROM generate_series(100, 149) AS o`, topic); err != nil {
				return err
			}
			_, err := tx.Exec(ctx, "UPDATE eosflow_offsets SET next_offset = 150 WHERE group_id = $1", group)
			return err
		})
	})
	seed(t, env, topic, 100, 100)
	waitFor(t, time.Minute, "the last 50 records", func() bool {
		got, _ := counts(t, p, rows)
		return got >= 200
	})
	time.Sleep(500 * time.Millisecond)
	if got, distinct := counts(t, p, rows); got != 200 || distinct != 200 {
		t.Errorf("%d rows of %d records, want 200 of 200: the late commit's records were written again", got, distinct)
	}
	if st := s.Stats(); st.Fenced == 0 || st.Records != 150 {
		t.Errorf("%+v: want the batch that met the moved offset refused (Fenced) and 150 records committed by the sink", st)
	}
}

// TestBatchFailuresStopRunAfterRecoveryTimeout makes every batch fail with
// a serialization failure, which is retried: after recovery_timeout of
// them, Run stops and names the batch.
func TestBatchFailuresStopRunAfterRecoveryTimeout(t *testing.T) {
	p := pool(t)
	env := broker(t)
	topic, group := env.Name("pgsink-in"), env.Name("pgsink")
	env.CreateTopics(t, 1, topic)
	seed(t, env, topic, 0, 10)
	cfg := testConfig(env, group, "i1")
	cfg.ConnectTimeout, cfg.RecoveryTimeout = 2*time.Second, 3*time.Second
	var calls atomic.Int64
	s, err := pgsink.New(cfg, p, []string{topic}, func(ctx context.Context, tx pgx.Tx, b *pgsink.Batch) error {
		calls.Add(1)
		return &pgconn.PgError{Code: "40001", Message: "could not serialize access (injected)"}
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	start := time.Now()
	err = s.Run(ctx)
	if !errors.Is(err, pgsink.ErrDatabase) || !strings.Contains(err.Error(), "recovery_timeout") || !strings.Contains(err.Error(), topic+"/0@0-9") {
		t.Errorf("Run: %v, want ErrDatabase naming recovery_timeout and the batch", err)
	}
	if took := time.Since(start); took > 30*time.Second || calls.Load() < 2 || s.Stats().Retries < 2 {
		t.Errorf("stopped after %s, %d handler calls, %d retries: want a few retries, then an error within seconds", took, calls.Load(), s.Stats().Retries)
	}
}

// TestClaimThatCannotBeMadeStopsRun points the sink at an offsets table
// it cannot use: the claim fails, and Run returns that error instead of
// the group rejoining forever.
func TestClaimThatCannotBeMadeStopsRun(t *testing.T) {
	p := pool(t)
	env := broker(t)
	topic, group := env.Name("pgsink-in"), env.Name("pgsink")
	env.CreateTopics(t, 1, topic)
	bad := fmt.Sprintf("pgsink_bad_offsets_%d", rand.Uint32())
	retry(t, p, func(ctx context.Context, p *pgxpool.Pool) error {
		_, err := p.Exec(ctx, "CREATE TABLE IF NOT EXISTS "+bad+" (x int)")
		return err
	})
	t.Cleanup(func() { p.Exec(context.Background(), "DROP TABLE IF EXISTS "+bad) })
	s, err := pgsink.New(testConfig(env, group, "i1"), p, []string{topic}, insertRows("unused"), pgsink.OffsetsTable(bad))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	err = s.Run(ctx)
	if !errors.Is(err, pgsink.ErrDatabase) || !strings.Contains(err.Error(), "claim partitions") || !strings.Contains(err.Error(), "group_id") {
		t.Errorf("Run: %v, want ErrDatabase from the claim naming the missing column", err)
	}
}

// TestKafkaOffsetsFollowTheDatabase checks that lag tools see progress:
// the offsets the sink stored are committed to the group in Kafka too.
func TestKafkaOffsetsFollowTheDatabase(t *testing.T) {
	p := pool(t)
	env := broker(t)
	topic, group := env.Name("pgsink-in"), env.Name("pgsink")
	env.CreateTopics(t, 2, topic)
	seed(t, env, topic, 0, 300)
	rows := table(t, p)
	s, err := pgsink.New(testConfig(env, group, "i1"), p, []string{topic}, insertRows(rows))
	if err != nil {
		t.Fatal(err)
	}
	stop := running(t, s)
	defer stop()
	adm := env.Admin(t)
	var sum int64
	waitFor(t, time.Minute, "the group's Kafka offsets to reach 300", func() bool {
		offs, err := adm.FetchOffsets(t.Context(), group)
		if err != nil {
			return false
		}
		sum = 0
		offs.Each(func(o kadm.OffsetResponse) { sum += o.At })
		return sum == 300
	})
}

// TestInstancesStartingTogetherCreateTheTablesOnce starts four instances
// at once on a new offsets table: every one must start (concurrent CREATE
// TABLE IF NOT EXISTS of one table makes all but one fail in Postgres).
func TestInstancesStartingTogetherCreateTheTablesOnce(t *testing.T) {
	p := pool(t)
	env := broker(t)
	topic, group := env.Name("pgsink-in"), env.Name("pgsink")
	env.CreateTopics(t, 4, topic)
	seed(t, env, topic, 0, 400)
	rows := table(t, p)
	offsets, dead := fmt.Sprintf("pgsink_offsets_%d", rand.Uint32()), fmt.Sprintf("pgsink_dead_%d", rand.Uint32())
	t.Cleanup(func() { p.Exec(context.Background(), "DROP TABLE IF EXISTS "+offsets+", "+dead) })
	var sinks []*pgsink.Sink
	errc := make(chan error, 4)
	for i := range 4 {
		s, err := pgsink.New(testConfig(env, group, fmt.Sprint("i", i)), p, []string{topic}, insertRows(rows),
			pgsink.OffsetsTable(offsets), pgsink.DeadLetters(dead))
		if err != nil {
			t.Fatal(err)
		}
		sinks = append(sinks, s)
	}
	for _, s := range sinks {
		go func() { errc <- s.Run(t.Context()) }()
	}
	defer func() {
		for _, s := range sinks {
			s.Close()
		}
	}()
	waitFor(t, time.Minute, "all 400 records", func() bool {
		select {
		case err := <-errc:
			t.Fatalf("an instance stopped: %v", err)
		default:
		}
		got, _ := counts(t, p, rows)
		return got == 400
	})
}
