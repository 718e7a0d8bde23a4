// Package eos is the runtime: it consumes a topology's input topics, runs
// each record through the topology and produces the outputs under the
// configured delivery guarantee.
//
// Under exactly-once, every batch's outputs and input offsets commit in one
// Kafka transaction (franz-go's GroupTransactSession, KIP-447), or none of
// them do. The weaker guarantees trade that for throughput; see Guarantee
// in package config for what each can lose or repeat.
package eos

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/eosflow/eosflow/internal/runcfg"
	"github.com/eosflow/eosflow/internal/store"

	"github.com/eosflow/eosflow/config"
	"github.com/eosflow/eosflow/internal/engine"
	"github.com/eosflow/eosflow/internal/graph"
	"github.com/eosflow/eosflow/state"
	"github.com/eosflow/eosflow/topology"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"
)

// BatchInfo describes a batch about to be committed.
type BatchInfo struct {
	Records int // input records in the batch
	Outputs int // records produced for it
}

// Runner runs one topology under one configuration. Make it with New, run
// it with Run, stop it by cancelling Run's context or with Close.
type Runner struct {
	cfg       config.Config
	contract  contract // what ending a batch promises under cfg's guarantee
	top       *topology.Topology
	proc      *engine.Engine
	log       *zap.Logger
	extra     []kgo.Opt
	beforeEnd func(context.Context, BatchInfo) error
	create    *topicSpec // CreateTopics, if given

	registerer prometheus.Registerer // Metrics, if given
	metrics    *metrics              // nil when metrics are off
	health     health                // what /readyz and the state gauges report
	httpAddr   string                // where metrics_addr is served, while it is; guarded by mu

	running  atomic.Bool
	mu       sync.Mutex
	cancel   context.CancelFunc
	done     chan struct{}
	closed   bool
	closing  chan struct{} // closed when the first Close has returned
	closeErr error         // what the first Close returned; set before closing is closed

	counts   counters
	waits    waits // bounds derived from cfg
	contexts recordContexts

	loop          *streamLoop                 // polls, runs and ends the batches
	admin         *kgo.Client                 // preflight's client, kept for admin requests
	members       *membership                 // this instance's place in the group
	floor         offsetFloor                 // offsets its own commits reached; see offsetFloor
	resume        *resumeCheck                // where an assigned partition resumes
	mirror        *offsetsMirror              // exactly-once: where commits mirror their input offsets; nil otherwise
	hanging       *hangingRepair              // finds and settles hanging transactions; nil for a parent of workers
	stall         *stallCheck                 // tells a stalled pipeline from an idle one; nil for a parent of workers
	outputs       *outputTopics               // what the brokers accept on the output topics
	state         *taskStores                 // the topology's state stores; nil without
	changelogs    *changelogReader            // restores state and checks the changelog topics
	globals       *globalTables               // the global tables, nil without any
	inputs        []string                    // the topics consumed: the sources' and the repartition topics
	authz         *authz                      // names the grants a refusal lacks
	repartitioned map[string]bool             // the repartition topics
	purge         *purger                     // deletes what the group consumed of them
	idleWake      pollWake                    // ends an idle poll when tasks are assigned; see timer.go
	tracing       *tracing                    // Tracing, if given
	queryParts    partitionCounts             // source topics' partition counts, for queries
	queryPeers    func(string) (string, bool) // QueryPeers, if given

	workers *workers // workers > 1: the Runners Run runs in this one's stead; nil with one worker
	worker  bool     // one of a parent's workers, which sets the memory limit for all
}

// Option configures a Runner.
type Option interface{ apply(*Runner) }

type optFunc func(*Runner)

func (f optFunc) apply(r *Runner) { f(r) }

// Logger sets the structured logger; without it the runtime logs to
// stderr at log_level (see NewLogger). log_level filters l too, but cannot
// make it log below its own level. zap.NewNop(), or nil, silences the
// runtime.
func Logger(l *zap.Logger) Option {
	if l == nil {
		l = zap.NewNop()
	}
	return optFunc(func(r *Runner) { r.log = l })
}

