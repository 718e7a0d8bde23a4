package integration

import (
	"bytes"
	"context"
	"errors"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/eosflow/eosflow/codec"
	"github.com/eosflow/eosflow/config"
	"github.com/eosflow/eosflow/dedup"
	"github.com/eosflow/eosflow/dedup/pgdedup"
	"github.com/eosflow/eosflow/dedup/redisdedup"
	"github.com/eosflow/eosflow/eos"
	"github.com/eosflow/eosflow/tools/conformance"
	"github.com/eosflow/eosflow/tools/kafkatest"
	"github.com/eosflow/eosflow/tools/servertest"
	"github.com/eosflow/eosflow/tools/verdict"
	"github.com/eosflow/eosflow/topology"
)

// storeTimeout bounds each call of the paused store: well below the pause.
const storeTimeout = time.Second

// pausedStore is a dedup store on a server the test may pause: how to
// open it (with a logger), its address, its server's pid, and the word
// its log lines and errors name it by.
type pausedStore struct {
	name string
	addr string
	pid  int
	open func(t *testing.T, ns string, log *zap.Logger) dedup.Store
}

// redisToPause is the Redis of EOS_REDIS_URL, which EOS_REDIS_PID_CMD
// names the pid of, held alone (EOS_REDIS_EXCLUSIVE=1).
func redisToPause(t *testing.T) pausedStore {
	if os.Getenv("EOS_REDIS_EXCLUSIVE") != "1" {
		t.Skip("EOS_REDIS_EXCLUSIVE=1 is needed: this test pauses the Redis (SIGSTOP) other tests may be using")
	}
	url := servertest.RedisURL(t)
	pid := servertest.ServerPID(t, servertest.EnvRedisPIDCmd, "$PWD/integration/redis/redis.sh pid")
	probe, err := redisdedup.New(url)
	if err != nil {
		t.Fatal(err)
	}
	probe.Close()
	return pausedStore{name: "redis", addr: probe.Addr(), pid: pid, open: func(t *testing.T, ns string, log *zap.Logger) dedup.Store {
		s, err := redisdedup.New(url, redisdedup.Prefix("eosflow:pause-test:"+ns+":"),
			redisdedup.Timeout(storeTimeout), redisdedup.Logger(log))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}}
}

// postgresToPause is the PostgreSQL of EOS_POSTGRES_URL, which
// EOS_POSTGRES_PID_CMD names the pid of, held alone
// (EOS_POSTGRES_EXCLUSIVE=1).
func postgresToPause(t *testing.T) pausedStore {
	if os.Getenv("EOS_POSTGRES_EXCLUSIVE") != "1" {
		t.Skip("EOS_POSTGRES_EXCLUSIVE=1 is needed: this test pauses the PostgreSQL (SIGSTOP) other tests may be using")
	}
	url := servertest.PostgresURL(t)
	pid := servertest.ServerPID(t, servertest.EnvPostgresPIDCmd, "$PWD/integration/postgres/pg.sh pid")
	open := func(t *testing.T, ns string, log *zap.Logger) dedup.Store {
		table := "eosflow_pause_" + strings.ReplaceAll(ns, "-", "_")
		s, err := pgdedup.New(t.Context(), url, pgdedup.Table(table), pgdedup.Timeout(storeTimeout), pgdedup.Logger(log))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			s.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if c, err := pgx.Connect(ctx, url); err == nil {
				c.Exec(ctx, "DROP TABLE IF EXISTS "+table)
				c.Close(ctx)
			}
		})
		return s
	}
	pc, err := pgx.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	addr := net.JoinHostPort(pc.Host, strconv.Itoa(int(pc.Port)))
	return pausedStore{name: "postgres", addr: addr, pid: pid, open: open}
}

// effects counts each id's effect runs.
type effects struct {
	mu  sync.Mutex
	ran map[string]int
}

func (e *effects) run(_ context.Context, r topology.Record[[]byte]) error {
	id, _ := verdict.ID(r.Value)
	e.mu.Lock()
	e.ran[strconv.Itoa(id)]++
	e.mu.Unlock()
	return nil
}

// check returns the ids of 0..n-1 whose effect never ran, and those that
// ran more than once; it fails t on an id outside them.
func (e *effects) check(t *testing.T, n int) (missing, repeated []string) {
	t.Helper()
	e.mu.Lock()
	defer e.mu.Unlock()
	for i := range n {
		id := strconv.Itoa(i)
		switch c := e.ran[id]; {
		case c == 0:
			missing = append(missing, id)
		case c > 1:
			repeated = append(repeated, id)
		}
	}
	if len(e.ran) != n-len(missing) {
		t.Errorf("effects ran for %d ids, want only ids 0..%d", len(e.ran), n-1)
	}
	return missing, repeated
}

