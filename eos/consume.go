package eos

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/eosflow/eosflow/config"
	"github.com/eosflow/eosflow/internal/engine"
	"github.com/eosflow/eosflow/processor"
	"github.com/eosflow/eosflow/state"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/zap"
)

// batch is one batch: newBatch starts it, fill runs records through the
// engine (process) until it is full, decide says whether it may commit,
// and end ends it and classifies the outcome. It keeps the records taken,
// the outputs handed to the producer, and where to resume when it stops
// part way through a fetch.
type batch struct {
	l     *streamLoop
	s     session
	ctx   context.Context // Run's
	timer *time.Timer     // sets cut when the commit interval is spent
	// hardTimer sets hard when the interval is spent hardCut times over.
	hardTimer *time.Timer
	// produceCtx bounds the batch's produces; see newBatch.
	produceCtx    context.Context
	cancelProduce context.CancelFunc
	cur           *kgo.Record // the record being processed

	start   time.Time
	busy    time.Duration // spent processing records, polls left out
	in, out int
	tally   engine.Tally // outcomes of its records, counted if it commits
	failed  error
	// interrupted: user code failed on a record whose context had ended
	// (shutdown or revoke); the batch ends before that record.
	interrupted bool
	// revokes is the revoke count when the last End began; under exactly-once
	// a revoke dooms the transaction, so the batch stops taking records.
	revokes int64
	revoked bool
	// lost counts records interrupted under at-most-once, whose offsets
	// were committed before they were processed.
	lost int
	// cut: the commit interval is spent, poll no more; hard: it is spent
	// hardCut times over, take no more records either. Records already
	// polled when the interval ends are processed, so that a batch rarely
	// leaves records to rewind and fetch again (an idle round trip), and
	// one slow poll still cannot hold a transaction open for long.
	cut, hard atomic.Bool
	cuttable  bool // records may be left for the next batch (not at-most-once)
	// rest is, per partition, the first record polled but not processed;
	// the consumer is rewound there so the batch commits only what it did.
	rest map[string]map[int32]kgo.EpochOffset
	// doomed: a revoke since the last End dooms the transaction, so rest
	// was not rewound and the batch aborts; rewindRaced: a revoke landed
	// while rest was being rewound (see rewindRest).
	doomed, rewindRaced bool
	// gen is the group generation when the batch began; a rebalance that
	// completes during the batch changes it (rewindRest).
	gen int32
	// slow is the record whose processing carried the batch past
	// transaction_timeout, if one did.
	slow *kgo.Record
	// fired counts the wall-clock timers that fired in the batch.
	fired int
	// Why it did not commit, for the abort reason: BeforeCommit vetoed
	// it, it was open past transaction_timeout, or a poll failed.
	vetoed, timedOut, pollFailed bool
	// decided is when the batch was ready to end.
	decided time.Time
	// With Tracing: the batch's span and its context, and the context of
	// the record being processed, the parent of its outputs' spans.
	span            trace.Span
	spanCtx, recCtx context.Context

	// bytes sums the key, value and header bytes of the records taken;
	// reaching maxBytes (max_memory's batch share) ends the batch.
	bytes, maxBytes int64
}

func (b *batch) leave(rec *kgo.Record) {
	if b.rest == nil {
		b.rest = make(map[string]map[int32]kgo.EpochOffset)
	}
	ps := b.rest[rec.Topic]
	if ps == nil {
		ps = make(map[int32]kgo.EpochOffset)
		b.rest[rec.Topic] = ps
	}
	if _, ok := ps[rec.Partition]; !ok {
		ps[rec.Partition] = kgo.EpochOffset{Epoch: rec.LeaderEpoch, Offset: rec.Offset}
	}
}

// consume runs batches on s until ctx ends (nil), a record fails under the
// Fail policy (that error), or s breaks (a rebuildError, fencing, a stall).
// progressed reports whether any batch committed.
func (l *streamLoop) consume(ctx context.Context, s session) (progressed bool, err error) {
	log, err := l.startSession(ctx, s)
	if err != nil {
		return false, err
	}
	lastBatch := time.Now()
	for {
		if ctx.Err() != nil {
			return progressed, nil
		}
		pctx, cancel := context.WithTimeout(ctx, l.pollWait())
		l.idleWake.set(cancel)
		fetches, perr := s.poll(pctx, l.pollSize())
		l.idleWake.set(nil)
		cancel()
		if perr != nil {
			return progressed, perr
		}
		if fetches.IsClientClosed() || ctx.Err() != nil && fetches.NumRecords() == 0 {
			return progressed, nil
		}
		if err := l.fetchError(fetches); err != nil {
			return progressed, err
		}
		if fetches.NumRecords() == 0 {
			ran, committed, err := l.idlePoll(ctx, s, lastBatch, log)
			progressed = progressed || committed
			if err != nil {
				return progressed, err
			}
			if ran {
				lastBatch = time.Now()
			}
			continue
		}
		if l.state != nil {
			l.state.sync()
			// Every assigned task catches up now, with no transaction
			// open, so that no batch is cut short to restore one.
			if err := l.changelogs.restore(ctx, l.state.unready()); err != nil {
				return progressed, err
			}
		}
		committed, err := l.runBatch(ctx, s, fetches, log)
		progressed = progressed || committed
		if err != nil {
			return progressed, err
		}
		if err := l.afterBatch(ctx); err != nil {
			return progressed, err
		}
		lastBatch = time.Now()
	}
}

