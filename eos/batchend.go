package eos

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/eosflow/eosflow/internal/runcfg"
	"github.com/eosflow/eosflow/processor"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/zap"
)

// decide says whether the batch should commit. In order:
//  1. a failed record (Fail policy, or a client error) or a record that
//     carried the batch past transaction_timeout: no;
//  2. a Fail-policy record or expired entry in a plain session: yes for
//     what came before it, whose outputs are already written (a redo
//     would duplicate them);
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
	if !commit && l.contract.writesThrough && b.failed != nil && !isRebuildable(b.failed) && isPolicyFailure(b.failed) {
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
	if commit && l.contract.pastTimeout(b.start) {
		commit, b.timedOut = false, true
		l.pollMax = max(1, b.in/2)
		b.failed = &rebuildError{fmt.Errorf("batch open %s, past transaction_timeout %s; aborting it and redoing it in smaller batches",
			time.Since(b.start).Round(time.Millisecond), l.cfg.TransactionTimeout)}
	}
	return commit
}

// isPolicyFailure reports a failure under the Fail policy: of a record,
// or of an expired entry's emission (charged to the entry, which fails
// the record that expired it); the records before it are done.
func isPolicyFailure(err error) bool {
	return errors.As(err, new(*processor.RecordError)) || errors.As(err, new(*processor.ExpiryError))
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
	if endErr != nil && isFenced(endErr) && l.contract.atomic {
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
	if !l.contract.committedAtPoll {
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
	if offsets != nil && l.contract.atomic {
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
			failing.Round(time.Second), l.cfg.RecoveryTimeout, runcfg.TransactionalID(l.cfg), l.cfg.AppID)
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
	if !l.contract.writesThrough || b.out == 0 {
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
