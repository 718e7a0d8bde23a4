package eos

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/eosflow/eosflow/config"
	"github.com/eosflow/eosflow/internal/kafkautil"
	"github.com/eosflow/eosflow/internal/txnrepair"
	"github.com/eosflow/eosflow/topology"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/plugin/kzap"
	"go.uber.org/zap"
)

// searchBound bounds all evidence searches of one repair, so that a
// repair with many hanging transactions still ends in time for the next
// stall check.
const searchBound = 45 * time.Second

// hangingTxn is a transaction that a partition this app writes holds
// open although its producer has moved on, with what the evidence says
// of its outcome, why it is taken for hanging, and its producer's epoch
// now.
type hangingTxn struct {
	kadm.DescribedProducer
	txnID   string
	verdict txnrepair.Verdict
	why     string
	current int16
}

// repairHanging completes the transactions that partitions this app
// writes still hold open although their producer has moved on, where the
// evidence proves how their coordinator ended them. A coordinator ends a
// transaction by writing markers to its partitions, but after a broker
// crash they can be lost, or skipped while the restarted broker's
// partitions have no leader yet: the partition then keeps the
// transaction open for good (KIP-664 calls it hanging), which holds back
// the group's committed offsets, the output's last stable offset, or a
// changelog's restore.
//
// It completes a transaction only on proof (see txnrepair): COMMIT where
// it committed, ABORT where it aborted. One whose outcome nothing proves
// is left open and noted (see noteUnproven): an ABORT on a guess could
// drop the outputs of a batch whose offsets committed, a COMMIT could
// expose records that were aborted. It returns how many it completed.
func (r *Runner) repairHanging(ctx context.Context) int {
	if r.pidEpoch < 0 {
		return 0 // no producer id loaded (not transactional)
	}
	r.hangingDenied = ""
	adm := kadm.NewClient(r.admin)
	producers, denied, err := r.appProducers(ctx, adm)
	r.hangingBlind = nil
	if err != nil && !isAuthError(err) {
		// Not a missing grant, which an operator settles, but a
		// passing failure: until a look succeeds, this instance cannot
		// know that none of its own transactions hangs (see ownUnproven).
		r.hangingBlind = err
	}
	if producers == nil {
		r.log.Warn("cannot describe the producers of the partitions this app writes to look for hanging transactions", zap.Error(err))
		r.noteHangingDenied(denied, err)
		return 0
	}
	sctx, cancel := context.WithTimeout(ctx, searchBound)
	defer cancel()
	ev := &evidence{r: r, ctx: sctx, all: producers, seen: map[txnEpoch]txnrepair.Verdict{}}
	cands, odenied := r.hangingCandidates(ctx, adm, ev)
	denied = append(denied, odenied...)
	cands, ok := r.stillOpen(ctx, adm, cands)
	if !ok {
		r.hangingBlind = errors.New("the partitions of hanging transactions could not be described again")
		r.noteHangingDenied(denied, nil)
		return 0
	}
	done := 0
	var unproven []hangingTxn
	for _, h := range cands {
		if !h.verdict.Proven() {
			unproven = append(unproven, h)
		} else if r.completeHanging(ctx, adm, h, &denied) {
			done++
		}
	}
	r.noteUnproven(unproven)
	r.noteHangingDenied(denied, nil)
	return done
}