// startSession readies a new session before its first batch: under
// exactly-once it fences this instance's zombies and looks for what their
// transactions left open; a batch whose commit outcome was lost is settled
// before anything is redone, or a redo would be mistaken for it. It
// returns the session's logger.
func (l *streamLoop) startSession(ctx context.Context, s session) (*zap.Logger, error) {
	log := l.log.With(zap.String("transactional_id", l.cfg.TransactionalID()))
	if l.cfg.Guarantee == config.ExactlyOnce || l.cfg.Guarantee == config.Idempotent {
		// Loading the producer id first fences a zombie of this instance
		// and aborts a transaction a previous session left open, whose
		// pending offsets would otherwise block this session's offset
		// fetch (RequireStable) until that transaction timed out.
		if l.cfg.Guarantee == config.ExactlyOnce {
			// What the coordinator says of the last transaction must be
			// read before InitProducerId moves it on: it alone proves
			// which of that session's transactions committed.
			l.hanging.noteOwnTxn(ctx)
		}
		id, epoch, err := l.producerID(ctx, s)
		if err != nil {
			return log, err
		}
		log = log.With(zap.Int64("producer_id", id), zap.Int16("producer_epoch", epoch))
		if l.cfg.Guarantee == config.ExactlyOnce && ctx.Err() == nil {
			l.hanging.pid, l.hanging.pidEpoch = id, epoch
			// InitProducerId returns once the coordinator has aborted
			// what the previous epoch left open; whatever a partition
			// still holds open from it hangs (a broker crash lost the
			// marker) and would stall the group or the output's readers.
			if err := l.hanging.lookBeforeWriting(ctx); err != nil {
				return log, err
			}
		}
	}
	if err := l.settlePending(ctx); err != nil {
		return log, err
	}
	if l.state != nil {
		l.state.reload()
	}
	return log, nil
}

// idlePoll is a poll that brought no records: the stores of revoked tasks
// close, wall-clock timers fire in a transaction of their own, and a wait
// past the stall bound is checked. ran reports whether a timer batch ran.
func (l *streamLoop) idlePoll(ctx context.Context, s session, lastBatch time.Time, log *zap.Logger) (ran, committed bool, err error) {
	if l.state != nil {
		l.state.sync()
		if ran, committed, err := l.idleTimers(ctx, s, log); err != nil || ran {
			return ran, committed, err
		}
	}
	s.idle()
	if waited := time.Since(lastBatch); waited > l.waits.stall {
		if err := l.stall.checkStall(ctx, waited); err != nil {
			return false, false, err
		}
		l.healthy()
		return true, false, nil // nothing waits for us: idle is fine
	}
	return false, false, nil
}

// afterBatch catches up, between batches and with no transaction open,
// the stores of the tasks whose records a batch left for after their
// restore, and those of owned tasks with wall-clock timers.
func (l *streamLoop) afterBatch(ctx context.Context) error {
	if len(l.restorePending) > 0 {
		tasks := make([]state.Task, 0, len(l.restorePending))
		for t := range l.restorePending {
			tasks = append(tasks, t)
		}
		clear(l.restorePending)
		if err := l.changelogs.restore(ctx, l.state.owned(tasks)); err != nil {
			return err
		}
	}
	if l.state != nil {
		if err := l.restoreTimerTasks(ctx); err != nil {
			return err
		}
		l.timers.next = time.Now() // look for due timers at the next idle poll
	}
	return nil
}

