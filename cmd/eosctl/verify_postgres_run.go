package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eosflow/eosflow/config"
	"github.com/eosflow/eosflow/internal/kafkautil"
	"github.com/eosflow/eosflow/sink/pgsink"
	"github.com/eosflow/eosflow/tools/chaos"
)

// pgRun is one verify --sink run: its input, table, worker processes and
// faults, and the result they make.
type pgRun struct {
	v                     pgVerify
	ctx                   context.Context
	exe                   string
	brokers               []string
	workerArgs, workerEnv []string
	topic, group, table   string
	pool                  *pgxpool.Pool
	rate                  int               // records per second per worker
	external              []string          // --brokers; nil on the embedded broker
	net                   *chaos.NetHarness // nil without network faults
	cutTurn               int               // the next net-cut's action, in turn
	start                 time.Time         // when the workers started
	deadline              time.Time         // when --duration runs out
	lastRows              int64             // the table's rows when last counted

	mu      sync.Mutex
	workers map[string]*pgWorker
	res     pgVerifyResult // WorkerFailures under mu
	next    int            // the number of the next worker added
	added   bool           // the last rebalance added a worker
}

// runVerifyPostgres seeds the input, runs the workers under faults until
// the table holds every record, and judges the table: one row per record.
func runVerifyPostgres(ctx context.Context, g *globals, v pgVerify) (pgVerifyResult, error) {
	start := time.Now()
	r := &pgRun{v: v, ctx: ctx, workers: map[string]*pgWorker{}, res: pgVerifyResult{Sink: v.sink, Records: v.records}}
	exe, err := os.Executable()
	if err != nil {
		return r.res, fmt.Errorf("cannot find the eosctl binary to start workers from: %w", err)
	}
	r.exe = exe
	cfg, closeCluster, err := r.cluster(g)
	if err != nil {
		return r.res, err
	}
	defer closeCluster()
	closeNet, err := r.openNet()
	if err != nil {
		return r.res, err
	}
	defer closeNet()
	if v.brokerRestarts > 0 && v.brokerRestartCmd == "" {
		return r.res, usageErrorf("--broker-restarts with --sink needs --broker-restart-cmd")
	}
	if v.pgRestarts > 0 && v.restartCmd == "" {
		return r.res, usageErrorf("--postgres-restarts needs --postgres-restart-cmd, e.g. \"integration/postgres/pg.sh restart --hard\"")
	}
	id := fmt.Sprintf("%08x", rand.Uint32())
	r.topic, r.group, r.table = "eosverify-pg-"+id, "eosverify-pg-"+id, "eosverify_pg_"+id
	r.res.Table = r.table
	if r.pool, err = pgxpool.New(ctx, v.url); err != nil {
		return r.res, fmt.Errorf("--postgres-url: %w", err)
	}
	defer r.pool.Close()
	cleanup, err := r.prepare(*cfg)
	if cleanup != nil {
		defer cleanup()
	}
	if err != nil {
		return r.res, err
	}
	defer r.stopAll()
	r.start, r.deadline = time.Now(), time.Now().Add(v.duration)
	for range v.workers {
		if err := r.addWorker(); err != nil {
			return r.res, err
		}
	}
	if err := r.inject(r.plan()); err != nil {
		return r.res, err
	}
	return r.judge(start)
}

// say reports an event of the run with -v.
func (r *pgRun) say(format string, args ...any) {
	if r.v.events != nil {
		r.v.events(fmt.Sprintf(format, args...))
	}
}

// cluster is the Kafka of the run: --brokers with the workers' flags, or
// an embedded broker that close stops.
func (r *pgRun) cluster(g *globals) (*config.Config, func(), error) {
	cfg, err := g.externalCluster()
	if err != nil {
		return nil, nil, err
	}
	if cfg != nil {
		r.workerArgs, r.workerEnv, err = g.workerFlags(*cfg, workerLogin{})
		r.brokers, r.external = cfg.Brokers, cfg.Brokers
		return cfg, func() {}, err
	}
	if r.v.brokerRestarts > 0 {
		return nil, nil, usageErrorf("--sink with --broker-restarts needs --brokers and --broker-restart-cmd")
	}
	c, err := kfake.NewCluster(kfake.NumBrokers(1))
	if err != nil {
		return nil, nil, err
	}
	base := config.Default()
	base.Brokers = c.ListenAddrs()
	r.brokers = base.Brokers
	return &base, c.Close, nil
}