// appProducers describes the producers of every partition this instance
// writes in its transactions: outputs, repartition topics, changelogs and
// __consumer_offsets, and extra (topics a batch wrote that the topology
// does not name: ToTopicFunc's). It also returns the grants it lacked. A look waits
// for the brokers as long as start-up does (connect_timeout).
func (r *Runner) appProducers(ctx context.Context, adm *kadm.Client, extra ...string) (kadm.DescribedProducersTopics, []string, error) {
	actx, cancel := context.WithTimeout(ctx, r.cfg.ConnectTimeout)
	defer cancel()
	topics := append([]string{"__consumer_offsets"}, r.top.OutputTopics()...)
	for _, t := range extra {
		if !slices.Contains(topics, t) {
			topics = append(topics, t)
		}
	}
	for topic := range r.repartitioned {
		topics = append(topics, topic)
	}
	if r.state != nil {
		for _, s := range r.state.specs {
			topics = append(topics, topology.ChangelogTopic(r.cfg.AppID, s.Name))
		}
	}
	if r.mirror != nil {
		topics = append(topics, r.mirror.topic)
	}
	var denied []string
	details, err := adm.ListTopics(actx, topics...)
	if errors.Is(err, kerr.TopicAuthorizationFailed) {
		// One refused topic fails the whole listing: list them one by
		// one, to look where this instance may and to name the others.
		details, err = kadm.TopicDetails{}, nil
		for _, topic := range topics {
			d, terr := adm.ListTopics(actx, topic)
			switch {
			case errors.Is(terr, kerr.TopicAuthorizationFailed):
				denied = append(denied, "Describe on topic "+topic)
			case terr != nil:
				err = terr
			default:
				maps.Copy(details, d)
			}
		}
	}
	if err != nil {
		return nil, denied, err
	}
	for _, d := range details.Sorted() {
		if errors.Is(d.Err, kerr.TopicAuthorizationFailed) {
			denied = append(denied, "Describe on topic "+d.Topic)
		}
	}
	producers, err := adm.DescribeProducers(actx, details.TopicsSet())
	if err != nil {
		return nil, denied, err
	}
	refused := map[string]bool{}
	var failed error
	producers.EachPartition(func(p kadm.DescribedProducersPartition) {
		switch {
		case errors.Is(p.Err, kerr.TopicAuthorizationFailed) && !refused[p.Topic]:
			refused[p.Topic] = true
			denied = append(denied, "Read on topic "+p.Topic)
		case p.Err != nil && !isAuthError(p.Err) && !errors.Is(p.Err, kerr.UnknownTopicOrPartition) && failed == nil:
			// Leaderless after a broker restart, say: the one place a
			// skipped marker is likeliest was not seen.
			failed = fmt.Errorf("describing the producers of %s/%d: %w", p.Topic, p.Partition, p.Err)
		}
	})
	return producers, denied, failed
}

// hangingCandidates returns the transactions of ev's partitions that
// hang, with their verdicts: this instance's producer id at an epoch
// older than this session's, and the app's other instances' that
// orphaned finds. It also returns the grants it lacked.
func (r *Runner) hangingCandidates(ctx context.Context, adm *kadm.Client, ev *evidence) ([]hangingTxn, []string) {
	var out []hangingTxn
	var others []kadm.DescribedProducer
	ev.all.EachProducer(func(p kadm.DescribedProducer) {
		switch {
		case p.CurrentTxnStartOffset < 0:
		case p.ProducerID == r.pid && p.ProducerEpoch < r.pidEpoch:
			out = append(out, r.ownHanging(ev, p))
		case p.ProducerID != r.pid:
			others = append(others, p)
		}
	})
	orphans, denied := r.orphaned(ctx, adm, ev, others)
	return append(out, orphans...), denied
}

// ownHanging is a transaction of this instance's previous sessions that
// partition p holds open after InitProducerId. What the coordinator said
// before InitProducerId moved it on proves its outcome (see noteOwnTxn);
// failing that, its log or the markers it wrote elsewhere.
func (r *Runner) ownHanging(ev *evidence, p kadm.DescribedProducer) hangingTxn {
	h := hangingTxn{DescribedProducer: p, txnID: r.cfg.TransactionalID(), current: r.pidEpoch,
		why: fmt.Sprintf("a transaction of this instance's producer at epoch %d, older than its current epoch %d", p.ProducerEpoch, r.pidEpoch)}
	if v, ok := r.ownTxns[txnEpoch{p.ProducerID, p.ProducerEpoch}]; ok {
		h.verdict = v
	} else {
		h.verdict = ev.of(h.txnID, p)
	}
	return h
}