// runBatch processes fetches and whatever more arrives within the commit
// interval as one batch and ends it. It returns whether the batch
// committed; a nil error with false means it was aborted and is redone.
func (l *streamLoop) runBatch(ctx context.Context, s session, fetches kgo.Fetches, log *zap.Logger) (bool, error) {
	if err := s.begin(); err != nil {
		if isFenced(err) {
			return false, l.members.classifyFence(ctx, err, 0, s.client())
		}
		return false, &rebuildError{fmt.Errorf("begin transaction: %w", err)}
	}
	b := l.newBatch(ctx, s)
	defer b.stop()
	b.fill(fetches)
	commit := b.decide()
	if l.metrics != nil {
		b.decided = time.Now()
	}
	return b.end(commit, log)
}

// newBatch starts a batch on s: its commit-interval timer, and the bound
// on its produces.
func (l *streamLoop) newBatch(ctx context.Context, s session) *batch {
	b := &batch{l: l, s: s, ctx: ctx, start: time.Now(), cuttable: l.cfg.Guarantee != config.AtMostOnce,
		revokes: l.flaggedAtEnd, gen: generation(s), maxBytes: l.cfg.Memory().BatchBytes}
	l.proc.Take() // outcomes of records no batch committed
	l.proc.Drop() // updates held back by a batch that did not commit
	b.timer = time.AfterFunc(l.cfg.CommitInterval, func() { b.cut.Store(true) })
	b.hardTimer = time.AfterFunc(l.waits.hardCut, func() { b.hard.Store(true) })
	l.abortNoted = false
	if l.tracing != nil {
		b.traceBegin()
	}
	// A full produce buffer blocks Produce; with the brokers gone it
	// would block for good. Past this the records fail and the batch
	// aborts, logged like any other. Ending the batch flushes first, so
	// cancelling afterwards drops nothing, except at-most-once, which
	// does not wait for its fire-and-forget records.
	b.produceCtx, b.cancelProduce = context.Background(), func() {}
	if b.cuttable {
		b.produceCtx, b.cancelProduce = context.WithDeadline(b.produceCtx, b.start.Add(l.waits.end))
	}
	return b
}

func (b *batch) stop() {
	b.timer.Stop()
	b.hardTimer.Stop()
	b.cancelProduce()
}

// fill processes fetches and keeps polling until the commit interval, the
// record or byte cap, a failure or shutdown: fewer, larger transactions
// cost fewer round trips. Records polled but not processed are rewound.
func (b *batch) fill(fetches kgo.Fetches) {
	l := b.l
	t0 := time.Now()
	b.process(fetches)
	b.busy += time.Since(t0)
	limit := l.cfg.MaxBatchRecords
	// The deadline is checked here as well as by the timer that sets cut:
	// on a busy machine the timer runs late, and until it does every poll
	// would return at once, spinning.
	deadline := b.start.Add(l.cfg.CommitInterval)
	for !b.stopped() && b.in < limit && b.ctx.Err() == nil && !b.cut.Load() && time.Now().Before(deadline) {
		pctx, cancel := context.WithDeadline(b.ctx, deadline)
		more, perr := b.s.poll(pctx, b.pollLimit(min(l.pollSize(), limit-b.in)))
		cancel()
		if perr != nil {
			b.failed, b.pollFailed = perr, true
			break
		}
		if more.IsClientClosed() {
			break
		}
		if err := l.fetchError(more); err != nil {
			b.failed, b.pollFailed = err, true
			break
		}
		t0 := time.Now()
		b.process(more)
		b.busy += time.Since(t0)
	}
	if len(b.rest) > 0 {
		b.rewindRest()
	}
	l.adaptPollSize(b)
}

// rewindRest moves the consumer back to the records left for the next
// batch. Under exactly-once a rewind must not land on a partition of an
// assignment that came after a revoke or a loss: franz-go's SetOffsets would then
// override the committed offsets the new assignment is fetching, and the
// abort that follows would skip the records below the rewind. Every new
// assignment follows a revoke or lost callback (eager: all partitions;
// cooperative: those that move), and the session swallows further
// callbacks only while one since the last End has already set its flag,
// so a rewind with no callback counted since the last End began cannot
// land on one. A callback since then dooms the transaction anyway (the
// session aborts it and rewinds to the committed offsets itself), so the
// batch skips the rewind and aborts; one that lands during the rewind is
// caught after it, and only then is the client rebuilt to read the
// committed offsets afresh. A rebuild is a new group member: when it is the group's leader,
// the coordinator rebalances again, so rebuilding after every rebalance
// kept groups rebalancing for as long as batches were cut.
func (b *batch) rewindRest() {
	l := b.l
	if l.cfg.Guarantee != config.ExactlyOnce {
		l.counts.rewinds.Add(1)
		b.s.rewind(b.rest)
		return
	}
	// The group generation is a second witness, independent of which
	// callbacks the session passes on: a new assignment comes with a new
	// generation (or after a lost callback, for a static member given
	// its old one back).
	moved := func() bool { return l.contexts.callbacks.Load() != l.revokesAtEnd || generation(b.s) != b.gen }
	if moved() {
		b.doomed, b.revoked = true, true
		return
	}
	l.counts.rewinds.Add(1)
	b.s.rewind(b.rest)
	b.rewindRaced = moved()
}

