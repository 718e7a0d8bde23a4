package eos

import (
	"context"
	"sync"
	"time"

	"github.com/eosflow/eosflow/config"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/plugin/kzap"
	"go.uber.org/zap"
)

// session is one client generation. Transactional and plain sessions share
// the batch loop in consume; they differ in what ending a batch means.
type session interface {
	poll(ctx context.Context, max int) kgo.Fetches
	begin() error
	produce(r *kgo.Record)
	// end commits (or aborts) the batch. committed false with a nil error
	// means the batch was aborted and the consumer rewound to the last
	// committed offsets; any error means the client must be rebuilt.
	end(commit bool) (committed bool, err error)
	idle()
	client() *kgo.Client
	close()
}

// maxBufferedBytes bounds the produce buffer whatever the record size.
const maxBufferedBytes = 256 << 20

// produceErrs keeps the first produce failure of a batch.
type produceErrs struct {
	mu  sync.Mutex
	err error
}

func (p *produceErrs) record(_ *kgo.Record, err error) {
	if err == nil {
		return
	}
	p.mu.Lock()
	if p.err == nil {
		p.err = err
	}
	p.mu.Unlock()
}

func (p *produceErrs) take() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	err := p.err
	p.err = nil
	return err
}

func (r *Runner) newSession() (session, error) {
	base, err := r.cfg.KgoOpts()
	if err != nil {
		return nil, err
	}
	opts := append(base,
		kgo.ConsumerGroup(r.cfg.AppID),
		kgo.ConsumeTopics(r.top.InputTopics()...),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.SessionTimeout(r.cfg.SessionTimeout),
		kgo.RebalanceTimeout(r.cfg.RebalanceTimeout),
		kgo.DisableAutoCommit(),
		kgo.MaxBufferedRecords(2*r.cfg.MaxBatchRecords+1000),
		// Large records must not turn the record cap into gigabytes of
		// buffer: Produce waits for acknowledgements past this.
		kgo.MaxBufferedBytes(maxBufferedBytes),
		// The client's own warnings and errors (connection loss, retries)
		// go to the same structured log.
		kgo.WithLogger(kzap.New(r.log.Named("kgo"), kzap.LevelFn(r.clientLogLevel))),
	)
	// The end of a batch may wait for a produce flush and the commit round
	// trips; bound it so a wedged broker becomes a rebuild, not a hang.
	endTimeout := r.cfg.TransactionTimeout + 10*time.Second
	switch r.cfg.Guarantee {
	case config.ExactlyOnce:
		opts = append(opts,
			kgo.TransactionalID(r.cfg.TransactionalID()),
			kgo.TransactionTimeout(r.cfg.TransactionTimeout),
		)
		sess, err := kgo.NewGroupTransactSession(append(opts, r.extra...)...)
		if err != nil {
			return nil, err
		}
		ts := &txnSession{sess: sess, endTimeout: endTimeout}
		ts.promise = ts.errs.record
		return ts, nil
	case config.Idempotent:
		opts = append(opts, kgo.RequiredAcks(kgo.AllISRAcks()), kgo.BlockRebalanceOnPoll())
	case config.AtLeastOnce:
		opts = append(opts, kgo.DisableIdempotentWrite(), kgo.RequiredAcks(kgo.AllISRAcks()), kgo.BlockRebalanceOnPoll())
	case config.AtMostOnce:
		opts = append(opts, kgo.DisableIdempotentWrite(), kgo.RequiredAcks(kgo.NoAck()), kgo.BlockRebalanceOnPoll())
	}
	cl, err := kgo.NewClient(append(opts, r.extra...)...)
	if err != nil {
		return nil, err
	}
	ps := &plainSession{cl: cl, atMostOnce: r.cfg.Guarantee == config.AtMostOnce, endTimeout: endTimeout}
	ps.promise = ps.errs.record
	return ps, nil
}

// clientLogLevel caps the client's logging at warnings, and follows the
// runner's logger below that: with logging off, the client builds no log
// lines at all.
func (r *Runner) clientLogLevel() kgo.LogLevel {
	switch core := r.log.Core(); {
	case core.Enabled(zap.WarnLevel):
		return kgo.LogLevelWarn
	case core.Enabled(zap.ErrorLevel):
		return kgo.LogLevelError
	}
	return kgo.LogLevelNone
}