// prepare creates the table and the input topic and seeds the records,
// and paces the workers; cleanup drops what it made unless --keep-topics.
func (r *pgRun) prepare(cfg config.Config) (cleanup func(), err error) {
	ctx, v := r.ctx, r.v
	err = retryDB(ctx, func(ctx context.Context) error {
		_, err := r.pool.Exec(ctx, `CREATE TABLE IF NOT EXISTS `+r.table+` (seq bigint NOT NULL, topic text, partition int, "offset" bigint)`)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("creating table %s in the database at --postgres-url (is it up?): %w", r.table, err)
	}
	opts, err := kafkautil.ConnOptions(cfg)
	if err != nil {
		return nil, err
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, err
	}
	adm := kadm.NewClient(cl)
	cleanup = func() {
		if !v.keep {
			dctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			adm.DeleteTopics(dctx, r.topic)
			r.pool.Exec(dctx, "DROP TABLE IF EXISTS "+r.table)
			r.pool.Exec(dctx, "DELETE FROM "+pgsink.DefaultOffsetsTable+" WHERE group_id = $1", r.group)
		}
		cl.Close()
	}
	if err := kafkautil.CreateTopics(ctx, adm, int32(v.partitions), -1, nil, r.topic); err != nil {
		return cleanup, err
	}
	if err := kafkautil.ProduceAll(ctx, cl, v.records, func(i int) *kgo.Record {
		s := strconv.Itoa(i)
		return &kgo.Record{Topic: r.topic, Key: []byte(s), Value: []byte(s)}
	}); err != nil {
		return cleanup, fmt.Errorf("seeding %s: %w", r.topic, err)
	}
	r.say("seeded %d records into %s (%d partitions)", v.records, r.topic, v.partitions)
	// Pace the workers so the work outlasts the faults: about 1.2 s of
	// it per fault, one every 0.3 to 1 s, and for a network fault its
	// hold and 3 s of recovery, since rows go on during many of them.
	net := v.netCuts + v.pauses + v.coordinatorCuts
	faults := v.kills + v.terms + v.rebalances + v.brokerRestarts + v.pgRestarts + net
	held := time.Duration(v.netCuts+v.coordinatorCuts)*v.cutFor + time.Duration(v.pauses)*v.pauseFor + time.Duration(net)*3*time.Second
	r.rate = max(50, int(float64(v.records)/(float64(v.workers)*(1.2*float64(faults+1)+held.Seconds()))))
	r.res.RatePerWorker = r.rate
	return cleanup, nil
}

// startWorker starts worker name; a worker that ends without verify
// having stopped it counts as a failure.
func (r *pgRun) startWorker(name string) error {
	v := r.v
	args := append([]string{"verify", "pg-worker", "--sink", v.sink, "--brokers", strings.Join(r.brokers, ","),
		"--app", r.group, "--instance", name, "--in", r.topic, "--table", r.table, "--postgres-url", v.url,
		"--batch-records", strconv.Itoa(v.batchRecords), "--commit-delay", v.commitDelay.String(), "--rate", strconv.Itoa(r.rate),
		"--session-timeout", v.sessionTimeout.String()}, r.workerArgs...)
	cmd := exec.Command(r.exe, args...)
	cmd.Env = append(os.Environ(), r.workerEnv...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return err
	}
	w := &pgWorker{name: name, cmd: cmd, done: make(chan struct{}), stderr: &tailBuffer{}}
	if err := cmd.Start(); err != nil {
		return err
	}
	go w.stderr.read(stderr)
	go func() {
		err := cmd.Wait()
		r.mu.Lock()
		if !w.planned && r.ctx.Err() == nil {
			r.res.WorkerFailures = append(r.res.WorkerFailures, fmt.Sprintf("%s: %v: %s", name, err, w.stderr))
		}
		r.mu.Unlock()
		close(w.done)
	}()
	r.mu.Lock()
	r.workers[name] = w
	r.mu.Unlock()
	return nil
}

// addWorker starts a worker of a new name.
func (r *pgRun) addWorker() error {
	name := fmt.Sprintf("w%d", r.next)
	r.next++
	return r.startWorker(name)
}

// stopWorker signals worker name and waits for it to end (SIGKILL after
// 30 s), and forgets it.
func (r *pgRun) stopWorker(name string, sig syscall.Signal) {
	r.mu.Lock()
	w := r.workers[name]
	w.planned = true
	delete(r.workers, name)
	r.mu.Unlock()
	w.cmd.Process.Signal(sig)
	select {
	case <-w.done:
	case <-time.After(30 * time.Second):
		w.cmd.Process.Kill()
		<-w.done
	}
}

// stopAll SIGKILLs every worker left.
func (r *pgRun) stopAll() {
	for _, n := range r.names() {
		r.stopWorker(n, syscall.SIGKILL)
	}
}

// names lists the running workers.
func (r *pgRun) names() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	names := make([]string, 0, len(r.workers))
	for n := range r.workers {
		names = append(names, n)
	}
	return names
}

// restartDead starts again the workers that stopped on their own, as a
// supervisor would; their failures stay in the verdict.
func (r *pgRun) restartDead() error {
	r.mu.Lock()
	var dead []string
	for n, w := range r.workers {
		select {
		case <-w.done:
			dead = append(dead, n)
			delete(r.workers, n)
		default:
		}
	}
	r.mu.Unlock()
	for _, n := range dead {
		if err := r.startWorker(n); err != nil {
			return err
		}
	}
	return nil
}

