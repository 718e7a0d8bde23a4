package eos

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sync"
	"sync/atomic"
	"time"

	"github.com/eosflow/eosflow/config"
	"github.com/eosflow/eosflow/internal/kafkautil"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/plugin/kzap"
	"go.uber.org/zap"
)

// session is one client generation. Transactional and plain sessions share
// the batch loop in consume; they differ in what ending a batch means.
type session interface {
	// poll returns the next records. An error means none of them may be
	// processed and the client must be rebuilt (at-most-once: the offsets
	// could not be committed first).
	poll(ctx context.Context, limit int) (kgo.Fetches, error)
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

// produceErrs keeps the first produce failure of a batch, and the first
// output refused for the record itself (too large, invalid), which the
// runtime attributes to its input record.
type produceErrs struct {
	mu     sync.Mutex
	err    error
	rejRec *kgo.Record
	rejErr error
	// written is the producer id and epoch of the batch's first written
	// record, and mixed whether a later one was written under another:
	// see txnSession.end.
	written atomic.Pointer[producerEpoch]
	mixed   atomic.Bool
	// pending counts records handed to the producer whose promise has
	// not run; see settle.
	pending atomic.Int64
	// firsts, kept when track is set (transactional sessions), is per
	// partition the lowest offset the batch wrote: see joinGuard.
	track  bool
	fmu    sync.Mutex
	firsts map[topicPartition]int64
}

// topicPartition names one partition.
type topicPartition struct {
	topic     string
	partition int32
}

// errEpochChanged: a batch's records were not all written under the
// producer epoch its commit would use, so it is aborted and redone.
var errEpochChanged = errors.New("the producer epoch changed during the batch")

// producerEpoch is who wrote a record, as the broker acknowledged it.
type producerEpoch struct {
	id    int64
	epoch int16
}

func (p *produceErrs) record(r *kgo.Record, err error) {
	defer p.pending.Add(-1)
	if err == nil {
		if r != nil {
			p.wrote(producerEpoch{r.ProducerID, r.ProducerEpoch})
			if p.track {
				p.first(r)
			}
		}
		return
	}
	if r != nil && isFatal(err) {
		// A refused produce names no topic; keep it, so the error can
		// name the ACL that is missing.
		err = &topicError{topic: r.Topic, op: "Write", err: err}
	}
	p.mu.Lock()
	if p.err == nil || errors.Is(p.err, kgo.ErrAborting) && !errors.Is(err, kgo.ErrAborting) {
		// A doomed batch's dropped records (ErrAborting) must not hide
		// a real failure, such as a fence, behind them.
		p.err = err
	}
	// The broker refuses a whole record batch, so every record in it gets
	// the error: keep the likeliest culprit, the largest record (or, for
	// an invalid record, one without a key).
	if r != nil && isRecordRejected(err) && (p.rejRec == nil || likelierCulprit(r, p.rejRec, err)) {
		p.rejRec, p.rejErr = r, err
	}
	p.mu.Unlock()
}

// wrote notes the producer of a written record; it allocates once a
// batch, for the first. Only a copy made for the first may have its
// address taken: taking pe's would move it to the heap on every call,
// an allocation per record.
func (p *produceErrs) wrote(pe producerEpoch) {
	w := p.written.Load()
	if w == nil {
		first := pe
		p.written.CompareAndSwap(nil, &first)
		w = p.written.Load()
	}
	if *w != pe {
		p.mixed.Store(true)
	}
}

// first keeps r's offset if it is the lowest written to its partition
// in the batch.
func (p *produceErrs) first(r *kgo.Record) {
	tp := topicPartition{r.Topic, r.Partition}
	p.fmu.Lock()
	if o, ok := p.firsts[tp]; !ok || r.Offset < o {
		if p.firsts == nil {
			p.firsts = make(map[topicPartition]int64)
		}
		p.firsts[tp] = r.Offset
	}
	p.fmu.Unlock()
}

// writtenFrom returns, per partition, the lowest offset the batch wrote.
func (p *produceErrs) writtenFrom() map[topicPartition]int64 {
	p.fmu.Lock()
	defer p.fmu.Unlock()
	return maps.Clone(p.firsts)
}

func (p *produceErrs) reset() {
	p.mu.Lock()
	p.err, p.rejRec, p.rejErr = nil, nil, nil
	p.mu.Unlock()
	p.fmu.Lock()
	clear(p.firsts)
	p.fmu.Unlock()
	p.written.Store(nil)
	p.mixed.Store(false)
}

// epochChanged reports, once the batch's records are all written, whether
// any was written under a producer id or epoch other than now, the one
// the commit would use. franz-go loads a new epoch mid-transaction after
// some produce errors (UNKNOWN_PRODUCER_ID past a deleted log head); the
// load aborts what the transaction held, so a commit would carry the
// input offsets without those records.
func (p *produceErrs) epochChanged(now producerEpoch) error {
	w := p.written.Load()
	if w == nil || *w == now && !p.mixed.Load() {
		return nil
	}
	return fmt.Errorf("%w: records written under producer %d epoch %d, the transaction now under %d epoch %d (mixed: %v)",
		errEpochChanged, w.id, w.epoch, now.id, now.epoch, p.mixed.Load())
}

func likelierCulprit(r, than *kgo.Record, err error) bool {
	if errors.Is(err, kerr.InvalidRecord) && (r.Key == nil) != (than.Key == nil) {
		return r.Key == nil
	}
	return len(r.Key)+len(r.Value) > len(than.Key)+len(than.Value)
}

// sent counts a record handed to the producer with record as its promise.
func (p *produceErrs) sent() { p.pending.Add(1) }

// settle waits until every record sent has had its promise run. Flush
// does not wait for records the producer refused before buffering them
// (larger than its buffer, say), whose promises run on a goroutine of
// their own: a batch ended before one ran would commit without its
// output.
func (p *produceErrs) settle(ctx context.Context) error {
	wait := 50 * time.Microsecond
	for p.pending.Load() > 0 {
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("waiting for the producer's results of %d records: %w", p.pending.Load(), ctx.Err())
		case <-t.C:
		}
		wait = min(2*wait, 10*time.Millisecond)
	}
	return nil
}