// generation is s's group generation now; -1 before it joined, or
// without a session.
func generation(s session) int32 {
	if s == nil {
		return -1
	}
	return s.generation()
}

// revokedSince reports, under exactly-once, a revoke or loss since the
// last End: franz-go's transact session swallows every later one until
// the next End, so the batch must not run user code, and aborts.
func (b *batch) revokedSince() bool {
	return b.l.cfg.Guarantee == config.ExactlyOnce && b.l.contexts.revokes.Load() != b.revokes
}

// stopped reports whether the batch takes no more records: a record
// failed, was interrupted, or carried it past transaction_timeout.
func (b *batch) stopped() bool { return b.failed != nil || b.interrupted || b.revoked || b.slow != nil }

// process runs the records of fs through the engine until the batch
// stops, Run's context ends, or the batch is past its hard cut (see
// hardCutAfter), its byte cap or a restore need (after at least one
// record), in the order inOrder gives. Once a record of a partition is left for the
// next batch, so are the partition's later records.
func (b *batch) process(fs kgo.Fetches) {
	b.l.inOrder(fs, b.one)
}

// inOrder calls fn for each record of fs: partition by partition, except
// that the records of co-partitioned topics (a join's, see
// graph.Graph.CoPartitioned) that belong to one task are merged in the
// order of their Kafka timestamps, each partition's own order kept, so that
// a join sees its inputs in time order as far as they have been fetched.
func (l *streamLoop) inOrder(fs kgo.Fetches, fn func(*kgo.Record)) {
	if l.state == nil || len(l.state.taskTopic) == 0 {
		fs.EachPartition(func(p kgo.FetchTopicPartition) {
			for _, rec := range p.Records {
				fn(rec)
			}
		})
		return
	}
	var tasks []state.Task
	merge := map[state.Task][][]*kgo.Record{}
	fs.EachPartition(func(p kgo.FetchTopicPartition) {
		if _, grouped := l.state.taskTopic[p.Topic]; !grouped {
			for _, rec := range p.Records {
				fn(rec)
			}
			return
		}
		if len(p.Records) == 0 {
			return
		}
		t := l.state.task(p.Topic, p.Partition)
		if merge[t] == nil {
			tasks = append(tasks, t)
		}
		for i, run := range merge[t] {
			if run[0].Topic == p.Topic && run[0].Partition == p.Partition {
				// A partition twice in one poll: one run, in order.
				merge[t][i] = append(run, p.Records...)
				return
			}
		}
		merge[t] = append(merge[t], p.Records)
	})
	for _, t := range tasks {
		runs := merge[t]
		for {
			first := -1
			for i, run := range runs {
				if len(run) > 0 && (first < 0 || run[0].Timestamp.Before(runs[first][0].Timestamp)) {
					first = i
				}
			}
			if first < 0 {
				break
			}
			fn(runs[first][0])
			runs[first] = runs[first][1:]
		}
	}
}

// one processes rec, or leaves it for the next batch.
func (b *batch) one(rec *kgo.Record) {
	l := b.l
	if _, left := b.rest[rec.Topic][rec.Partition]; left {
		return
	}
	// In flight before the revoke check: a revoke either finds it in
	// flight and waits (see recordContexts.await) or is seen here.
	uctx := l.contexts.start(rec)
	defer l.contexts.done()
	if b.revokedSince() {
		b.revoked = true
	}
	if !b.admit(rec) {
		return
	}
	b.in++
	if l.rejects.attribute {
		// Only emit reads it; a pointer stored per record costs a GC
		// write barrier while the collector marks.
		b.cur = rec
	}
	outcome, err := b.run(uctx, rec)
	if outcome == engine.Interrupted && !b.cuttable {
		// At-most-once committed its offset already: it is lost,
		// as a crash would lose it. The rest of the fetch is
		// still processed, so a shutdown loses no more.
		b.in--
		b.lost++
		return
	}
	if outcome == engine.Interrupted || err != nil {
		// Not done: the next run starts with it.
		b.interrupted, b.failed = outcome == engine.Interrupted, err
		b.in--
		if b.cuttable {
			b.leave(rec)
		}
		return
	}
	b.streamTime(rec)
	b.taken(rec)
	if b.cut.Load() && l.cfg.Guarantee == config.ExactlyOnce && time.Since(b.start) >= l.cfg.TransactionTimeout {
		b.slow = rec
	}
}

