package pgsink_test

import (
	"context"
	"errors"
	"net"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/eosflow/eosflow/sink/pgsink"
	"github.com/eosflow/eosflow/tools/servertest"
)

// pausedServer is the pid of the test database's server, for a test that
// stops it with SIGSTOP; it skips t unless the server is the test's alone
// (EOS_POSTGRES_EXCLUSIVE=1) and EOS_POSTGRES_PID_CMD names its pid.
func pausedServer(t *testing.T) int {
	t.Helper()
	if os.Getenv("EOS_POSTGRES_EXCLUSIVE") != "1" {
		t.Skip("EOS_POSTGRES_EXCLUSIVE=1 is needed: this test pauses the server (SIGSTOP) other tests may be using")
	}
	return servertest.ServerPID(t, servertest.EnvPostgresPIDCmd, "$PWD/integration/postgres/pg.sh pid")
}

// waitLogged waits up to d for a log entry whose message contains msg
// and whose "postgres" field names addr; it returns how long it took.
func waitLogged(t *testing.T, logs *observer.ObservedLogs, d time.Duration, addr string, msgs ...string) time.Duration {
	t.Helper()
	begin := time.Now()
	waitFor(t, d, "a log line saying what the sink waits for ("+strings.Join(msgs, " or ")+")", func() bool {
		for _, e := range logs.All() {
			for _, m := range msgs {
				if strings.Contains(e.Message, m) && e.ContextMap()["postgres"] == addr {
					return true
				}
			}
		}
		return false
	})
	return time.Since(begin)
}