// evidence searches, once per transaction within one repair, how the
// coordinator ended it (see txnrepair.Finder.Search), over the producers
// of all the partitions the app writes.
type evidence struct {
	r    *Runner
	ctx  context.Context
	all  kadm.DescribedProducersTopics
	seen map[txnEpoch]txnrepair.Verdict
}

// of is the verdict on the transaction open in p, of txnID's producer.
func (e *evidence) of(txnID string, p kadm.DescribedProducer) txnrepair.Verdict {
	k := txnEpoch{p.ProducerID, p.ProducerEpoch}
	v, ok := e.seen[k]
	if !ok {
		v = e.r.finder().Search(e.ctx, txnID, e.all, p)
		e.seen[k] = v
	}
	return v
}

// finder is the evidence search over this run's admin client.
func (r *Runner) finder() *txnrepair.Finder {
	if r.txnFinder == nil || r.txnFinderOn != r.admin {
		read := func(topic string, partition int32, offset int64) (*kgo.Client, error) {
			opts, err := kafkautil.ConnOptions(r.cfg, r.extra...)
			if err != nil {
				return nil, err
			}
			opts = append(opts, kgo.WithLogger(kzap.New(r.log.Named("kgo"), kzap.LevelFn(r.clientLogLevel))))
			return kgo.NewClient(append(opts, txnrepair.ReaderOpts(topic, partition, offset)...)...)
		}
		r.txnFinder, r.txnFinderOn = txnrepair.NewFinder(r.admin, read, r.log), r.admin
	}
	return r.txnFinder
}

// txnEpoch names one transaction of a producer under transaction
// version 2, where every transaction has an epoch of its own.
type txnEpoch struct {
	pid   int64
	epoch int16
}

// stillOpen describes the candidates' partitions again, after the
// coordinators and the searches, and keeps those that still hold the
// same transaction open: a marker written meanwhile is seen rather than
// raced. It reports false when the partitions cannot be described.
func (r *Runner) stillOpen(ctx context.Context, adm *kadm.Client, cands []hangingTxn) ([]hangingTxn, bool) {
	if len(cands) == 0 {
		return nil, true
	}
	again := kadm.TopicsSet{}
	for _, c := range cands {
		again.Add(c.Topic, c.Partition)
	}
	nctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	now, err := adm.DescribeProducers(nctx, again)
	if err != nil {
		r.log.Info("cannot describe the partitions of hanging transactions again; leaving them for the next check", zap.Error(err))
		return nil, false
	}
	var out []hangingTxn
	for _, c := range cands {
		still := false
		now.EachProducer(func(p kadm.DescribedProducer) {
			still = still || p.Topic == c.Topic && p.Partition == c.Partition && p.ProducerID == c.ProducerID &&
				p.ProducerEpoch == c.ProducerEpoch && p.CurrentTxnStartOffset == c.CurrentTxnStartOffset
		})
		if still {
			out = append(out, c)
		}
	}
	return out, true
}

// completeHanging writes the marker of h's proven outcome, at the epoch
// its coordinator would have used (txnrepair.Finder.RepairEpoch), and
// reports whether it did; a missing grant is added to denied.
func (r *Runner) completeHanging(ctx context.Context, adm *kadm.Client, h hangingTxn, denied *[]string) bool {
	fields := []zap.Field{zap.String("transactional_id", h.txnID), zap.String("topic", h.Topic), zap.Int32("partition", h.Partition),
		zap.Int64("start_offset", h.CurrentTxnStartOffset), zap.Int64("producer_id", h.ProducerID), zap.Int16("stale_epoch", h.ProducerEpoch),
		zap.String("marker", h.verdict.Marker()), zap.String("why", h.why), zap.String("proof", h.verdict.Where)}
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	err := txnrepair.Complete(wctx, adm, h.DescribedProducer, h.verdict, r.finder().RepairEpoch(ctx, h.DescribedProducer, h.current))
	if err != nil {
		if errors.Is(err, kerr.ClusterAuthorizationFailed) && !slices.Contains(*denied, "ClusterAction on the cluster") {
			*denied = append(*denied, "ClusterAction on the cluster")
		}
		r.log.Warn("could not complete a hanging transaction whose outcome is proven; complete it with `eosctl txn "+
			strings.ToLower(h.verdict.Marker())+"`", append(fields, zap.Error(err))...)
		return false
	}
	r.log.Warn("completed a hanging transaction left by a broker crash with the outcome its coordinator decided", fields...)
	return true
}