// admit reports whether the batch takes rec: not once it stopped, nor
// once it is cut and holds records; not either while rec's stores must
// catch up first, outside any transaction (the batch ends, and they
// restore). A record not taken is left for the next batch.
func (b *batch) admit(rec *kgo.Record) bool {
	l := b.l
	if b.stopped() || (b.hard.Load() || b.ctx.Err() != nil) && b.cuttable && b.in > 0 {
		if b.cuttable {
			b.leave(rec)
		}
		return false
	}
	if l.state != nil && l.state.needs(rec) {
		if l.restorePending == nil {
			l.restorePending = make(map[state.Task]bool)
		}
		l.restorePending[l.state.task(rec.Topic, rec.Partition)] = true
		b.leave(rec)
		b.cut.Store(true)
		b.hard.Store(true)
		return false
	}
	return true
}

// run runs rec through the topology, or dead-letters it when it was
// rejected before it (undecodable), traced when tracing is on.
func (b *batch) run(uctx context.Context, rec *kgo.Record) (engine.Outcome, error) {
	l := b.l
	if l.state != nil {
		l.state.beginRecord()
	}
	var span trace.Span
	if l.tracing != nil {
		uctx, span = b.traceRecord(uctx, rec)
	}
	var (
		outcome engine.Outcome
		err     error
	)
	if rej, ok := l.rejects.of(rec); ok {
		outcome, err = l.proc.Reject(rec, rej.sink, rej.err, b.emit)
	} else {
		outcome, err = l.proc.Process(uctx, rec, b.emit)
	}
	if span != nil {
		b.traceRecordEnd(span, outcome, err)
	}
	if l.state != nil && outcome != engine.Processed {
		l.state.failRecord()
	}
	return outcome, err
}

// emit hands one output of the current record to the producer.
func (b *batch) emit(rec *kgo.Record) {
	b.out++
	if b.l.rejects.attribute {
		parent := context.Background()
		if b.recCtx != nil {
			parent = b.recCtx
		}
		rec.Context = &outputSource{Context: parent, in: b.cur, sink: b.l.proc.OutputNode()}
	} else if b.recCtx != nil {
		rec.Context = b.recCtx
	}
	b.s.produce(b.produceCtx, rec)
}

// decide says whether the batch should commit. In order:
//  1. a failed record (Fail policy, or a client error) or a record that
//     carried the batch past transaction_timeout: no;
//  2. a Fail-policy record in a plain session: yes for what came before
//     it, whose outputs are already written (a redo would duplicate them);
//  3. the updates aggregations held back (flush): a failing one, no;
//  4. a BeforeCommit veto (of a batch with no failed record): no, and it
//     becomes the batch's failure;
//  5. an exactly-once batch open past transaction_timeout: no, since the
//     coordinator aborts it; it is redone in smaller batches.
//
// Nothing is flushed once the batch is set to abort.
func (b *batch) decide() bool {
	l := b.l
	// A revoke since the last End makes the session abort: run no more
	// user code for the batch, BeforeCommit included.
	commit := b.failed == nil && b.slow == nil && !b.doomed && !b.revokedSince()
	vetoable := commit
	if !commit && b.cuttable && l.cfg.Guarantee != config.ExactlyOnce && b.failed != nil && !isRebuildable(b.failed) && errors.As(b.failed, new(*processor.RecordError)) {
		commit = true
	}
	if commit {
		commit = b.wallClock() && b.flush()
	}
	if commit && vetoable && l.beforeEnd != nil {
		if err := l.beforeEnd(b.ctx, BatchInfo{Records: b.in, Outputs: b.out}); err != nil {
			b.failed, commit, b.vetoed = err, false, true
		}
	}
	if commit && l.cfg.Guarantee == config.ExactlyOnce && time.Since(b.start) >= l.cfg.TransactionTimeout {
		commit, b.timedOut = false, true
		l.pollMax = max(1, b.in/2)
		b.failed = &rebuildError{fmt.Errorf("batch open %s, past transaction_timeout %s; aborting it and redoing it in smaller batches",
			time.Since(b.start).Round(time.Millisecond), l.cfg.TransactionTimeout)}
	}
	return commit
}