// ClientOpts adds franz-go options for what config does not cover (e.g. a
// custom dialer or hooks). They are applied before the runtime's own, so
// none can switch off what the guarantee depends on: the group, static
// membership, read_committed, the transactional id and timeout, acks,
// manual commits and the rebalance callbacks that end user code's record
// contexts (and, under exactly-once or when a sink has a
// topology.Partitioner, the partitioner: choose partitions with
// topology.Partitioner).
func ClientOpts(opts ...kgo.Opt) Option {
	return optFunc(func(r *Runner) { r.extra = append(r.extra, opts...) })
}

// CreateTopics makes Run create the topology's missing topics (inputs,
// static outputs and dead-letter topics) with partitions partitions and
// replication replicas (-1 for either: the broker's default), overriding
// the default of stopping with a *MissingTopicsError. It suits development
// and examples; in production, create topics deliberately (`eosctl topic
// create`), with the partition counts and configs they need. Topics chosen
// per record (ToTopicFunc) are not known in advance and are not created; an
// output to a missing one goes to its sink's error policy.
func CreateTopics(partitions int32, replication int16) Option {
	return optFunc(func(r *Runner) { r.create = &topicSpec{partitions, replication} })
}

// topicSpec is how CreateTopics makes a topic.
type topicSpec struct {
	partitions  int32
	replication int16
}

// BeforeCommit calls fn before each batch that is set to commit ends (not
// for a batch already failed, or doomed by a revoke). An error aborts the batch
// and stops Run with that error, as a failing record under the Fail policy
// would; fault-injection tests and the demo use it, and it can veto batches.
func BeforeCommit(fn func(context.Context, BatchInfo) error) Option {
	return optFunc(func(r *Runner) { r.beforeEnd = fn })
}

// New checks cfg and t and returns a Runner; it does not connect yet.
func New(cfg config.Config, t *topology.Topology, opts ...Option) (*Runner, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return newChecked(cfg, t, opts)
}

// newChecked is New of a configuration already checked: the user's, or
// a worker's that runcfg.ForWorker derived from it, which Validate
// refuses for the worker separator in its instance_id.
func newChecked(cfg config.Config, t *topology.Topology, opts []Option) (*Runner, error) {
	if n := runcfg.WorkerCount(cfg); n > 1 {
		return newWorkers(cfg, t, n, opts)
	}
	r := &Runner{cfg: cfg, contract: contractOf(cfg), top: t, purge: &purger{every: DefaultPurgeInterval}}
	for _, o := range opts {
		o.apply(r)
	}
	r.waits = newWaits(cfg)
	var err error
	if r.log, err = runnerLogger(cfg, r.log); err != nil {
		return nil, err
	}
	r.log = r.log.
		With(zap.String("app_id", cfg.AppID), zap.String("guarantee", string(cfg.Guarantee)))
	if r.contract.atomic && t != nil {
		// A record retried for longer than a transaction may stay open
		// could never commit.
		if err := t.CheckRetryTime(cfg.TransactionTimeout); err != nil {
			return nil, fmt.Errorf("%w (transaction_timeout %s)", err, cfg.TransactionTimeout)
		}
	}
	r.members = &membership{cfg: cfg, log: r.log, admin: func() *kgo.Client { return r.admin }, own: map[string]bool{}}
	r.outputs = &outputTopics{cfg: cfg, log: r.log, admin: func() *kgo.Client { return r.admin }, static: map[string]bool{}}
	proc, err := engine.New(t, engine.AppID(cfg.AppID), engine.Logger(r.log), engine.OutputLimits(r.outputs.limit), engine.Partitions(r.outputs.partitionCount),
		engine.Stores(func(name string, task state.Task) (*store.Store, error) { return r.state.store(name, task) }),
		engine.Globals(func(name string) (graph.GlobalStore, error) { return r.globals.table(name) }))
	if err != nil {
		return nil, err
	}
	r.proc = proc
	for _, topic := range t.OutputTopics() {
		r.outputs.static[topic] = true
	}
	r.inputs = t.InputTopics()
	r.repartitioned = make(map[string]bool)
	for _, rp := range proc.Repartitions() {
		r.outputs.static[rp.Topic] = true
		r.repartitioned[rp.Topic] = true
		r.inputs = append(r.inputs, rp.Topic)
	}
	slices.Sort(r.inputs)
	r.authz = newAuthz(cfg, t, proc, r.inputs)
	r.purge.log, r.purge.admin, r.purge.topics, r.purge.to = r.log, func() *kgo.Client { return r.admin }, r.repartitioned, kadm.Offsets{}
	if specs := proc.StoreSpecs(); len(specs) > 0 {
		if cfg.Guarantee == config.AtMostOnce {
			return nil, fmt.Errorf("eos: the topology has state stores, which need their changelog written with their input offsets: use guarantee exactly-once (or at-least-once), not %s", cfg.Guarantee)
		}
		r.state = newTaskStores(specs, proc.TaskTopics(), runcfg.StateDir(cfg), cfg.AppID, r.log)
	}
	r.changelogs = newChangelogReader(r)
	if specs := proc.GlobalSpecs(); len(specs) > 0 {
		r.globals = newGlobalTables(r, specs)
	}
	r.resume = newResumeCheck(r)
	r.hanging = newHangingRepair(r)
	r.stall = newStallCheck(r)
	if r.registerer == nil && cfg.MetricsAddr != "" {
		r.registerer = ownRegistry()
	}
	if r.registerer != nil {
		if r.metrics, err = r.newMetrics(r.registerer); err != nil {
			return nil, fmt.Errorf("eos: registering metrics: %w; give each Runner its own app_id/instance_id pair or registry", err)
		}
		if cfg.MetricsAddr != "" && r.metrics.gatherer == nil {
			return nil, errors.New("eos: metrics_addr serves the registry given to Metrics, which cannot be read (not a prometheus.Gatherer); pass a *prometheus.Registry")
		}
	}
	r.loop = newStreamLoop(r)
	return r, nil
}

