package eos

import (
	"context"

	"github.com/eosflow/eosflow/internal/kafkautil"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/plugin/kzap"
	"go.uber.org/zap"
)

// session is one client generation of a commit target. The batch loop in
// consume is shared: a session does what ending a batch means for its
// target (txnsession.go, plainsession.go), and the target's contract
// (contract.go) gives the loop the rules that follow from it.
type session interface {
	// poll returns the next records. An error means none of them may be
	// processed and the client must be rebuilt (at-most-once: the offsets
	// could not be committed first).
	poll(ctx context.Context, limit int) (kgo.Fetches, error)
	// start readies the session before its first batch, and returns
	// log with what it learned (the producer id).
	start(ctx context.Context, log *zap.Logger) (*zap.Logger, error)
	begin() error
	// produce hands r to the producer; ctx bounds only a wait for buffer
	// space.
	produce(ctx context.Context, r *kgo.Record)
	// rewind moves the consumer back to the given offsets, so a batch
	// that stopped part way through its records commits only those it
	// processed and the next batch starts with the rest.
	rewind(offsets map[string]map[int32]kgo.EpochOffset)
	// end commits (or aborts) the batch. committed false with a nil error
	// means the batch was aborted and the consumer rewound to the last
	// committed offsets; any error means the client must be rebuilt, and
	// an *unknownOutcomeError inside it that the commit was sent but its
	// answer lost.
	end(commit bool) (committed bool, err error)
	// rejected returns an output the broker (or the client's own size
	// check) refused for the record itself during the last batch.
	rejected() (*kgo.Record, error)
	idle()
	client() *kgo.Client
	// generation is the group generation now; -1 before the first join.
	generation() int32
	close()
}

// newSession builds the session of r's commit target: a Kafka transaction
// under an atomic contract, else a plain client.
func (r *Runner) newSession() (session, error) {
	// No End yet on this client: callbacks count from its start.
	r.loop.revokesAtEnd, r.loop.flaggedAtEnd = r.contexts.callbacks.Load(), r.contexts.revokes.Load()
	opts, err := kafkautil.PipelineOptions(r.cfg, r.inputs, r.extra...)
	if err != nil {
		return nil, err
	}
	// The client's own warnings and errors (connection loss, retries) go
	// to the same structured log.
	opts = append(opts, kgo.WithLogger(kzap.New(r.log.Named("kgo"), kzap.LevelFn(r.clientLogLevel))))
	var part kgo.Partitioner
	if r.proc.Partitioned() || r.state != nil {
		// Some sink chooses partitions, or changelogs go to their task's
		// partition: honour them, hash the rest.
		part = choosingPartitioner{defaultPartitioner()}
	}
	if r.mirror != nil {
		if part == nil {
			part = defaultPartitioner()
		}
		part = mirrorPartitioner{base: part, topic: r.mirror.topic}
	}
	if part != nil {
		opts = append(opts, kgo.RecordPartitioner(part))
	}
	if len(r.proc.CoPartitioned()) > 0 {
		// Partition p of co-partitioned topics must go to one instance:
		// the range balancer splits topics of equal partition counts
		// alike among the same members (an eager protocol: every
		// rebalance revokes all partitions).
		opts = append(opts, kgo.Balancers(kgo.RangeBalancer()))
	}
	// User code's record contexts, and tasks' stores, follow the
	// assignment.
	opts = append(opts, kgo.OnPartitionsRevoked(r.onRevoked), kgo.OnPartitionsLost(r.onLost),
		kgo.OnPartitionsAssigned(r.onAssigned), kgo.AdjustFetchOffsetsFn(r.resume.adjustFetched))
	if m := r.metrics; m != nil {
		opts = append(opts, kgo.WithHooks(m.clientMetrics()))
	}
	if r.tracing != nil {
		opts = append(opts, kgo.WithHooks(r.tracing.hooks...))
	}
	if r.outputs.maxRecordBytes != nil {
		opts = append(opts, kgo.ProducerBatchMaxBytesFn(r.outputs.maxRecordBytes))
	}
	endTimeout := r.waits.end
	pids := producerIDs{cfg: r.cfg, bound: endTimeout}
	unacked := newUnackedOutputs(&r.loop.failingNow)
	opts = append(opts, kgo.WithHooks(unacked))
	if r.contract.atomic {
		guard := newJoinGuard(r)
		sess, err := kgo.NewGroupTransactSession(append(opts, kgo.WithHooks(guard))...)
		if err != nil {
			return nil, err
		}
		guard.doom.cl.Store(sess.Client())
		ts := &txnSession{sess: sess, endTimeout: endTimeout, guard: guard, hanging: r.hanging, pids: pids,
			revokes: &r.contexts.revokes, revokesAtEnd: r.loop.flaggedAtEnd, unacked: unacked}
		ts.promise = ts.errs.record
		ts.errs.track = true
		return ts, nil
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, err
	}
	ps := &plainSession{cl: cl, atMostOnce: r.contract.committedAtPoll, idempotent: r.contract.idempotent, pids: pids,
		endTimeout: endTimeout, floor: &r.floor, unacked: unacked}
	ps.promise = ps.errs.record
	return ps, nil
}

// clientLogLevel caps the client's logging at warnings, and follows the
// runner's logger below that: with logging off, the client builds no log
// lines at all. At debug the client's informational lines (each
// transaction's begin and end, rebalances) are logged too.
func (r *Runner) clientLogLevel() kgo.LogLevel {
	switch core := r.log.Core(); {
	case core.Enabled(zap.DebugLevel):
		return kgo.LogLevelInfo
	case core.Enabled(zap.WarnLevel):
		return kgo.LogLevelWarn
	case core.Enabled(zap.ErrorLevel):
		return kgo.LogLevelError
	}
	return kgo.LogLevelNone
}