// pausedSink starts a sink writing n seeded records, with a short batch
// timeout, and returns it with its logs once a quarter is committed.
func pausedSink(t *testing.T, p *pgxpool.Pool, n int, recovery time.Duration) (s *pgsink.Sink, logs *observer.ObservedLogs, rows string, run func() pgsink.Stats) {
	env := broker(t)
	topic, group := env.Name("pgsink-in"), env.Name("pgsink-pause")
	env.CreateTopics(t, 4, topic)
	seed(t, env, topic, 0, n)
	rows = table(t, p)
	core, logs := observer.New(zap.InfoLevel)
	write := insertRows(rows)
	slow := func(ctx context.Context, tx pgx.Tx, b *pgsink.Batch) error {
		time.Sleep(100 * time.Millisecond) // about 6 s for 6,000 records: the pause lands mid-run
		return write(ctx, tx, b)
	}
	cfg := testConfig(env, group, "i1")
	cfg.MaxBatchRecords = 100
	cfg.RecoveryTimeout = recovery
	mk := func() *pgsink.Sink {
		s, err := pgsink.New(cfg, p, []string{topic}, slow, pgsink.Logger(zap.New(core)), pgsink.BatchTimeout(2*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	s = mk()
	// run starts a second sink of the group, after the first stopped,
	// and waits for it to write the rest.
	run = func() pgsink.Stats {
		s2 := mk()
		stop := running(t, s2)
		waitFor(t, 40*time.Second, "the rest of the records", func() bool {
			got, _ := counts(t, p, rows)
			return got >= n
		})
		if err := stop(); err != nil {
			t.Fatal(err)
		}
		return s2.Stats()
	}
	return s, logs, rows, run
}

// TestPostgresPausedSinkWaitsAndRecovers pauses the database (SIGSTOP of
// the postmaster and its backends) for longer than several batch
// timeouts, shorter than recovery_timeout: the sink logs that it waits for
// postgres, naming it, commits nothing meanwhile, and after SIGCONT
// writes every record exactly once.
func TestPostgresPausedSinkWaitsAndRecovers(t *testing.T) {
	pid := pausedServer(t)
	p := pool(t)
	const n = 6000
	s, logs, rows, _ := pausedSink(t, p, n, 30*time.Second)
	stop := running(t, s)
	waitFor(t, 30*time.Second, "a quarter of the records", func() bool { return s.Stats().Records > n/4 })
	procs, resume := servertest.Pause(t, pid)
	paused := time.Now()
	before := s.Stats()
	if before.Records >= n {
		t.Fatalf("the sink had written all %d records when postgres was paused: the pause proves nothing", n)
	}
	addr := serverAddr(p)
	took := waitLogged(t, logs, 10*time.Second, addr, "waiting for postgres", "batch rolled back")
	time.Sleep(time.Until(paused.Add(8 * time.Second)))
	if !servertest.Stopped(pid) {
		t.Fatalf("postgres pid %d is no longer stopped (state T) at the end of the pause", pid)
	}
	during := s.Stats()
	resume()
	t.Logf("paused postgres pid %d (%d processes) for %s; the wait was logged after %s", pid, procs, time.Since(paused).Round(time.Millisecond), took.Round(time.Millisecond))
	waitFor(t, 40*time.Second, "all records after the pause", func() bool { return s.Stats().Records >= n })
	if err := stop(); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if got, distinct := counts(t, p, rows); got != n || distinct != n {
		t.Errorf("table holds %d rows of %d distinct records, want %d of %d", got, distinct, n, n)
	}
	// A batch whose COMMIT the pause caught has an unknown outcome: it
	// may count once as a lost answer, committed before the pause.
	if during.Records > before.Records+100 || before.Records >= n {
		t.Errorf("records committed: %d before the pause, %d at its end: want no more than the batch in flight while paused", before.Records, during.Records)
	}
	if st := s.Stats(); st.Retries+st.LostAnswers == 0 || st.Records != n {
		t.Errorf("%+v: want the pause to roll back or cut off a batch, and %d records committed", st, n)
	}
	t.Logf("stats %+v", s.Stats())
}

// TestPostgresPausedPastRecoveryTimeoutStops pauses the database for
// longer than recovery_timeout: Run returns an ErrDatabase naming the
// server and the query to inspect the offsets, within recovery_timeout
// and a few batch timeouts, while the server is still stopped; nothing of
// the failed batch committed, and a sink started after SIGCONT writes the
// rest, every record exactly once.
func TestPostgresPausedPastRecoveryTimeoutStops(t *testing.T) {
	pid := pausedServer(t)
	p := pool(t)
	const n = 6000
	const recovery = 5 * time.Second
	s, logs, rows, rest := pausedSink(t, p, n, recovery)
	errc := make(chan error, 1)
	go func() { errc <- s.Run(t.Context()) }()
	defer s.Close()
	waitFor(t, 30*time.Second, "a quarter of the records", func() bool { return s.Stats().Records > n/4 })
	_, resume := servertest.Pause(t, pid)
	paused := time.Now()
	if s.Stats().Records >= n {
		t.Fatalf("the sink had written all %d records when postgres was paused: the pause proves nothing", n)
	}
	addr := serverAddr(p)
	var err error
	select {
	case err = <-errc:
	case <-time.After(recovery + 4*2*time.Second + 5*time.Second):
		buf := make([]byte, 1<<20)
		buf = buf[:runtime.Stack(buf, true)]
		t.Fatalf("Run still runs %s after postgres was paused, with recovery_timeout %s; goroutines:\n%s", time.Since(paused).Round(time.Second), recovery, buf)
	}
	stoppedAfter := time.Since(paused)
	if !servertest.Stopped(pid) {
		t.Fatalf("postgres pid %d is no longer stopped when Run returned: the error is not the pause's", pid)
	}
	resume()
	if !errors.Is(err, pgsink.ErrDatabase) || !strings.Contains(err.Error(), addr) || !strings.Contains(err.Error(), "SELECT * FROM") ||
		!strings.Contains(err.Error(), "pg_isready -h ") {
		t.Errorf("Run: %v, want ErrDatabase naming %s, the command to check it and the query to inspect the offsets", err, addr)
	}
	waitLogged(t, logs, time.Second, addr, "waiting for postgres", "batch rolled back")
	t.Logf("Run returned %s after the pause: %v", stoppedAfter.Round(time.Millisecond), err)
	first := s.Stats()
	st := rest()
	if got, distinct := counts(t, p, rows); got != n || distinct != n {
		t.Errorf("table holds %d rows of %d distinct records, want %d of %d", got, distinct, n, n)
	}
	// A batch whose COMMIT the pause froze may have committed when the
	// server resumed, unknown to the first sink: the sums may fall short
	// of n by it, never exceed n.
	if first.Records+st.Records > n || first.Records+st.Records < n-100 {
		t.Errorf("the sinks counted %d + %d records committed, want %d (less a batch at most)", first.Records, st.Records, n)
	}
	t.Logf("first sink %+v; second %+v", first, st)
}

// serverAddr is the pool's server as the sink names it.
func serverAddr(p *pgxpool.Pool) string {
	c := p.Config().ConnConfig
	return net.JoinHostPort(c.Host, strconv.Itoa(int(c.Port)))
}
