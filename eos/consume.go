package eos

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/eosflow/eosflow/internal/runcfg"
	"github.com/eosflow/eosflow/state"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"
)

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
		refetch := l.staleFor(s)
		pctx, cancel := context.WithTimeout(ctx, l.pollWait())
		l.idleWake.set(cancel)
		fetches, perr := s.poll(pctx, l.pollSize())
		l.polled = time.Now()
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
		// Between batches: the global tables take what their reader
		// fetched, so the coming batch sees one version of them.
		if err := l.globals.apply(); err != nil {
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
			l.syncState(s)
			// Every assigned task catches up now, with no transaction
			// open, so that no batch is cut short to restore one.
			if err := l.changelogs.restore(ctx, l.state.unready()); err != nil {
				return progressed, err
			}
		}
		committed, err := l.runBatch(ctx, s, fetches, refetch, log)
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

// startSession readies a new session before its first batch: the session
// does what its commit target needs first (see session.start); then a
// batch whose commit outcome was lost is settled before anything is
// redone, or a redo would be mistaken for it. It returns the session's
// logger.
func (l *streamLoop) startSession(ctx context.Context, s session) (*zap.Logger, error) {
	l.polled = time.Time{} // the last client's polls say nothing of this one's fetches (staleFor)
	log, err := s.start(ctx, l.log.With(zap.String("transactional_id", runcfg.TransactionalID(l.cfg))))
	if err != nil {
		return log, err
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
// close, those of assigned tasks catch up, wall-clock timers fire in a
// transaction of their own, and a wait past the stall bound is checked.
// ran reports whether the wait since the last batch starts over: a timer
// batch ran, a restore did work (its time is no stall), or the wait was
// checked.
func (l *streamLoop) idlePoll(ctx context.Context, s session, lastBatch time.Time, log *zap.Logger) (ran, committed bool, err error) {
	restored := false
	if l.state != nil {
		l.syncState(s)
		// Assigned tasks catch up while idle too, so that queries can
		// read them before their next record arrives.
		unready := l.state.unready()
		if err := l.changelogs.restore(ctx, unready); err != nil {
			return false, false, err
		}
		restored = len(unready) > 0
		if ran, committed, err := l.idleTimers(ctx, s, log); err != nil || ran {
			return ran, committed, err
		}
	}
	s.idle()
	if restored {
		return true, false, nil
	}
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

// staleFor is, under AdaptiveCommit, how long the client went without
// polling when it holds a fetch before the poll that begins a batch: it
// buffers one fetch per broker and sends the next only once a poll took
// it, so the records that reached the brokers meanwhile are still there
// (see batch.refetch). Zero when nothing is buffered.
func (l *streamLoop) staleFor(s session) time.Duration {
	if !l.cfg.AdaptiveCommit || l.polled.IsZero() || s.client().BufferedFetchRecords() == 0 {
		return 0
	}
	return time.Since(l.polled)
}

// runBatch processes fetches and whatever more arrives within the commit
// interval as one batch and ends it; refetch is staleFor before fetches
// were polled. It returns whether the batch committed; a nil error with
// false means it was aborted and is redone.
func (l *streamLoop) runBatch(ctx context.Context, s session, fetches kgo.Fetches, refetch time.Duration, log *zap.Logger) (bool, error) {
	if err := s.begin(); err != nil {
		if isFenced(err) {
			return false, l.members.classifyFence(ctx, err, 0, s.client())
		}
		return false, &rebuildError{fmt.Errorf("begin transaction: %w", err)}
	}
	b := l.newBatch(ctx, s)
	defer b.stop()
	b.refetch = refetch
	b.fill(fetches)
	commit := b.decide()
	if l.metrics != nil {
		b.decided = time.Now()
	}
	return b.end(commit, log)
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
	if b.cutShort {
		size = min(size, b.in)
	}
	// Grow at most twice per batch: one cheap batch among slow ones must
	// not bring back polls that outlast the interval.
	l.pollMax = max(min(size, 2*l.pollSize()), 1)
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
