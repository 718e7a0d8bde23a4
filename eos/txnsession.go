package eos

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/eosflow/eosflow/internal/runcfg"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"
)

// txnSession: every batch is one transaction carrying its input offsets.
type txnSession struct {
	sess       *kgo.GroupTransactSession
	errs       produceErrs
	promise    func(*kgo.Record, error) // errs.record, bound once: a method value per Produce would allocate per record
	endTimeout time.Duration
	// fence, set for one batch of timer firings alone, is committed
	// again so the group's generation fences the batch (see fenceOffsets).
	fence map[string]map[int32]kgo.EpochOffset
	// guard looks for a transaction joined to an older one before the
	// batch ends, once a broker may have restarted (see joinGuard).
	guard *joinGuard
	// doomedEnd: the last End aborted a doomed transaction (see doom.go).
	doomedEnd bool
	// produced: the transaction was handed a record (see end).
	produced bool
	// revokes counts the revokes and losses franz-go's session passed
	// on, revokesAtEnd its value when the last End began: a change means
	// the session failed the transaction (see nothingToCommit).
	revokes      *atomic.Int64
	revokesAtEnd int64
	hanging      *hangingRepair
	pids         producerIDs
	unacked      *unackedOutputs // names the partitions of a flush that ran out of time
}

// start loads the producer id, which fences a zombie of this instance and
// aborts a transaction a previous session left open, whose pending offsets
// would otherwise block this session's offset fetch (RequireStable) until
// that transaction timed out. What the coordinator says of the last
// transaction is read first, as it alone proves which of that session's
// transactions committed. InitProducerId returns once the coordinator has
// aborted what the previous epoch left open; whatever a partition still
// holds open from it hangs (a broker crash lost the marker) and would stall
// the group or the output's readers, so it is looked for before writing.
func (s *txnSession) start(ctx context.Context, log *zap.Logger) (*zap.Logger, error) {
	s.hanging.noteOwnTxn(ctx)
	id, epoch, err := s.pids.load(ctx, s.sess.Client())
	if err != nil {
		return log, err
	}
	log = log.With(zap.Int64("producer_id", id), zap.Int16("producer_epoch", epoch))
	if ctx.Err() != nil {
		return log, nil
	}
	s.hanging.pid, s.hanging.pidEpoch = id, epoch
	return log, s.hanging.lookBeforeWriting(ctx)
}

func (s *txnSession) poll(ctx context.Context, limit int) (kgo.Fetches, error) {
	return s.sess.PollRecords(ctx, limit), nil
}

// begin forgets failures of records of an earlier, aborted batch.
func (s *txnSession) begin() error {
	s.errs.reset()
	if s.guard.doom.unsafe.Load() {
		return &rebuildError{errAbandoned}
	}
	if err := s.sess.Begin(); err != nil {
		return err
	}
	s.produced = false
	s.guard.begin(s.sess.Client(), s.endTimeout)
	return nil
}

// flush waits until the batch's records are written, unless the
// transaction is doomed meanwhile; end then aborts it.
func (s *txnSession) flush(ctx context.Context) error {
	fctx, stop := s.guard.doom.watch(ctx)
	err := s.sess.Client().Flush(fctx)
	stop()
	if s.guard.isDoomed() {
		return nil
	}
	if err == nil {
		err = s.errs.settle(ctx)
	}
	if err != nil {
		return &rebuildError{&produceError{unackedAfter(err, s.unacked, s.sess.Client(), s.pids.cfg.ConnectTimeout)}}
	}
	return nil
}

// settleDoomed waits until the doomed transaction's records are settled
// (see doom.go), and returns perr, or else the first failure of a record
// that is not the doom's drop, and whether records were abandoned.
func (s *txnSession) settleDoomed(ctx context.Context, commit bool, perr error) (error, bool) {
	if commit {
		s.guard.log.Warn("aborting the batch: a request to a broker failed during it, and a broker that restarted may have left an older transaction of this instance open where the batch's records would land and join it; the batch is redone once a look has seen every partition",
			zap.String("transactional_id", runcfg.TransactionalID(s.guard.cfg)))
	}
	abandoned := s.guard.doom.settled(ctx)
	if !abandoned {
		// A record produced between the doom and the drain's abort is
		// buffered still; produce runs on this goroutine, so none
		// follows it now.
		actx, cancel := context.WithTimeout(ctx, doomDrainBound)
		if cl := s.sess.Client(); cl.AbortBufferedRecords(actx) != nil {
			s.guard.doom.dropUnsafely(cl)
			abandoned = true
		}
		cancel()
	}
	_ = s.errs.settle(ctx)
	if perr == nil {
		perr = s.errs.take()
	}
	if errors.Is(perr, kgo.ErrAborting) {
		perr = nil
	}
	return perr, abandoned
}

// errAbandoned: a doomed transaction's records were left in flight.
var errAbandoned = fmt.Errorf("records of a batch aborted after a failed broker request were still in flight after %s; a new client abandons them, and its InitProducerId aborts the transaction", doomDrainBound)