// once fails t unless ids 0..n-1 each ran once.
func (e *effects) once(t *testing.T, n int) {
	t.Helper()
	if missing, repeated := e.check(t, n); len(missing)+len(repeated) > 0 {
		t.Errorf("effects: %d of %d ids never ran (%.10v), %d ran more than once (%.10v)", len(missing), n, missing, len(repeated), repeated)
	}
}

// dedupPipeline is in → pace → Dedup (fail closed, policy) → upper → out.
func dedupPipeline(in, out string, store dedup.Store, e *effects, policy topology.ErrorPolicy) *topology.Topology {
	top := topology.New()
	src := topology.Source(top, in, codec.Bytes(), topology.Named("input"))
	// About 3 ms a record: a run of 3,000 lasts several seconds, so the
	// pause lands mid-run.
	paced := topology.Peek(src, "pace", func(context.Context, []byte, []byte) { time.Sleep(3 * time.Millisecond) })
	id := func(r topology.Record[[]byte]) string {
		n, ok := verdict.ID(r.Value)
		if !ok {
			return ""
		}
		return strconv.Itoa(n)
	}
	once := topology.Dedup(paced, "effect", id, store, e.run, topology.FailClosed(), topology.DedupLease(3*time.Second))
	up := topology.MapValues(once, "upper", func(_ context.Context, v []byte) ([]byte, error) { return bytes.ToUpper(v), nil })
	topology.To(up, out, codec.Bytes(), topology.Named("output"))
	top.OnError("effect", policy)
	return top
}

// pauseRun is one dedup run on a real broker whose store's server the
// test pauses once a quarter of the input committed.
type pauseRun struct {
	env     *kafkatest.Env
	in, out string
	app     string
	cfg     config.Config
	eff     *effects
	logs    *observer.ObservedLogs
	log     *zap.Logger
}

const pauseRecords = 3000

func newPauseRun(t *testing.T) *pauseRun {
	env := realEnv(t)
	x := &pauseRun{env: env, in: env.Name("in"), out: env.Name("out"), app: env.Name("dedup-pause"), eff: &effects{ran: map[string]int{}}}
	env.CreateTopics(t, 2, x.in, x.out)
	conformance.Seed(t, env, x.in, pauseRecords)
	x.cfg = env.Config(x.app, "i1", config.ExactlyOnce)
	x.cfg.MaxBatchRecords = 100
	x.cfg.TransactionTimeout = 30 * time.Second
	core, logs := observer.New(zap.InfoLevel)
	x.logs, x.log = logs, zap.New(core)
	return x
}

// start runs the pipeline on a store opened from s.
func (x *pauseRun) start(t *testing.T, s pausedStore, policy topology.ErrorPolicy) *conformance.Run {
	return conformance.Start(t, x.cfg, dedupPipeline(x.in, x.out, s.open(t, x.app, x.log), x.eff, policy), eos.Logger(x.log))
}

// waited waits up to d for a log line of the store saying what it waits
// for, naming its address.
func (x *pauseRun) waited(t *testing.T, s pausedStore, d time.Duration) time.Duration {
	t.Helper()
	begin := time.Now()
	conformance.Until(t, d, "a log line saying the run waits for "+s.name+" at "+s.addr, func() bool {
		for _, e := range x.logs.All() {
			if strings.Contains(e.Message, "waiting for "+s.name) && e.ContextMap()[s.name] == s.addr {
				return true
			}
		}
		return false
	})
	return time.Since(begin)
}

// logged fails t unless a log line's message starts with msg and names
// the store's address.
func (x *pauseRun) logged(t *testing.T, msg string, s pausedStore) {
	t.Helper()
	for _, e := range x.logs.All() {
		if strings.HasPrefix(e.Message, msg) && e.ContextMap()[s.name] == s.addr {
			return
		}
	}
	t.Errorf("no log line %q naming %s at %s", msg, s.name, s.addr)
}

