package chaos

import (
	"cmp"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/eosflow/eosflow/config"
	"github.com/eosflow/eosflow/internal/kafkautil"
	"github.com/eosflow/eosflow/tools/verdict"
	"github.com/eosflow/eosflow/topology"
	"github.com/redis/go-redis/v9"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// run is one verification run: its options, its result as the steps fill
// it in, and what the steps share, from the broker and the clients to the
// workers and the loop that injects the faults.
type run struct {
	o        Options
	res      Result
	began    time.Time // when Run was called
	start    time.Time // when the workers started
	counting bool      // PipelineCount, judged key by key
	grouped  bool      // counting by value, through a repartition topic
	rng      *rand.Rand

	logDir    string
	tempLogs  bool // logDir is the run's own, removed when the run passes
	brokerLog *os.File
	br        broker
	app       string   // the group, and the prefix of the topics
	inputs    []string // the input topics: the join has two
	ev        eventRun // the event-time pipelines' seed and judge; nil for the others
	rdb       *redis.Client
	cl        *kgo.Client
	adm       *kadm.Client
	base      []kgo.Opt
	ends      kadm.ListedOffsets // the inputs' end offsets; a scale run's come later
	live      *liveReader
	plan      []fault
	stateDir  string
	fl        *fleet
	sc        *scaleRun   // nil unless Options.Scale
	net       *NetHarness // nil unless the run plans network faults
	nw        netWatch

	pctx         context.Context // ends when the workers have stopped
	stopProgress context.CancelFunc
	consumed     atomic.Int64 // input records whose offsets the group committed
	// report serialises the calls of Options.Events and Options.Progress:
	// the loop and the global join's table writer report from goroutines
	// of their own.
	report sync.Mutex

	loopState
	cleanups []func()
}

// newRun starts the result of a run of o, which has its defaults.
func newRun(o Options) *run {
	r := &run{
		o: o, began: time.Now(), logDir: o.LogDir, tempLogs: o.LogDir == "",
		counting: o.Pipeline == PipelineCount, grouped: o.GroupBy == GroupingValue,
		rng: rand.New(rand.NewPCG(o.Seed, o.Seed>>1^0x9e3779b97f4a7c15)),
	}
	res := &r.res
	res.Guarantee, res.Workers, res.Seed, res.AbortedRecords = string(o.Guarantee), o.Workers, o.Seed, -1
	res.Pipeline, res.State, res.GroupBy = string(o.Pipeline), string(o.State), string(o.GroupBy)
	res.ProcessWorkers, res.GroupProtocol, res.ScalePlan = o.ProcessWorkers, string(o.GroupProtocol), o.Scale
	if len(o.Scale) > 0 {
		res.InputRate = o.InputRate
	}
	return r
}

// atEnd has f run when Run returns: what a step sets up outlives the
// step, and goes after what later steps set up, as a defer in Run would.
func (r *run) atEnd(f func()) { r.cleanups = append(r.cleanups, f) }

// cleanUp runs what atEnd was given, the last first; one that panics
// does not keep the others from running.
func (r *run) cleanUp() {
	for _, f := range r.cleanups {
		defer f()
	}
}

// execute carries out the run, step by step; an error is what stopped it.
func (r *run) execute(ctx context.Context) error {
	if err := r.openLogs(); err != nil {
		return err
	}
	if err := r.startBroker(ctx); err != nil {
		return err
	}
	if err := r.startNet(ctx); err != nil {
		return err
	}
	r.nameTopics()
	for _, step := range []func(context.Context) error{r.openRedis, r.createTopics, r.seed} {
		if err := step(ctx); err != nil {
			return err
		}
	}
	if err := r.startLive(); err != nil {
		return err
	}
	r.schedule()
	if err := r.makeStateDir(); err != nil {
		return err
	}
	r.makeFleet()
	r.startProgress(ctx)
	r.start = time.Now()
	r.fl.began = r.start
	r.announce()
	if err := r.startWorkers(); err != nil {
		return err
	}
	r.startUpdates()
	if err := r.loop(ctx); err != nil {
		return err
	}
	if err := r.probe(ctx); err != nil {
		return err
	}
	r.stopUpdates()
	r.stopWorkers(ctx)
	return r.judge(ctx)
}

// event reports one line through Options.Events, stamped with the time
// since the workers started and the share of the input consumed; safe
// from any goroutine.
func (r *run) event(format string, a ...any) {
	pct := 100 * float64(r.consumed.Load()) / float64(r.o.Records)
	r.report.Lock()
	defer r.report.Unlock()
	r.o.Events(fmt.Sprintf("%7.1fs %3.0f%%  ", time.Since(r.start).Seconds(), pct) + fmt.Sprintf(format, a...))
}

// openLogs makes the log directory, a temporary one unless Options.LogDir
// names it, and opens the broker's log in it.
func (r *run) openLogs() error {
	var err error
	if r.tempLogs {
		if r.logDir, err = os.MkdirTemp("", "eosverify-"); err != nil {
			return fmt.Errorf("chaos: making a log directory: %w", err)
		}
	} else if err := os.MkdirAll(r.logDir, 0o755); err != nil {
		return fmt.Errorf("chaos: --log-dir: %w", err)
	}
	r.res.LogDir = r.logDir
	r.brokerLog, err = os.OpenFile(filepath.Join(r.logDir, "broker.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("chaos: opening the broker log: %w", err)
	}
	r.atEnd(func() { r.brokerLog.Close() })
	return nil
}

// startBroker starts the embedded broker, or takes the cluster in
// Options.Brokers.
func (r *run) startBroker(ctx context.Context) error {
	if len(r.o.Brokers) == 0 {
		e, err := startEmbedded(ctx, r.o.Exe, filepath.Join(r.logDir, "broker-data"), r.o.Partitions, r.brokerLog)
		if err != nil {
			return err
		}
		r.br = e
	} else {
		r.br = &external{brokers: r.o.Brokers, restartCmd: r.o.BrokerRestartCmd, dir: r.o.BrokerRestartDir, log: r.brokerLog}
	}
	r.atEnd(r.br.close)
	r.res.Broker = r.br.describe()
	return nil
}

// nameTopics names the run's group and topics after a random suffix, so
// that runs against one cluster stay apart, and makes the event-time
// pipelines' seed for them.
func (r *run) nameTopics() {
	res := &r.res
	r.app = "eosverify-" + fmt.Sprintf("%08x", rand.Uint32())
	res.Input, res.Output = r.app+"-in", r.app+"-out"
	if r.counting {
		res.Changelog = topology.ChangelogTopic(r.app, CountStore)
	}
	if r.grouped {
		res.Repartition = topology.RepartitionTopic(r.app, GroupByNode)
	}
	r.inputs = []string{res.Input}
	if r.o.Pipeline == PipelineJoin {
		res.Payments = r.app + "-payments"
		r.inputs = append(r.inputs, res.Payments)
	}
	if r.o.Pipeline == PipelineGlobalJoin {
		res.Table = r.app + "-customers"
	}
	r.ev = newEventRun(r.o, res.Input, cmp.Or(res.Payments, res.Table))
}

// openRedis connects to the Redis of PipelineDedup, whose keys the run
// names and deletes at its end unless Options.KeepTopics.
func (r *run) openRedis(ctx context.Context) error {
	if r.o.Pipeline != PipelineDedup {
		return nil
	}
	var err error
	if r.rdb, err = dedupRedis(ctx, r.o.RedisURL); err != nil {
		return err
	}
	r.atEnd(func() { r.rdb.Close() })
	v := &DedupVerdict{DedupMode: r.o.DedupMode, EffectsKey: r.app + ":effects", DedupPrefix: r.app + ":dedup:"}
	r.res.DedupVerdict = v
	if !r.o.KeepTopics {
		r.atEnd(func() { dropDedupKeys(r.rdb, v) })
	}
	return nil
}

// createTopics connects the verifier's own clients and creates the input
// and output topics on every broker.
func (r *run) createTopics(ctx context.Context) error {
	cfg := r.o.Base
	cfg.Brokers = r.br.addrs()
	if cfg.ConnectTimeout <= 0 {
		cfg.ConnectTimeout = config.DefaultConnectTimeout
	}
	conn, err := kafkautil.Connect(cfg)
	if err != nil {
		return err
	}
	r.atEnd(conn.Close)
	r.cl, r.adm, r.base = conn.Client, conn.Admin, conn.Opts
	cctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	topics := append(slices.Clone(r.inputs), r.res.Output)
	err = kafkautil.CreateTopics(cctx, r.adm, r.o.Partitions, -1, nil, topics...)
	if err == nil && r.res.Table != "" {
		// Not co-partitioned with the orders: that is what a global table is for.
		err = kafkautil.CreateTopics(cctx, r.adm, globalPartitions(r.o.Partitions), -1, nil, r.res.Table)
		topics = append(topics, r.res.Table)
	}
	if err == nil {
		// A worker asks any broker; a scale run starts its first at once.
		err = kafkautil.AwaitTopicsOnEveryBroker(cctx, r.cl, topics...)
	}
	if err != nil {
		return fmt.Errorf("chaos: creating topics %s: %w", strings.Join(topics, ", "), err)
	}
	r.dropTopicsAtEnd()
	return nil
}

// dropTopicsAtEnd has the run's group and topics deleted from an external
// cluster when the run ends, unless Options.KeepTopics.
func (r *run) dropTopicsAtEnd() {
	if _, embedded := r.br.(*embedded); embedded || r.o.KeepTopics {
		return
	}
	if r.ev != nil {
		r.atEnd(func() { deleteAppTopics(r.adm, r.app) }) // inputs, output, the stores' changelogs and the offsets mirror
	}
	r.atEnd(func() {
		dctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_, _ = r.adm.DeleteGroups(dctx, r.app)
		topics := []string{r.res.Input, r.res.Output}
		if r.counting {
			topics = append(topics, r.res.Changelog)
		}
		if r.grouped {
			topics = append(topics, r.res.Repartition)
		}
		if r.o.Guarantee == config.ExactlyOnce {
			topics = append(topics, topology.OffsetsTopic(r.app))
		}
		_, _ = r.adm.DeleteTopics(dctx, topics...)
	})
}

// seed writes the input, except a scale run's, which writes it as it
// goes (see startFeed), and reads where the inputs end.
func (r *run) seed(ctx context.Context) error {
	sctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	var err error
	switch {
	case len(r.o.Scale) > 0:
	case r.ev != nil:
		err = seedEvents(sctx, r.base, r.ev.records())
	case r.grouped:
		err = verdict.SeedByValue(sctx, r.cl, r.res.Input, r.o.Records, r.o.Keys)
	default:
		err = verdict.Seed(sctx, r.cl, r.res.Input, r.o.Records, r.o.Keys, 32)
	}
	cancel()
	if err != nil {
		return fmt.Errorf("chaos: seeding %d records: %w", r.o.Records, err)
	}
	if len(r.o.Scale) > 0 {
		return nil // a scale run's ends are known once it stops writing
	}
	r.ends, err = r.adm.ListEndOffsets(ctx, r.inputs...)
	if err == nil {
		err = r.ends.Error()
	}
	if err != nil {
		return fmt.Errorf("chaos: reading the input's end offsets: %w", err)
	}
	return nil
}

// startLive starts the read_committed reader that watches the output
// while the workers run.
func (r *run) startLive() error {
	var err error
	if r.ev != nil {
		r.live, err = startLiveIdentities(r.base, r.res.Output, r.ev.identify)
	} else {
		r.live, err = startLiveReader(r.base, r.res.Output, r.o.Records, r.counting)
	}
	if err != nil {
		return err
	}
	r.atEnd(r.live.stop)
	return nil
}

// schedule plans the faults and the workers' pace.
func (r *run) schedule() {
	r.plan = planFaults(r.rng, r.o.counts())
	r.res.FaultsPlanned = len(r.plan)
	r.res.Rate = r.o.Rate
	if r.res.Rate == 0 && len(r.o.Scale) == 0 {
		r.res.Rate = autoRate(r.o.Records, r.o.Workers, len(r.plan), r.o.held())
	}
}

// makeStateDir makes the directory the stateful pipelines' workers keep
// their stores in.
func (r *run) makeStateDir() error {
	if !r.o.Pipeline.stateful() {
		return nil
	}
	// Each worker id keeps its stores across its restarts, so pebble
	// resumes from the offset its database kept (after a SIGKILL, that of
	// its last flush); they go when the run ends, after the workers.
	r.stateDir = filepath.Join(r.logDir, "state")
	if err := os.MkdirAll(r.stateDir, 0o755); err != nil {
		return fmt.Errorf("chaos: making the workers' state directory: %w", err)
	}
	dir := r.stateDir
	r.atEnd(func() { os.RemoveAll(dir) })
	return nil
}

// makeFleet makes the fleet of worker processes, stopped when the run
// ends.
func (r *run) makeFleet() {
	env := append(slices.Clip(r.o.WorkerEnv), r.o.workerEnv()...)
	if r.rdb != nil {
		env = append(slices.Clip(env), EnvRedisURL+"="+r.o.RedisURL)
	}
	r.fl = &fleet{
		exe: r.o.Exe, env: env, logDir: r.logDir, stateDir: r.stateDir,
		procs: map[string]*proc{}, pending: map[string]time.Time{},
		argsFor: r.workerArgs,
	}
	r.atEnd(func() {
		r.fl.stopAll(stopGrace)
		r.res.AbortedTransactions += r.fl.reapExited(&r.res, func(string, ...any) {}, false)
		r.res.RestartToFirstCommit = r.fl.restartLatency()
	})
}

// workerArgs is the command line of worker id.
func (r *run) workerArgs(id string) []string {
	o, res := r.o, &r.res
	var state []string
	if r.counting {
		state = []string{"--pipeline", string(o.Pipeline), "--state", string(o.State), "--group-by", string(o.GroupBy),
			"--state-dir", filepath.Join(r.stateDir, id)}
	}
	if r.ev != nil {
		state = []string{"--pipeline", string(o.Pipeline), "--state", string(o.State), "--state-dir", filepath.Join(r.stateDir, id)}
		if res.Payments != "" {
			state = append(state, "--payments", res.Payments)
		}
		if res.Table != "" {
			state = append(state, "--table", res.Table)
		}
		if o.TableSnapshot {
			state = append(state, "--table-snapshot")
		}
	}
	if res.DedupVerdict != nil {
		state = []string{"--pipeline", string(o.Pipeline), "--dedup-mode", string(o.DedupMode),
			"--dedup-prefix", res.DedupVerdict.DedupPrefix, "--effects-key", res.DedupVerdict.EffectsKey}
	}
	return append(append([]string{"verify", "worker",
		"--brokers", strings.Join(r.br.addrs(), ","),
		"--app", r.app, "--instance", id, "--in", res.Input, "--out", res.Output,
		"--guarantee", string(o.Guarantee),
		"--rate", strconv.Itoa(res.Rate),
		"--commit-delay", o.CommitDelay.String(),
		"--abort-rate", strconv.FormatFloat(o.AbortRate, 'g', -1, 64),
		"--batch-records", strconv.Itoa(o.BatchRecords),
		"--session-timeout", o.SessionTimeout.String(),
	}, state...), o.WorkerArgs...)
}

// startProgress keeps consumed up to date until the workers have stopped.
func (r *run) startProgress(ctx context.Context) {
	r.pctx, r.stopProgress = context.WithCancel(ctx)
	r.atEnd(r.stopProgress)
	go pollConsumed(r.pctx, r.adm, r.app, r.ends, &r.consumed)
}

// startUpdates starts what the pipeline's run writes to its inputs while
// the workers run: the global join's table updates.
func (r *run) startUpdates() {
	if u, ok := r.ev.(tableUpdater); ok {
		u.startUpdates(r.base, r.app+"-table-writer", r.event)
		r.atEnd(u.stopUpdates)
	}
}

// stopUpdates ends them, once the input is consumed.
func (r *run) stopUpdates() {
	if u, ok := r.ev.(tableUpdater); ok {
		u.stopUpdates()
	}
}