func (p *produceErrs) take() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	err := p.err
	p.err = nil
	return err
}

func (p *produceErrs) takeRejected() (*kgo.Record, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	r, err := p.rejRec, p.rejErr
	p.rejRec, p.rejErr = nil, nil
	return r, err
}

// unknownOutcomeError: the commit was sent (EndTxn, or the offset commit
// of a plain session) but no answer came back, so the batch may or may
// not have committed; the broker's committed offsets settle it.
type unknownOutcomeError struct{ err error }

func (e *unknownOutcomeError) Error() string {
	return "commit outcome unknown: " + e.err.Error()
}
func (e *unknownOutcomeError) Unwrap() error { return e.err }

// produceError marks a failure to write a batch's outputs (a produce or
// the flush), as opposed to committing them, for the abort reason.
type produceError struct{ err error }

func (e *produceError) Error() string { return e.err.Error() }
func (e *produceError) Unwrap() error { return e.err }

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
	if r.cfg.Guarantee == config.ExactlyOnce {
		guard := newJoinGuard(r)
		sess, err := kgo.NewGroupTransactSession(append(opts, kgo.WithHooks(guard))...)
		if err != nil {
			return nil, err
		}
		guard.doom.cl.Store(sess.Client())
		ts := &txnSession{sess: sess, endTimeout: endTimeout, guard: guard}
		ts.promise = ts.errs.record
		ts.errs.track = true
		return ts, nil
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, err
	}
	ps := &plainSession{cl: cl, atMostOnce: r.cfg.Guarantee == config.AtMostOnce, endTimeout: endTimeout, floor: &r.floor}
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
		return &rebuildError{&produceError{err}}
	}
	return nil
}