// Stats returns the counters so far, summed over the workers; safe to
// call while running.
func (r *Runner) Stats() Stats {
	if r.workers != nil {
		return r.workers.stats()
	}
	return r.counts.stats()
}

// Run processes until ctx ends (then it finishes the open batch and returns
// nil), Close is called, or an error stops it: a record failing under the
// Fail policy, another process with this instance id (*FencedError),
// missing topics, unreachable brokers at start, a setting the broker
// rejects (*RejectedSettingError), a record slower than the transaction
// timeout (*TransactionTimeoutError), a stall a new client did not cure
// (*StallError), or client failures without a commit for longer than
// RecoveryTimeout. Run may be called once. With workers > 1 it runs every
// worker until ctx ends, and the first error that stops a worker stops
// the others and is returned as a *WorkerError naming that worker. Every
// error Run can return, and what to do about it, is listed in
// docs/errors.md.
func (r *Runner) Run(ctx context.Context) error {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return ErrClosed
	}
	if !r.running.CompareAndSwap(false, true) {
		r.mu.Unlock()
		return errors.New("eos: Run called twice; make a new Runner per run")
	}
	ctx, cancel := context.WithCancel(ctx)
	r.cancel = cancel
	r.done = make(chan struct{})
	r.mu.Unlock()
	defer close(r.done)
	defer cancel()
	if r.cfg.MetricsAddr != "" {
		stop, err := r.serve()
		if err != nil {
			return err
		}
		defer stop()
	}
	defer r.setMemoryLimit(ctx)()
	if r.workers != nil {
		return r.runWorkers(ctx, cancel)
	}
	r.health.running.Store(true)
	defer r.health.running.Store(false)
	defer context.AfterFunc(ctx, func() { r.health.stopping.Store(true) })()

	defer r.closeAdmin()
	r.purge.ctx = ctx
	defer r.purge.wg.Wait()
	if err := r.preflight(ctx); err != nil && ctx.Err() == nil {
		return err
	}
	if ctx.Err() != nil {
		return nil // stopped during preflight
	}
	if err := r.proc.Start(ctx); err != nil {
		return err
	}
	r.loop.timers = findTimers(r.proc, r.state != nil)
	defer r.globals.close()
	if err := r.globals.start(ctx); err != nil {
		if ctx.Err() != nil {
			return nil // stopped while loading
		}
		return err
	}
	defer func() {
		if cerr := r.proc.Close(); cerr != nil {
			r.log.Warn("closing processors", zap.Error(cerr))
		}
		if r.state != nil {
			r.state.closeAll()
		}
	}()
	r.log.Info("starting", zap.String("transactional_id", runcfg.TransactionalID(r.cfg)),
		zap.Strings("inputs", r.inputs), zap.Strings("outputs", r.top.OutputTopics()))
	return r.superviseSessions(ctx)
}