// end ends the batch, committing if commit, and classifies the outcome.
// Precedence: a dead letter the broker refused stops Run; then a slow
// record; then a commit whose answer was lost (settled before any redo);
// then a failure after a partial commit (plain sessions); then a record
// or client failure; then an abort the client reported without an error
// (a rebalance, or an EndTxn answer it could not confirm, checked with the
// broker under exactly-once).
func (b *batch) end(commit bool, log *zap.Logger) (done bool, rerr error) {
	l := b.l
	if b.span != nil {
		defer func() { b.traceEnd(done, rerr) }()
	}
	b.tally = l.proc.Take()
	if b.lost > 0 {
		log.Warn("at-most-once: records whose processing was interrupted by shutdown are lost (their offsets were committed first)",
			zap.Int("records", b.lost))
	}
	offsets := b.produceEnd(commit, log)
	committed, endErr := b.endTxn(commit)
	gen := b.noteEnd(commit, committed, endErr)
	if endErr != nil && isFenced(endErr) && l.cfg.Guarantee == config.ExactlyOnce {
		endErr = l.members.classifyFence(b.ctx, endErr, time.Since(b.start), b.s.client())
	}
	l.rejects.note(b.s)
	if l.rejects.refused != nil {
		l.noteAbort(abortProduce)
		return false, l.rejects.refused
	}
	if settled, done, err := b.settleFailure(committed, offsets, endErr, gen, log); settled {
		return done, err
	}
	if !committed {
		return b.notCommitted(offsets, gen, log)
	}
	l.countCommitted(b, gen, log)
	l.advance(b.s, offsets)
	return true, nil
}

// produceEnd writes what a committing batch adds at its end, the state
// stores' changelogs and the offsets mirror, and returns the offsets it
// commits (nil when it does not commit any).
func (b *batch) produceEnd(commit bool, log *zap.Logger) map[string]map[int32]kgo.EpochOffset {
	l, s := b.l, b.s
	if !commit {
		return nil
	}
	var offsets map[string]map[int32]kgo.EpochOffset
	if l.cfg.Guarantee != config.AtMostOnce {
		offsets = s.client().UncommittedOffsets()
	}
	if l.state != nil {
		l.state.produceChanges(func(rec *kgo.Record) {
			if b.spanCtx != nil {
				rec.Context = b.spanCtx
			}
			s.produce(b.produceCtx, rec)
		})
	}
	if m := l.mirror(); m != nil {
		for _, rec := range m.records(offsets, log) {
			s.produce(b.produceCtx, rec)
		}
	}
	return offsets
}

// endTxn ends the session's transaction (or batch), traced.
func (b *batch) endTxn(commit bool) (bool, error) {
	l := b.l
	var endSpan trace.Span
	if b.span != nil {
		endSpan = b.traceEndStart(commit)
	}
	// Revokes from here on doom the next batch (rewindRest); the session
	// clears its own revoke flags at the end of End.
	l.revokesAtEnd, l.flaggedAtEnd = l.contexts.callbacks.Load(), l.contexts.revokes.Load()
	committed, endErr := b.s.end(commit)
	if endSpan != nil {
		if endErr != nil {
			endSpan.SetStatus(codes.Error, endErr.Error())
		}
		endSpan.End()
	}
	return committed, endErr
}

// noteEnd records the end in the metrics and the state stores, and
// returns the group generation the batch ended in.
func (b *batch) noteEnd(commit, committed bool, endErr error) int32 {
	l := b.l
	if l.metrics != nil {
		records := 0
		if committed {
			records = b.in
		}
		l.metrics.observeBatch(b, commit, time.Now(), records)
	}
	if l.state != nil {
		if committed && endErr == nil {
			l.state.committed()
		} else {
			l.state.aborted()
		}
	}
	member, gen := b.s.client().GroupMetadata()
	l.members.note(member)
	return gen
}

// settleFailure settles a batch that failed or whose end failed; settled is
// false when neither did.
func (b *batch) settleFailure(committed bool, offsets map[string]map[int32]kgo.EpochOffset, endErr error, gen int32, log *zap.Logger) (settled, done bool, err error) {
	l := b.l
	switch {
	case errors.As(endErr, new(*leftOpenError)):
		// Nothing was ended: neither outcome was safe (see joinGuard).
		log.Error("batch left open, neither committed nor aborted", zap.Error(endErr), zap.Int("records", b.in), zap.Int32("generation", gen))
		return true, false, endErr
	case b.slow != nil:
		l.noteAbort(abortTimeout)
		return true, false, l.slowRecord(b, log)
	case endErr != nil && offsets != nil && errors.As(endErr, new(*unknownOutcomeError)):
		// The commit was sent, but its outcome is unknown: settle it from
		// what the broker says was committed before anything is redone.
		l.pending = b.pendingAt(offsets)
		log.Warn("batch commit outcome unknown; will check what the broker committed", zap.Error(endErr), zap.Int("records", b.in), zap.Int32("generation", gen))
		return true, false, endErr
	case b.failed != nil && committed:
		// The records before a failing one committed (plain sessions).
		l.countCommitted(b, gen, log)
		return true, true, b.failed
	case b.failed != nil || endErr != nil:
		l.noteAbort(b.abortReason(endErr))
		reason := b.failed
		if endErr != nil {
			reason = endErr
		}
		log.Warn("batch aborted", zap.Error(reason), zap.Int("records", b.in), zap.Int32("generation", gen))
		l.noteRedone(b)
		if endErr != nil && (isFenced(endErr) || b.failed == nil || isRebuildable(b.failed)) {
			return true, false, endErr
		}
		return true, false, b.failed
	}
	return false, false, nil
}