// settleDoomed waits until the doomed transaction's records are settled
// (see doom.go), and returns perr, or else the first failure of a record
// that is not the doom's drop, and whether records were abandoned.
func (s *txnSession) settleDoomed(ctx context.Context, commit bool, perr error) (error, bool) {
	if commit {
		s.guard.log.Warn("aborting the batch: a request to a broker failed during it, and a broker that restarted may have left an older transaction of this instance open where the batch's records would land and join it; the batch is redone once a look has seen every partition",
			zap.String("transactional_id", s.guard.cfg.TransactionalID()))
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
	s.sess.Produce(ctx, r, s.promise)
}

func (s *txnSession) end(commit bool) (bool, error) {
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
		// An abort does not wait for its records; the check must see
		// where they landed, or one landing after it could join an
		// older transaction that this abort then ends. Records not
		// sent yet are dropped, not sent; those in flight are waited
		// for, or abandoned with the client as a doomed batch's are.
		actx, cancel := context.WithTimeout(ctx, doomDrainBound)
		err := s.sess.Client().AbortBufferedRecords(actx)
		cancel()
		if err != nil {
			s.guard.doom.dropUnsafely(s.sess.Client())
			return false, &rebuildError{errAbandoned}
		}
		_ = s.errs.settle(ctx)
	}
	// Ending the transaction ends whatever it joined: look first, when
	// a broker may have skipped a marker. An error ends nothing.
	commit, err := s.guard.check(ctx, s.sess.Client(), s.errs.writtenFrom, commit)
	if err != nil {
		return false, &leftOpenError{err}
	}
	if fence := s.fence; fence != nil {
		s.fence = nil
		ctx = kgo.PreTxnCommitFnContext(ctx, func(req *kmsg.TxnOffsetCommitRequest) error { fenceOffsets(req, fence); return nil })
	}
	committed, err := s.sess.End(ctx, kgo.TransactionEndTry(commit))
	if err == nil {
		s.guard.ended(ctx, s.sess.Client(), committed, commit)
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

func (s *txnSession) rewind(o map[string]map[int32]kgo.EpochOffset) { s.sess.Client().SetOffsets(o) }
func (s *txnSession) rejected() (*kgo.Record, error)                { return s.errs.takeRejected() }
func (s *txnSession) idle()                                         {}
func (s *txnSession) client() *kgo.Client                           { return s.sess.Client() }
func (s *txnSession) generation() int32                             { _, g := s.sess.Client().GroupMetadata(); return g }
func (s *txnSession) close()                                        { s.sess.Close() }

// plainSession: no transactions; offsets commit after (or, at-most-once,
// before) the outputs. Rebalances wait between polls and commits, so a
// batch never straddles a generation.
type plainSession struct {
	cl         *kgo.Client
	errs       produceErrs
	promise    func(*kgo.Record, error) // errs.record, bound once
	atMostOnce bool
	endTimeout time.Duration
	floor      *offsetFloor // the Runner's, raised by at-most-once's commits
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
			return false, &rebuildError{&produceError{err}}
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

// onAssigned and onRevoked are the rebalance callbacks.
func (r *Runner) onAssigned(ctx context.Context, cl *kgo.Client, got map[string][]int32) {
	// At info, so an operator sees the member joined and how much it got;
	// the partitions themselves at debug, as there may be hundreds.
	r.log.Info("partitions assigned", zap.Any("per_topic", counts(got)))
	r.log.Debug("partitions assigned, in full", zap.Any("partitions", got))
	r.contexts.assign(ctx, cl, got)
	r.health.assign(got)
	if r.state != nil {
		r.state.assign(got)
		// New tasks' wall-clock timers are due from now: an idle poll
		// would otherwise keep them waiting until it ends.
		r.idleWake.wake()
	}
}

// onRevoked also serves partitions lost (the member's session ended, or
// its group loop failed, as on a SyncGroup whose answer was lost): their
// next owner may not have them yet, and a side effect that answers before
// the cancel is marked done, not run again by it.
func (r *Runner) onRevoked(ctx context.Context, cl *kgo.Client, gone map[string][]int32) {
	// franz-go's transact session flags its transaction as revoked on
	// every revoke but an empty cooperative one (it tests the map's
	// length; a topic with no partitions is never passed).
	r.revoked(ctx, cl, gone, none(gone) && r.eagerGroup())
}

// onLost is onRevoked for partitions lost; the session flags every loss.
func (r *Runner) onLost(ctx context.Context, cl *kgo.Client, lost map[string][]int32) {
	r.revoked(ctx, cl, lost, none(lost))
}

// counts is how many partitions of each topic tps holds.
func counts(tps map[string][]int32) map[string]int {
	out := make(map[string]int, len(tps))
	for t, ps := range tps {
		out[t] = len(ps)
	}
	return out
}

// none reports whether tps holds no partition.
func none(tps map[string][]int32) bool {
	for _, ps := range tps {
		if len(ps) > 0 {
			return false
		}
	}
	return true
}

// eagerGroup reports whether the group revokes every partition at each
// rebalance: the range balancer of co-partitioned topics, under the
// classic protocol.
func (r *Runner) eagerGroup() bool {
	return len(r.proc.CoPartitioned()) > 0 && r.cfg.GroupProtocol != config.GroupProtocolConsumer
}

// revoked is a revoke or loss of the partitions gone; flagEmpty counts an
// empty one as a revoke, as franz-go's transact session does.
func (r *Runner) revoked(ctx context.Context, cl *kgo.Client, gone map[string][]int32, flagEmpty bool) {
	r.contexts.revoke(ctx, cl, gone)
	if flagEmpty {
		r.contexts.revokes.Add(1)
	}
	// The partitions are released when this returns: first the user
	// code still running one of their records must end. Under
	// exactly-once, franz-go's transact session passes on only the first
	// revoke or loss after an End and swallows the rest until the next
	// End ends, so a later one could take the partition of the record in
	// flight now with no callback to wait for it: this one waits for that
	// record whatever its partition. No user code starts after it until
	// that End (revokedSince): the batch under way, or the next, aborts.
	wait := gone
	if r.cfg.Guarantee == config.ExactlyOnce {
		wait = r.contexts.withInFlight(gone)
	}
	r.contexts.await(wait, r.cfg.RebalanceTimeout, r.cfg.AppID, r.log)
	r.contexts.release()
	r.forget(gone)
}

// forget drops what this member kept of the partitions gone.
func (r *Runner) forget(gone map[string][]int32) {
	r.health.revoke(gone)
	if r.state != nil {
		r.state.revoke(gone)
	}
}