// noteUnproven keeps the hanging transactions whose outcome nothing
// proves, and since when some have been, for the stall check: the
// pipeline waits for proof (a coordinator, its log, a marker, or an
// operator) up to recovery_timeout, and then stops with an error that
// names them (see HangingTxn). Each wait is logged.
func (r *Runner) noteUnproven(list []hangingTxn) {
	if len(list) == 0 {
		r.unproven, r.unprovenSince = nil, time.Time{}
		return
	}
	if r.unprovenSince.IsZero() {
		r.unprovenSince = time.Now()
	}
	r.unproven = r.unproven[:0]
	for _, h := range list {
		u := HangingTxn{TransactionalID: h.txnID, ProducerID: h.ProducerID, Epoch: h.ProducerEpoch,
			Topic: h.Topic, Partition: h.Partition, StartOffset: h.CurrentTxnStartOffset}
		r.unproven = append(r.unproven, u)
		r.log.Warn("waiting for proof of how a hanging transaction ended; it stays open, since completing it on a guess could drop committed records or expose aborted ones",
			zap.String("transactional_id", h.txnID), zap.String("topic", h.Topic), zap.Int32("partition", h.Partition),
			zap.Int64("start_offset", h.CurrentTxnStartOffset), zap.Int64("producer_id", h.ProducerID), zap.Int16("epoch", h.ProducerEpoch),
			zap.String("why", h.why), zap.Bool("a_read_failed", h.verdict.Unsure),
			zap.Duration("waited", time.Since(r.unprovenSince).Round(time.Second)), zap.Duration("recovery_timeout", r.cfg.RecoveryTimeout),
			zap.String("inspect", u.inspect()))
	}
}

// blindLooks is how many times a session looks for hanging transactions
// in place, a second apart, while it cannot see every partition it
// writes, before it gives up to a client rebuild.
const blindLooks = 3

// lookBeforeWriting repairs the hanging transactions of the partitions
// this app writes and returns ownUnproven's word on whether the session
// may write. A look that could not see every partition is retried in
// place first: just after start-up a topic this instance created is not
// yet known to every broker, and a rebuild would cost a rejoin.
func (r *Runner) lookBeforeWriting(ctx context.Context) error {
	for try := 1; ; try++ {
		r.repairHanging(ctx)
		err := r.ownUnproven()
		if err == nil || r.hangingBlind == nil || try == blindLooks {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(time.Second):
		}
	}
}

// ownUnproven is a rebuildError naming this instance's own hanging
// transactions that the last repair could not prove, if any, or saying
// that it could not look: a session must not write while they may hang
// (see HangingError), so it waits, each rebuild looking again, until
// recovery_timeout.
func (r *Runner) ownUnproven() error {
	var own []HangingTxn
	for _, h := range r.unproven {
		if h.ProducerID == r.pid {
			own = append(own, h)
		}
	}
	if len(own) == 0 {
		if r.hangingBlind != nil {
			r.log.Warn("cannot look yet for hanging transactions of this instance's earlier sessions; waiting before writing, as Kafka would join a new transaction to one still open",
				zap.Error(r.hangingBlind), zap.Duration("recovery_timeout", r.cfg.RecoveryTimeout))
			return &rebuildError{fmt.Errorf("looking for hanging transactions of this instance before writing: %w; inspect with `eosctl txn hanging`", r.hangingBlind)}
		}
		return nil
	}
	return &rebuildError{&HangingError{Hanging: own, Waited: time.Since(r.unprovenSince)}}
}