// txnSession: every batch is one transaction carrying its input offsets.
type txnSession struct {
	sess       *kgo.GroupTransactSession
	errs       produceErrs
	promise    func(*kgo.Record, error) // errs.record, bound once: a method value per Produce would allocate per record
	endTimeout time.Duration
}

func (s *txnSession) poll(ctx context.Context, max int) kgo.Fetches {
	return s.sess.PollRecords(ctx, max)
}
func (s *txnSession) begin() error { return s.sess.Begin() }

// produce uses a background context: a cancelled Run finishes the open
// batch rather than abandoning records half way.
func (s *txnSession) produce(r *kgo.Record) {
	s.sess.Produce(context.Background(), r, s.promise)
}

func (s *txnSession) end(commit bool) (bool, error) {
	ctx, cancel := context.WithTimeout(context.Background(), s.endTimeout)
	defer cancel()
	if commit {
		if err := s.sess.Client().Flush(ctx); err != nil {
			return false, &rebuildError{err}
		}
	}
	perr := s.errs.take()
	if perr != nil {
		commit = false // a lost output must not commit its input offsets
	}
	committed, err := s.sess.End(ctx, kgo.TransactionEndTry(commit))
	switch {
	case err != nil && isFenced(err):
		return false, err
	case perr != nil && isFenced(perr):
		return false, perr
	case err != nil:
		return false, &rebuildError{err}
	case perr != nil:
		return false, &rebuildError{perr}
	}
	return committed, nil
}

func (s *txnSession) idle()               {}
func (s *txnSession) client() *kgo.Client { return s.sess.Client() }
func (s *txnSession) close()              { s.sess.Close() }

// plainSession: no transactions; offsets commit after (or, at-most-once,
// before) the outputs. Rebalances wait between polls and commits, so a
// batch never straddles a generation.
type plainSession struct {
	cl         *kgo.Client
	errs       produceErrs
	promise    func(*kgo.Record, error) // errs.record, bound once
	atMostOnce bool
	endTimeout time.Duration
}

func (s *plainSession) poll(ctx context.Context, max int) kgo.Fetches {
	fs := s.cl.PollRecords(ctx, max)
	if s.atMostOnce && fs.NumRecords() > 0 {
		// Commit first: a crash from here on loses these records rather
		// than repeating them.
		cctx, cancel := context.WithTimeout(context.Background(), s.endTimeout)
		defer cancel()
		if err := s.cl.CommitUncommittedOffsets(cctx); err != nil {
			s.errs.record(nil, err)
		}
	}
	return fs
}

func (s *plainSession) begin() error { return nil }

func (s *plainSession) produce(r *kgo.Record) {
	if s.atMostOnce {
		s.cl.Produce(context.Background(), r, nil) // fire and forget
		return
	}
	s.cl.Produce(context.Background(), r, s.promise)
}

func (s *plainSession) end(commit bool) (bool, error) {
	defer s.cl.AllowRebalance()
	ctx, cancel := context.WithTimeout(context.Background(), s.endTimeout)
	defer cancel()
	if !s.atMostOnce {
		if err := s.cl.Flush(ctx); err != nil {
			return false, &rebuildError{err}
		}
	}
	if err := s.errs.take(); err != nil {
		// Offsets stay uncommitted; a new client rewinds to the last
		// commit and the batch runs again.
		return false, &rebuildError{err}
	}
	if !commit || s.atMostOnce {
		return commit, nil
	}
	if err := s.cl.CommitUncommittedOffsets(ctx); err != nil {
		return false, &rebuildError{&offsetCommitError{err}}
	}
	return true, nil
}

// offsetCommitError: the outputs were acknowledged but the offsets did not
// commit, so the batch will run again: the one window in which the
// idempotent guarantee can duplicate.
type offsetCommitError struct{ err error }

func (e *offsetCommitError) Error() string {
	return "offset commit after acknowledged outputs: " + e.err.Error()
}
func (e *offsetCommitError) Unwrap() error { return e.err }

func (s *plainSession) idle()               { s.cl.AllowRebalance() }
func (s *plainSession) client() *kgo.Client { return s.cl }

// close flushes first: even fire-and-forget records of a finished batch
// should not be dropped by a clean shutdown.
func (s *plainSession) close() {
	ctx, cancel := context.WithTimeout(context.Background(), s.endTimeout)
	defer cancel()
	_ = s.cl.Flush(ctx)
	s.cl.CloseAllowingRebalance()
}