// plan is every fault once, in a random order.
func (r *pgRun) plan() []string {
	v := r.v
	var plan []string
	for _, f := range []struct {
		n    int
		name string
	}{{v.kills, "kill"}, {v.terms, "term"}, {v.rebalances, "rebalance"}, {v.brokerRestarts, "broker"}, {v.pgRestarts, "postgres"},
		{v.netCuts, pgNetCut}, {v.pauses, pgPause}, {v.coordinatorCuts, pgCoordinatorCut}} {
		for range f.n {
			plan = append(plan, f.name)
		}
	}
	rand.Shuffle(len(plan), func(i, j int) { plan[i], plan[j] = plan[j], plan[i] })
	return plan
}

// done reports whether the table holds every record.
func (r *pgRun) done() bool {
	qctx, cancel := context.WithTimeout(r.ctx, 5*time.Second)
	defer cancel()
	var n int64
	err := r.pool.QueryRow(qctx, "SELECT count(DISTINCT seq) FROM "+r.table).Scan(&n)
	return err == nil && n >= int64(r.v.records)
}

// inject fires the plan's faults, one every 0.3 to 1 s, until they are
// all fired and the table holds every record, or --duration runs out.
func (r *pgRun) inject(plan []string) error {
	for i := 0; i < len(plan) || !r.done(); i++ {
		if time.Now().After(r.deadline) {
			r.mu.Lock()
			defer r.mu.Unlock()
			return fmt.Errorf("the table did not get every record within --duration %s (%d faults of %d injected); worker failures: %v",
				r.v.duration, min(i, len(plan)), len(plan), r.res.WorkerFailures)
		}
		select {
		case <-r.ctx.Done():
			return r.ctx.Err()
		case <-time.After(time.Duration(300+rand.IntN(700)) * time.Millisecond):
		}
		if err := r.restartDead(); err != nil {
			return err
		}
		if i >= len(plan) {
			continue
		}
		if !r.done() {
			r.res.FaultsDuringWork++
		}
		if err := r.fire(plan[i]); err != nil {
			return err
		}
	}
	return nil
}

// fire injects one fault of the plan.
func (r *pgRun) fire(fault string) error {
	names := r.names()
	victim := names[rand.IntN(len(names))]
	switch fault {
	case "kill", "term":
		sig := syscall.SIGKILL
		if fault == "term" {
			sig, r.res.Terms = syscall.SIGTERM, r.res.Terms+1
		} else {
			r.res.Kills++
		}
		r.stopWorker(victim, sig)
		if err := r.startWorker(victim); err != nil {
			return err
		}
		r.say("%s %s and restarted it", map[bool]string{true: "SIGKILLed", false: "SIGTERMed"}[sig == syscall.SIGKILL], victim)
	case "rebalance":
		return r.rebalance(victim, len(names))
	case "broker", "postgres":
		return r.restartServer(fault)
	case pgNetCut, pgPause, pgCoordinatorCut:
		r.fireNet(fault)
	}
	return nil
}

// rebalance adds a worker, or removes victim when the last rebalance
// added one (and another is left).
func (r *pgRun) rebalance(victim string, running int) error {
	if !r.added || running <= 1 {
		if err := r.addWorker(); err != nil {
			return err
		}
		r.say("added worker w%d", r.next-1)
		r.res.WorkersAdded++
		r.added = true
		return nil
	}
	r.stopWorker(victim, syscall.SIGTERM)
	r.say("removed worker %s", victim)
	r.res.WorkersRemoved++
	r.added = false
	return nil
}

// restartServer runs the restart command of the broker or the database.
func (r *pgRun) restartServer(which string) error {
	line := r.v.brokerRestartCmd
	if which == "postgres" {
		line = r.v.restartCmd
	}
	out, err := exec.CommandContext(r.ctx, "sh", "-c", line).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s: %v: %s", line, err, out)
	}
	if which == "postgres" {
		r.res.PostgresRestarts++
	} else {
		r.res.BrokerRestarts++
	}
	r.say("restarted the %s: %s", map[bool]string{true: "database", false: "broker"}[which == "postgres"], line)
	return nil
}

// judge counts the table's rows: every record once, nothing else, and no
// worker that stopped on its own.
func (r *pgRun) judge(start time.Time) (pgVerifyResult, error) {
	// A duplicate written late would land now.
	time.Sleep(time.Second)
	var distinct, outside int64
	if err := retryDB(r.ctx, func(ctx context.Context) error {
		return r.pool.QueryRow(ctx, "SELECT count(*), count(DISTINCT seq), count(*) FILTER (WHERE seq < 0 OR seq >= $1) FROM "+r.table, r.v.records).
			Scan(&r.res.Rows, &distinct, &outside)
	}); err != nil {
		return r.res, fmt.Errorf("counting the rows of %s: %w", r.table, err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	res := r.res
	res.Missing = int64(r.v.records) - (distinct - outside)
	res.Duplicates = res.Rows - distinct
	res.Seconds = time.Since(start).Seconds()
	res.Recovery = chaos.Recoveries(res.NetFaults)
	res.Pass = res.Missing == 0 && res.Duplicates == 0 && outside == 0 && len(res.WorkerFailures) == 0 && len(chaos.NetFailures(res.NetFaults)) == 0
	return res, nil
}