// pendingAt is the batch as a commit whose outcome is to be settled.
func (b *batch) pendingAt(offsets map[string]map[int32]kgo.EpochOffset) *pendingBatch {
	return &pendingBatch{offsets: offsets, in: b.in, out: b.out, tally: b.tally}
}

// notCommitted settles an abort the session reported without an error.
// Under exactly-once End also reports an abort when EndTxn's answer was an
// error it could not confirm (it then rewinds as for an abort): the broker
// is asked before anything is redone.
func (b *batch) notCommitted(offsets map[string]map[int32]kgo.EpochOffset, gen int32, log *zap.Logger) (bool, error) {
	l, s := b.l, b.s
	if offsets != nil && l.cfg.Guarantee == config.ExactlyOnce {
		landed, err := l.landed(context.Background(), offsets, 2*time.Second)
		switch {
		case err != nil:
			l.pending = b.pendingAt(offsets)
			return false, &rebuildError{&unknownOutcomeError{fmt.Errorf("transaction reported aborted, and the group's offsets do not say: %w", err)}}
		case landed:
			// It committed, but the client rewound to what it believes
			// is committed; only a new client reads the truth.
			l.countSettled(b.pendingAt(offsets))
			return true, &rebuildError{errors.New("a commit reported as aborted had landed; restarting from the committed offsets")}
		}
	}
	l.noteAbort(b.abortReason(nil))
	l.noteRedone(b)
	if failing := l.failing(); failing > l.cfg.RecoveryTimeout {
		return false, fmt.Errorf("eos: no batch committed in %s (recovery_timeout %s): every transaction ended aborted; inspect with `eosctl txn describe %s` and `eosctl group lag %s`",
			failing.Round(time.Second), l.cfg.RecoveryTimeout, l.cfg.TransactionalID(), l.cfg.AppID)
	}
	why := "batch aborted by a rebalance; reprocessing from the last commit"
	if ts, ok := s.(*txnSession); ok && ts.doomedEnd {
		why = "batch aborted after a request to a broker failed during it; reprocessing from the last commit"
	}
	log.Info(why, zap.Int("records", b.in), zap.Int32("generation", gen))
	if b.rewindRaced {
		// The rewind raced a revoke (rewindRest); a new client reads the
		// committed offsets from the broker.
		return false, &rebuildError{errors.New("a batch cut short was aborted by a rebalance that came while it rewound; restarting from the committed offsets")}
	}
	return false, nil
}

// advance moves what the runtime knows to be committed past a batch that
// committed offsets.
func (l *streamLoop) advance(s session, offsets map[string]map[int32]kgo.EpochOffset) {
	if ps, ok := s.(*plainSession); ok {
		// What the commit reached: a partition lost while it ran is not
		// in it, though it was in offsets.
		l.floor.raise(ps.cl.CommittedOffsets())
	} else {
		l.floor.raise(offsets)
	}
	l.purge.note(offsets)
	l.rejects.committed()
}

// countCommitted records a committed batch.
func (l *streamLoop) countCommitted(b *batch, gen int32, log *zap.Logger) {
	l.counts.batch(b.in, b.out, b.tally)
	l.healthy()
	log.Debug("batch committed", zap.Int("records", b.in), zap.Int("outputs", b.out),
		zap.Duration("latency", time.Since(b.start)), zap.Int32("generation", gen))
}

// noteRedone counts the input records of a batch that did not commit its
// offsets although some of its outputs may have been written: without a
// transaction they stay written, and the redo writes them again.
func (l *streamLoop) noteRedone(b *batch) {
	if l.cfg.Guarantee == config.ExactlyOnce || l.cfg.Guarantee == config.AtMostOnce || b.out == 0 {
		return
	}
	l.counts.redone.Add(uint64(b.in))
}

