package eos

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/eosflow/eosflow/internal/runcfg"

	"github.com/eosflow/eosflow/internal/engine"
	"github.com/eosflow/eosflow/state"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/otel/trace"
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
	// held are the records of co-partitioned tasks that wait for an
	// empty partition (taskidle.go); those still held at the end are left
	// for the next batch. cutShort: records were left for another reason.
	held     map[state.Task][][]*kgo.Record
	cutShort bool
	// refetch: the batch's first records had been buffered since before
	// its poll, for up to this long (staleFor). Those that reached the
	// brokers meanwhile come with the fetch the client sends once a poll
	// took the buffered one; an adaptive batch that ended without waiting
	// for it left them for the batch after next, a whole end later.
	refetch time.Duration
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

// newBatch starts a batch on s: its commit-interval timer, and the bound
// on its produces.
func (l *streamLoop) newBatch(ctx context.Context, s session) *batch {
	b := &batch{l: l, s: s, ctx: ctx, start: time.Now(), cuttable: l.contract.cuttable(),
		revokes: l.flaggedAtEnd, gen: generation(s), maxBytes: runcfg.MemoryOf(l.cfg).BatchBytes}
	l.proc.Take() // outcomes of records no batch committed
	l.proc.Drop() // updates held back by a batch that did not commit
	b.timer = time.AfterFunc(l.cfg.CommitInterval, func() { b.cut.Store(true) })
	b.hardTimer = time.AfterFunc(l.waits.hardCut, func() { b.hard.Store(true) })
	aborted := l.abortNoted // the last batch's
	l.abortNoted = false
	if l.idle != nil && b.cuttable {
		l.idle.newBatch(b.gen, aborted)
		b.held = map[state.Task][][]*kgo.Record{}
	}
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

// fill processes fetches and keeps polling until the commit interval (with
// AdaptiveCommit, until no more records are at hand), the record or byte
// cap, a failure or shutdown: fewer, larger transactions cost fewer round
// trips. Records polled but not processed are rewound.
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
		more, perr := b.pollMore(deadline, limit)
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
		if b.adaptive() && more.NumRecords() == 0 {
			break // the records at hand are processed
		}
		t0 := time.Now()
		b.process(more)
		b.busy += time.Since(t0)
		b.capHeld(limit)
	}
	b.cutShort = len(b.rest) > 0
	b.leaveHeld()
	if len(b.rest) > 0 {
		l.idle.rewound(b.rest)
		b.rewindRest()
	}
	l.adaptPollSize(b)
}

// adaptive reports whether the batch ends once the records at hand are
// processed (AdaptiveCommit). A batch holding records back for their
// task's other partitions waits out the interval instead: ended at once,
// it would fetch the held records again for every transaction, and again
// and again when it processed none.
func (b *batch) adaptive() bool { return b.l.cfg.AdaptiveCommit && b.in > 0 && len(b.held) == 0 }

// pollMore polls for the batch's next records: until deadline, or when
// adaptive only what the client has buffered (a nil context makes
// franz-go return at once), but for one wait for the fetch that follows
// stale records (refetchWait).
func (b *batch) pollMore(deadline time.Time, limit int) (kgo.Fetches, error) {
	n := b.pollLimit(min(b.l.pollSize(), limit-b.in))
	defer func() { b.l.polled = time.Now() }()
	if b.adaptive() {
		wait := b.refetchWait()
		if wait <= 0 {
			return b.s.poll(nil, n)
		}
		if until := time.Now().Add(wait); until.Before(deadline) {
			deadline = until
		}
	}
	pctx, cancel := context.WithDeadline(b.ctx, deadline)
	defer cancel()
	return b.s.poll(pctx, n)
}

// refetchWait is how long an adaptive batch whose first records were
// stale waits, once, for the next fetch when nothing more is buffered:
// as long as the client went without polling (about one transaction's
// end). The records that reached the broker meanwhile come back in that
// one fetch.
func (b *batch) refetchWait() time.Duration {
	if b.refetch <= 0 || b.s.client().BufferedFetchRecords() > 0 {
		return 0
	}
	w := b.refetch
	b.refetch = 0
	return w
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
	if !l.contract.atomic {
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
	return b.l.contract.atomic && b.l.contexts.revokes.Load() != b.revokes
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
	b.l.inOrder(fs, b.held, b.one)
}

// inOrder calls fn for each record of fs: partition by partition, except
// that the records of co-partitioned topics (a join's, see
// graph.Graph.CoPartitioned) that belong to one task are merged in the
// order of their Kafka timestamps, each partition's own order kept, so that
// a join sees its inputs in time order as far as they have been fetched.
// With held (not nil) a task that waits for an empty partition (taskIdle)
// keeps its records there, and they merge with those of the next polls.
func (l *streamLoop) inOrder(fs kgo.Fetches, held map[state.Task][][]*kgo.Record, fn func(*kgo.Record)) {
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
	for t, runs := range held {
		tasks = append(tasks, t)
		merge[t] = runs
	}
	fs.EachPartition(func(p kgo.FetchTopicPartition) {
		if _, grouped := l.state.taskTopic[p.Topic]; !grouped {
			for _, rec := range p.Records {
				fn(rec)
			}
			return
		}
		l.idle.observe(p)
		if len(p.Records) == 0 {
			return
		}
		t := l.state.task(p.Topic, p.Partition)
		if _, ok := merge[t]; !ok {
			tasks = append(tasks, t)
		}
		for i, run := range merge[t] {
			if run[0].Topic == p.Topic && run[0].Partition == p.Partition {
				// A partition twice: one run, in order (a copy: the
				// client owns the fetch's slices).
				merge[t][i] = append(run[:len(run):len(run)], p.Records...)
				return
			}
		}
		merge[t] = append(merge[t], p.Records)
	})
	now := time.Now()
	for _, t := range tasks {
		if held != nil && l.idle.hold(t, merge[t], now) {
			held[t] = merge[t]
			continue
		}
		delete(held, t)
		byTime(merge[t], fn)
	}
}

// byTime calls fn for the records of runs, earliest timestamp first, each
// run's own order kept.
func byTime(runs [][]*kgo.Record, fn func(*kgo.Record)) {
	for {
		first := -1
		for i, run := range runs {
			if len(run) > 0 && (first < 0 || run[0].Timestamp.Before(runs[first][0].Timestamp)) {
				first = i
			}
		}
		if first < 0 {
			return
		}
		fn(runs[first][0])
		runs[first] = runs[first][1:]
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
	if b.cut.Load() && l.contract.pastTimeout(b.start) {
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
		rec.Context = &outputSource{Context: parent, in: b.cur, sink: b.l.proc.OutputNode(), exp: b.l.proc.OutputExpiry()}
	} else if b.recCtx != nil {
		rec.Context = b.recCtx
	}
	b.s.produce(b.produceCtx, rec)
}
