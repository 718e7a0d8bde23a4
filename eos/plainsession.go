package eos

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"
)

// plainSession: no transactions; offsets commit after (or, at-most-once,
// before) the outputs. Rebalances wait between polls and commits, so a
// batch never straddles a generation.
type plainSession struct {
	cl         *kgo.Client
	errs       produceErrs
	promise    func(*kgo.Record, error) // errs.record, bound once
	atMostOnce bool
	idempotent bool // the producer is idempotent: its id is loaded at start
	pids       producerIDs
	endTimeout time.Duration
	floor      *offsetFloor    // the Runner's, raised by at-most-once's commits
	unacked    *unackedOutputs // names the partitions of a flush that ran out of time
}

// start loads an idempotent producer's id, which fences a zombie of this
// instance before the first batch.
func (s *plainSession) start(ctx context.Context, log *zap.Logger) (*zap.Logger, error) {
	if !s.idempotent {
		return log, nil
	}
	id, epoch, err := s.pids.load(ctx, s.cl)
	if err != nil {
		return log, err
	}
	return log.With(zap.Int64("producer_id", id), zap.Int16("producer_epoch", epoch)), nil
}

func (s *plainSession) poll(ctx context.Context, limit int) (kgo.Fetches, error) {
	fs := s.cl.PollRecords(ctx, limit)
	if s.atMostOnce && fs.NumRecords() > 0 {
		// Commit first: a crash from here on loses these records rather
		// than repeating them. If the commit fails, none of them may be
		// processed: a new client rewinds to the last commit and would
		// run them again.
		cctx, cancel := context.WithTimeout(context.Background(), s.endTimeout)
		defer cancel()
		if err := s.cl.CommitUncommittedOffsets(cctx); err != nil {
			return kgo.Fetches{}, &rebuildError{fmt.Errorf("at-most-once offset commit before processing: %w", err)}
		}
		s.floor.raise(s.cl.CommittedOffsets())
	}
	return fs, nil
}

func (s *plainSession) begin() error {
	s.errs.reset()
	return nil
}

func (s *plainSession) produce(ctx context.Context, r *kgo.Record) {
	if s.atMostOnce {
		s.cl.Produce(ctx, r, nil) // fire and forget
		return
	}
	s.errs.sent()
	s.cl.Produce(ctx, r, s.promise)
}

func (s *plainSession) end(commit bool) (bool, error) {
	defer s.cl.AllowRebalance()
	ctx, cancel := context.WithTimeout(context.Background(), s.endTimeout)
	defer cancel()
	if !s.atMostOnce {
		if err := s.cl.Flush(ctx); err != nil {
			return false, &rebuildError{&produceError{unackedAfter(err, s.unacked, s.cl, s.pids.cfg.ConnectTimeout)}}
		}
		if err := s.errs.settle(ctx); err != nil {
			return false, &rebuildError{&produceError{err}}
		}
	}
	if err := s.errs.take(); err != nil {
		// Offsets stay uncommitted; a new client rewinds to the last
		// commit and the batch runs again.
		return false, &rebuildError{&produceError{err}}
	}
	if !commit || s.atMostOnce {
		return commit, nil
	}
	if err := s.cl.CommitUncommittedOffsets(ctx); err != nil {
		return false, &rebuildError{&unknownOutcomeError{fmt.Errorf("offset commit after acknowledged outputs: %w", err)}}
	}
	return true, nil
}

func (s *plainSession) rewind(o map[string]map[int32]kgo.EpochOffset) { s.cl.SetOffsets(o) }
func (s *plainSession) rejected() (*kgo.Record, error)                { return s.errs.takeRejected() }
func (s *plainSession) idle()                                         { s.cl.AllowRebalance() }
func (s *plainSession) client() *kgo.Client                           { return s.cl }
func (s *plainSession) generation() int32                             { _, g := s.cl.GroupMetadata(); return g }

// close flushes first: even fire-and-forget records of a finished batch
// should not be dropped by a clean shutdown.
func (s *plainSession) close() {
	ctx, cancel := context.WithTimeout(context.Background(), s.endTimeout)
	defer cancel()
	_ = s.cl.Flush(ctx)
	s.cl.CloseAllowingRebalance()
}