// slowRecord handles a batch that one record carried past the transaction
// timeout. A stall of the whole process (a pause, a stop signal) looks the
// same, so the first time the batch is redone; the same record doing it
// again stops Run with an error naming it.
func (l *streamLoop) slowRecord(b *batch, log *zap.Logger) error {
	rec := b.slow
	terr := &TransactionTimeoutError{Topic: rec.Topic, Partition: rec.Partition, Offset: rec.Offset,
		Took: time.Since(b.start), Timeout: l.cfg.TransactionTimeout}
	key := recordKey(rec)
	if l.slowSeen != nil && *l.slowSeen == key {
		log.Error("record keeps its transaction open past transaction_timeout", zap.Error(terr))
		return terr
	}
	l.slowSeen = &key
	log.Warn("batch passed transaction_timeout on one record; redoing it once to tell a slow record from a paused process", zap.Error(terr))
	return &rebuildError{terr}
}

// hardCut is how many commit intervals a batch may take to process the
// records it polled before its interval ended; past that, it leaves the
// rest for the next batch.
const hardCut = 2

// pollSize is how many records the next poll may return: the record cap
// until a batch has timed its records, then what adaptPollSize set.
func (l *streamLoop) pollSize() int {
	if l.pollMax <= 0 || l.pollMax > l.cfg.MaxBatchRecords {
		l.pollMax = l.cfg.MaxBatchRecords
	}
	return l.pollMax
}

// adaptPollSize sizes polls to a quarter of the commit interval's worth
// of records at the last batch's processing cost per record, and to a
// quarter of the byte cap at its average record size, so that the
// interval and the cap end batches between polls: a cut inside a poll
// leaves records to rewind, and fetching them again leaves the worker
// idle for a round trip, every batch when the transform is slow. A batch
// that still left records behind shrinks polls to what it got through.
func (l *streamLoop) adaptPollSize(b *batch) {
	if b.failed != nil || b.interrupted || b.revoked || b.in == 0 {
		return
	}
	size := l.cfg.MaxBatchRecords
	if per := b.busy / time.Duration(b.in); per > 0 {
		size = int(min(max(l.cfg.CommitInterval/4/per, 1), time.Duration(l.cfg.MaxBatchRecords)))
	}
	if b.maxBytes > 0 && b.bytes > 0 {
		size = int(min(int64(size), b.maxBytes/4/max(b.bytes/int64(b.in), 1)))
	}
	if len(b.rest) > 0 {
		size = min(size, b.in)
	}
	// Grow at most twice per batch: one cheap batch among slow ones must
	// not bring back polls that outlast the interval.
	l.pollMax = max(min(size, 2*l.pollSize()), 1)
}

// producerID loads the producer id, bounded so that an unreachable
// coordinator becomes a logged rebuild rather than a silent wait.
func (l *streamLoop) producerID(ctx context.Context, s session) (int64, int16, error) {
	pctx, cancel := context.WithTimeout(ctx, l.waits.end)
	defer cancel()
	id, epoch, err := s.client().ProducerID(pctx)
	switch {
	case err == nil:
		return id, epoch, nil
	case ctx.Err() != nil:
		return 0, 0, nil // shutting down: the loop returns at once
	case isFenced(err):
		return 0, 0, err
	}
	if rs := rejectedSetting(l.cfg, err); rs != nil {
		return 0, 0, rs
	}
	if isFatal(err) {
		return 0, 0, err
	}
	return 0, 0, &rebuildError{fmt.Errorf("waiting for a producer id from the transaction coordinator of %q at %v: %w", l.cfg.TransactionalID(), l.cfg.Brokers, err)}
}

// fetchError returns the first fetch error that needs action. Context
// errors are how a bounded poll ends; group errors that no retry fixes
// stop Run; others are transient and retried by the client.
func (l *streamLoop) fetchError(fs kgo.Fetches) error {
	for _, fe := range fs.Errors() {
		switch {
		case errors.Is(fe.Err, context.Canceled), errors.Is(fe.Err, context.DeadlineExceeded):
		case isInstanceFenced(fe.Err), errors.As(fe.Err, new(*OffsetsBehindError)):
			return fe.Err
		case errors.Is(fe.Err, kerr.InvalidSessionTimeout):
			return rejectedSetting(l.cfg, fe.Err)
		case isFatal(fe.Err) && fe.Topic == "":
			return l.authz.err(fmt.Errorf("consumer group %q: %w", l.cfg.AppID, fe.Err), l.inputs...)
		case isFatal(fe.Err):
			return l.authz.err(fmt.Errorf("fetch %s/%d: %w", fe.Topic, fe.Partition, fe.Err), fe.Topic)
		}
	}
	return nil
}