// testPausedStoreRecovers pauses the store's server for 8 s, longer than
// several store timeouts and shorter than the node's retries: the run
// logs what it waits for, and after SIGCONT goes on, each effect once and
// the output exactly once.
func testPausedStoreRecovers(t *testing.T, s pausedStore) {
	x := newPauseRun(t)
	// About 19 s of retries (1 s timeouts, waits of up to 1 s): past the
	// pause; their waits, three times over, stay within the transaction
	// timeout (eos.New checks).
	run := x.start(t, s, topology.Retry(10, 500*time.Millisecond, topology.Fail(), topology.MaxBackoff(time.Second)))
	run.WaitCommitted(t, pauseRecords/4, 40*time.Second)
	procs, resume := servertest.Pause(t, s.pid)
	paused := time.Now()
	before := run.R.Stats().RecordsIn
	if before >= pauseRecords {
		t.Fatalf("the run had committed all %d records when %s was paused: the pause proves nothing", pauseRecords, s.name)
	}
	took := x.waited(t, s, 5*time.Second)
	time.Sleep(time.Until(paused.Add(8 * time.Second)))
	if !servertest.Stopped(s.pid) {
		t.Fatalf("%s pid %d is no longer stopped at the end of the pause", s.name, s.pid)
	}
	during := run.R.Stats().RecordsIn
	resume()
	t.Logf("paused %s pid %d (%d processes) for %s at %d records committed; the wait was logged after %s",
		s.name, s.pid, procs, time.Since(paused).Round(time.Millisecond), before, took.Round(time.Millisecond))
	run.WaitCommitted(t, pauseRecords, 40*time.Second)
	x.logged(t, s.name+" answers again", s)
	if during > before+uint64(x.cfg.MaxBatchRecords) {
		t.Errorf("%d records committed before the pause, %d at its end: want at most the batch in flight", before, during)
	}
	conformance.ExactlyOnce(t, x.env, x.out, pauseRecords)
	x.eff.once(t, pauseRecords)
}

// testPausedStoreStops pauses the store's server for longer than the
// node's retries: Run returns an error naming the store and its address
// while the server is still stopped; after SIGCONT a new run finishes the
// input, each effect once and the output exactly once.
func testPausedStoreStops(t *testing.T, s pausedStore) {
	x := newPauseRun(t)
	run := x.start(t, s, topology.Retry(3, 200*time.Millisecond, topology.Fail()))
	run.WaitCommitted(t, pauseRecords/4, 40*time.Second)
	_, resume := servertest.Pause(t, s.pid)
	paused := time.Now()
	if run.R.Stats().RecordsIn >= pauseRecords {
		t.Fatalf("the run had committed all %d records when %s was paused: the pause proves nothing", pauseRecords, s.name)
	}
	err := run.Wait(t, 20*time.Second)
	stoppedAfter := time.Since(paused)
	if !servertest.Stopped(s.pid) {
		t.Fatalf("%s pid %d is no longer stopped when Run returned: the error is not the pause's", s.name, s.pid)
	}
	resume()
	var se *dedup.StoreError
	if !errors.As(err, &se) || se.Store != s.name || !strings.Contains(err.Error(), s.addr) {
		t.Errorf("Run: %v, want a *dedup.StoreError naming %s at %s", err, s.name, s.addr)
	}
	x.waited(t, s, time.Second)
	t.Logf("Run returned %s after the pause: %v", stoppedAfter.Round(time.Millisecond), err)
	x.cfg.InstanceID = "i2"
	again := x.start(t, s, topology.Retry(3, 200*time.Millisecond, topology.Fail()))
	conformance.Until(t, 40*time.Second, "the group to consume everything", func() bool {
		return verdict.CaughtUp(context.Background(), x.env.Admin(t), x.app, x.in)
	})
	again.Stop()
	conformance.ExactlyOnce(t, x.env, x.out, pauseRecords)
	// No effect is lost. One whose mark could not be completed (the pause
	// caught the store call after the effect) stays pending, and runs
	// again on the redelivery once its lease expired: a failed store
	// call there is a crash between effect and mark to the next owner.
	missing, repeated := x.eff.check(t, pauseRecords)
	if len(missing) > 0 {
		t.Errorf("effects of %d ids never ran (%.10v)", len(missing), missing)
	}
	if len(repeated) > 0 && (se == nil || se.Op != "complete" || len(repeated) > 1 || repeated[0] != se.ID) {
		t.Errorf("effects of %v ran more than once; want none, or only the id whose completion failed (Run: %v)", repeated, err)
	}
	t.Logf("effects repeated: %v", repeated)
}

// TestDedupRedisPausedRecovers stops the Redis of a dedup run (SIGSTOP)
// mid-run, shorter than the node's retries.
func TestDedupRedisPausedRecovers(t *testing.T) { testPausedStoreRecovers(t, redisToPause(t)) }

// TestDedupRedisPausedStops stops the Redis of a dedup run (SIGSTOP)
// mid-run, longer than the node's retries.
func TestDedupRedisPausedStops(t *testing.T) { testPausedStoreStops(t, redisToPause(t)) }

// TestDedupPostgresPausedRecovers stops the PostgreSQL of a dedup run
// (SIGSTOP of the postmaster and its backends) mid-run, shorter than the
// node's retries.
func TestDedupPostgresPausedRecovers(t *testing.T) { testPausedStoreRecovers(t, postgresToPause(t)) }

// TestDedupPostgresPausedStops stops the PostgreSQL of a dedup run
// (SIGSTOP of the postmaster and its backends) mid-run, longer than the
// node's retries.
func TestDedupPostgresPausedStops(t *testing.T) { testPausedStoreStops(t, postgresToPause(t)) }