// produce is given a context of the batch, not of Run: a cancelled Run
// finishes the open batch rather than abandoning records half way. A
// doomed transaction sends nothing more (see doom.go).
func (s *txnSession) produce(ctx context.Context, r *kgo.Record) {
	if s.guard.isDoomed() {
		return
	}
	s.errs.sent()
	s.produced = true
	s.sess.Produce(ctx, r, s.promise)
}

func (s *txnSession) end(commit bool) (bool, error) {
	unrevoked := s.unrevokedSinceEnd()
	ctx, cancel := context.WithTimeout(context.Background(), s.endTimeout)
	defer cancel()
	defer s.guard.doom.finish()
	if commit {
		if err := s.flush(ctx); err != nil {
			return false, err
		}
	}
	perr, abandoned := s.errs.take(), false
	s.doomedEnd = s.guard.isDoomed()
	if s.doomedEnd {
		perr, abandoned = s.settleDoomed(ctx, commit, perr)
		commit = false
	}
	if perr == nil && commit {
		// ProducerID loads the new epoch if one is due, as End would.
		id, epoch, err := s.sess.Client().ProducerID(ctx)
		if err == nil {
			perr = s.errs.epochChanged(producerEpoch{id, epoch})
		}
	}
	if perr != nil {
		commit = false // a lost output must not commit its input offsets
	}
	if abandoned {
		// Left as a killed process leaves it: the next session looks
		// for hanging transactions before anything else.
		return false, &rebuildError{errAbandoned}
	}
	if !commit && !s.doomedEnd && s.guard.suspected() {
		if err := s.drainAbort(ctx); err != nil {
			return false, err
		}
	}
	// Ending the transaction ends whatever it joined: look first, when
	// a broker may have skipped a marker. An error ends nothing.
	commit, err := s.guard.check(ctx, s.sess.Client(), s.errs.writtenFrom, commit)
	if err != nil {
		return false, &leftOpenError{err}
	}
	empty := s.nothingToCommit(commit, unrevoked)
	if fence := s.fence; fence != nil {
		s.fence = nil
		ctx = kgo.PreTxnCommitFnContext(ctx, func(req *kmsg.TxnOffsetCommitRequest) error { fenceOffsets(req, fence); return nil })
	}
	committed, err := s.sess.End(ctx, kgo.TransactionEndTry(commit && !empty))
	if err == nil {
		s.guard.ended(ctx, s.sess.Client(), committed, commit && !empty)
		committed = committed || empty
	}
	if !commit && err == nil {
		// The results of records refused before buffering come late
		// even to an abort: settled here, they belong to this batch,
		// which begin's reset clears, not to the next one.
		err = s.errs.settle(ctx)
	}
	switch {
	case err != nil && (isFenced(err) || isInstanceFenced(err)):
		return false, err
	case perr != nil && isFenced(perr):
		return false, perr
	case err != nil && commit:
		return false, &rebuildError{&unknownOutcomeError{err}}
	case err != nil:
		return false, &rebuildError{err}
	case perr != nil:
		return false, &rebuildError{&produceError{perr}}
	}
	return committed, nil
}

// drainAbort readies an abort once a broker may have skipped a marker. An
// abort does not wait for its records; the check must see where they
// landed, or one landing after it could join an older transaction that
// this abort then ends. Records not sent yet are dropped, not sent; those
// in flight are waited for, or abandoned with the client as a doomed
// batch's are.
func (s *txnSession) drainAbort(ctx context.Context) error {
	actx, cancel := context.WithTimeout(ctx, doomDrainBound)
	err := s.sess.Client().AbortBufferedRecords(actx)
	cancel()
	if err != nil {
		s.guard.doom.dropUnsafely(s.sess.Client())
		return &rebuildError{errAbandoned}
	}
	_ = s.errs.settle(ctx)
	return nil
}

// unrevokedSinceEnd reports, as an End begins, whether franz-go passed on
// no revoke or loss since the last End began, and starts counting anew.
func (s *txnSession) unrevokedSinceEnd() bool {
	n := s.revokes.Load()
	unrevoked := n == s.revokesAtEnd
	s.revokesAtEnd = n
	return unrevoked
}

// nothingToCommit reports whether a committing transaction wrote nothing
// and commits no offsets, so that it ends alike committed or aborted.
// Ended as an abort, it skips the 500 ms that franz-go holds the session
// after a commit without offsets (which it takes for a broker without
// KIP-447): a batch that only held records back would delay the next
// batch's end by that much. A revoke or loss since the last End began
// makes franz-go abort the transaction and report it so: that it keeps.
func (s *txnSession) nothingToCommit(commit, unrevoked bool) bool {
	return commit && unrevoked && !s.produced && s.fence == nil && len(s.sess.Client().UncommittedOffsets()) == 0
}

func (s *txnSession) rewind(o map[string]map[int32]kgo.EpochOffset) { s.sess.Client().SetOffsets(o) }
func (s *txnSession) rejected() (*kgo.Record, error)                { return s.errs.takeRejected() }
func (s *txnSession) idle()                                         {}
func (s *txnSession) client() *kgo.Client                           { return s.sess.Client() }
func (s *txnSession) generation() int32                             { _, g := s.sess.Client().GroupMetadata(); return g }
func (s *txnSession) close()                                        { s.sess.Close() }