// Close stops Run as a cancelled context would, and waits for it to
// return: at most what ending the open batch and closing the client may
// take (twice transaction_timeout plus 25 seconds; the workers stop
// together). It is safe to call more than once, at once and before Run:
// a later call waits for the first and returns what it returned. Do not
// call it from the pipeline's own code (a processor, a hook): it waits
// for Run, which waits for that code; cancel Run's context there instead.
func (r *Runner) Close() error {
	r.mu.Lock()
	if r.closed {
		closing := r.closing
		r.mu.Unlock()
		<-closing
		return r.closeErr
	}
	r.closed = true
	r.closing = make(chan struct{})
	cancel, done := r.cancel, r.done
	r.mu.Unlock()
	defer close(r.closing)
	if cancel == nil {
		r.closeWorkers()
		return nil
	}
	cancel()
	select {
	case <-done:
	case <-time.After(2*r.waits.end + 5*time.Second):
		r.closeErr = errors.New("eos: Close timed out waiting for Run to return; look for a goroutine stuck in user code in a dump (SIGQUIT)")
		return r.closeErr
	}
	r.closeWorkers()
	return nil
}

// superviseSessions makes a client, runs batches on it until it fails, and
// makes a new one, with capped exponential backoff, for as long as
// RecoveryTimeout allows without a committed batch. Errors no new client
// can fix stop it at once.
func (r *Runner) superviseSessions(ctx context.Context) error {
	attempt := 0
	for {
		r.members.takeOverInstance(ctx)
		s, err := r.newSession()
		if err != nil {
			return err
		}
		r.contexts.reset(ctx)
		r.health.client.Store(s.client())
		stopWatch := func() {}
		if r.state != nil {
			stopWatch = r.watchGeneration(s.client().GroupMetadata)
		}
		progressed, err := r.loop.consume(ctx, s)
		stopWatch()
		id, _ := s.client().GroupMetadata()
		r.members.note(id) // whether it committed or not: see leaveConsumerGroup
		if r.state != nil {
			r.state.endSession()
		}
		s.close()
		r.health.sessionEnded()
		r.contexts.reset(ctx)
		switch {
		case err == nil:
			r.members.leaveGroup()
			r.log.Info("stopped")
			return nil
		case isInstanceFenced(err) && !isFenced(err) && r.members.slotFreed(ctx):
			// A broker restart can restore a dead incarnation's member
			// id; the group drops it after session_timeout.
			r.log.Warn("the member that held this instance's group slot went away (a dead incarnation a broker restart restored); rejoining", zap.Error(err))
		case isFenced(err) || isInstanceFenced(err):
			ferr := &FencedError{TransactionalID: runcfg.TransactionalID(r.cfg), Err: err}
			r.health.fenced.Store(true)
			r.log.Error("fenced; stopping", zap.Error(ferr))
			return ferr
		case isFatal(err):
			return r.authz.err(err)
		case !isRebuildable(err):
			return err
		}
		if progressed {
			attempt = 0
		}
		attempt++
		failing := r.loop.failing()
		if failing > r.cfg.RecoveryTimeout {
			return fmt.Errorf("eos: no batch committed in %s of client rebuilds (recovery_timeout %s; brokers %v): %w",
				failing.Round(time.Second), r.cfg.RecoveryTimeout, r.cfg.Brokers, err)
		}
		r.counts.rebuilds.Add(1)
		wait := min(100*time.Millisecond<<min(attempt, 7), 10*time.Second)
		r.log.Warn("rebuilding client", zap.Error(err), zap.Int("attempt", attempt), zap.Duration("backoff", wait),
			zap.Duration("failing_for", failing.Round(time.Millisecond)), zap.Duration("recovery_timeout", r.cfg.RecoveryTimeout),
			zap.Strings("brokers", r.cfg.Brokers))
		select {
		case <-ctx.Done():
			r.members.leaveGroup()
			return nil
		case <-time.After(wait):
		}
	}
}

// rebuildError marks a client failure that a new client may get past.
type rebuildError struct{ err error }

func (e *rebuildError) Error() string { return e.err.Error() }
func (e *rebuildError) Unwrap() error { return e.err }

func isRebuildable(err error) bool {
	var rb *rebuildError
	return errors.As(err, &rb)
}