// noteOwnTxn asks the coordinator of this instance's transactional id
// for its state before InitProducerId moves it on, and keeps what it
// proves of the transaction one epoch before (see
// txnrepair.Finder.FromCoordinator): repairHanging completes a partition
// that still holds that one open with the same outcome. Proofs are kept
// across sessions (a transaction's outcome is final), so a session that
// starts after a failed repair still has them. Bounded like
// InitProducerId, which waits for the same coordinator.
func (r *Runner) noteOwnTxn(ctx context.Context) {
	if r.admin == nil {
		return
	}
	dctx, cancel := context.WithTimeout(ctx, r.endTimeout())
	defer cancel()
	id := r.cfg.TransactionalID()
	described, err := kadm.NewClient(r.admin).DescribeTransactions(dctx, id)
	d, ok := described[id]
	if err == nil && ok {
		err = d.Err
	}
	if errors.Is(err, kerr.TransactionalIDNotFound) {
		return // a new instance: no transaction to prove
	}
	if err != nil || !ok {
		r.log.Info("cannot read this instance's last transaction from its coordinator; a partition found still holding it open waits for other proof of its outcome",
			zap.String("transactional_id", id), zap.Error(err))
		return
	}
	if d.ProducerEpoch <= 0 {
		return
	}
	prev := kadm.DescribedProducer{ProducerID: d.ProducerID, ProducerEpoch: d.ProducerEpoch - 1}
	if v := r.finder().FromCoordinator(dctx, d, prev); v.Proven() {
		if r.ownTxns == nil {
			r.ownTxns = make(map[txnEpoch]txnrepair.Verdict)
		}
		r.ownTxns[txnEpoch{prev.ProducerID, prev.ProducerEpoch}] = v
	}
}

// groupInstances returns the instance ids of the group's members now;
// none when the group cannot be described.
func (r *Runner) groupInstances(ctx context.Context) map[string]bool {
	dctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	ids := map[string]bool{}
	g, err := kafkautil.DescribeGroup(dctx, r.admin, r.cfg.AppID)
	if err != nil {
		return ids
	}
	for _, m := range g.Members {
		ids[m.InstanceID] = true
	}
	return ids
}

// noteHangingDenied keeps, for the stall error, which grants kept this
// instance from finding or completing its hanging transactions: without
// them only an operator can end one, and the error must say so.
func (r *Runner) noteHangingDenied(denied []string, err error) {
	if errors.Is(err, kerr.TopicAuthorizationFailed) || errors.Is(err, kerr.ClusterAuthorizationFailed) {
		// Refused before any producer was seen: name all it takes.
		denied = []string{"Read on the topics it writes and on __consumer_offsets", "ClusterAction on the cluster"}
	}
	if len(denied) == 0 {
		return
	}
	r.hangingDenied = "this instance may not look for or complete its own hanging transactions (it needs " +
		strings.Join(denied, ", ") + "); grant them, or settle the transaction with `eosctl txn hanging` and `eosctl txn commit` or `eosctl txn abort` as an admin"
	r.log.Warn("cannot repair hanging transactions after a broker crash", zap.String("why", r.hangingDenied))
}

// appTxnID reports whether txnID is one of this app's instances'.
func (r *Runner) appTxnID(txnID string) bool {
	return strings.HasPrefix(txnID, r.cfg.AppID+config.TransactionalIDSeparator)
}

// isAuthError reports a refusal for want of a grant, which no retry
// changes.
func isAuthError(err error) bool {
	return errors.Is(err, kerr.TopicAuthorizationFailed) || errors.Is(err, kerr.ClusterAuthorizationFailed) ||
		errors.Is(err, kerr.TransactionalIDAuthorizationFailed)
}
