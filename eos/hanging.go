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
	"github.com/eosflow/eosflow/internal/runcfg"
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

// hangingRepair finds and settles the hanging transactions of the
// partitions this app writes, and keeps what it learned: the proofs of
// this instance's own transactions, and what its last look left
// unproven, could not see, or was refused. Its config, logger and
// timeouts are the Runner's as New left them, which nothing changes after;
// what Run sets later (the admin client, the topics written) it reads
// through functions.
type hangingRepair struct {
	cfg          config.Config
	log          *zap.Logger
	extra        []kgo.Opt           // the user's client options, for the evidence reads
	clientLevel  func() kgo.LogLevel // the evidence readers' log level
	admin        func() *kgo.Client  // the run's admin client; nil before preflight
	coordTimeout time.Duration       // bounds asking the coordinator, as InitProducerId is
	// writes returns the topics this instance writes in its transactions:
	// the topology's outputs, and its internal topics (repartition topics,
	// changelogs, the offsets mirror).
	writes func() (outputs, internal []string)

	pid           int64                          // this session's producer id, and its epoch when the last repair looked (see joinGuard)
	pidEpoch      int16                          // -1 before a transactional producer id is loaded
	denied        string                         // why the last repairHanging could not look or complete: missing grants
	ownTxns       map[txnEpoch]txnrepair.Verdict // own transactions whose outcome the coordinator or an EndTxn answer proved; kept across sessions
	ownEnded      []txnEpoch                     // those EndTxn answers proved, oldest first, to bound ownTxns (see noteOwnEnd)
	unproven      []HangingTxn                   // hanging transactions no evidence decides, from the last repair
	unprovenSince time.Time                      // since when some have been; zero when none
	blind         error                          // why the last repair could not look everywhere (not a missing grant); nil when it could
	txnFinder     *txnrepair.Finder              // the evidence search, over finderOn
	finderOn      *kgo.Client                    // the admin client txnFinder uses
}

// newHangingRepair builds r's repair over r's configuration, logger,
// client options and admin client.
func newHangingRepair(r *Runner) *hangingRepair {
	return &hangingRepair{
		cfg: r.cfg, log: r.log, extra: r.extra, clientLevel: r.clientLogLevel,
		admin:        func() *kgo.Client { return r.admin },
		coordTimeout: r.waits.end,
		writes: func() (outputs, internal []string) {
			for topic := range r.repartitioned {
				internal = append(internal, topic)
			}
			if r.state != nil {
				for _, s := range r.state.specs {
					internal = append(internal, topology.ChangelogTopic(r.cfg.AppID, s.Name))
				}
			}
			if r.mirror != nil {
				internal = append(internal, r.mirror.topic)
			}
			return r.top.OutputTopics(), internal
		},
		pidEpoch: -1,
	}
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
func (hr *hangingRepair) repairHanging(ctx context.Context) int {
	if hr.pidEpoch < 0 {
		return 0 // no producer id loaded (not transactional)
	}
	hr.denied = ""
	adm := kadm.NewClient(hr.admin())
	producers, denied, err := hr.appProducers(ctx, adm)
	hr.blind = nil
	if err != nil && !isAuthError(err) {
		// Not a missing grant, which an operator settles, but a
		// passing failure: until a look succeeds, this instance cannot
		// know that none of its own transactions hangs (see ownUnproven).
		hr.blind = err
	}
	if producers == nil {
		hr.log.Warn("cannot describe the producers of the partitions this app writes to look for hanging transactions", zap.Error(err))
		hr.noteHangingDenied(denied, err)
		return 0
	}
	sctx, cancel := context.WithTimeout(ctx, searchBound)
	defer cancel()
	ev := hr.finder().NewEvidence(sctx, producers)
	cands, odenied := hr.hangingCandidates(ctx, producers, ev)
	denied = append(denied, odenied...)
	cands, ok := hr.stillOpen(ctx, adm, cands)
	if !ok {
		hr.blind = errors.New("the partitions of hanging transactions could not be described again")
		hr.noteHangingDenied(denied, nil)
		return 0
	}
	done := 0
	var unproven []txnrepair.Hanging
	for _, h := range cands {
		if !h.Verdict.Proven() {
			unproven = append(unproven, h)
		} else if hr.completeHanging(ctx, adm, h, &denied) {
			done++
		}
	}
	hr.noteUnproven(unproven)
	hr.noteHangingDenied(denied, nil)
	return done
}

// appProducers describes the producers of every partition this instance
// writes in its transactions: outputs, repartition topics, changelogs and
// __consumer_offsets, and extra (topics a batch wrote that the topology
// does not name: ToTopicFunc's). It also returns the grants it lacked. A look waits
// for the brokers as long as start-up does (connect_timeout).
func (hr *hangingRepair) appProducers(ctx context.Context, adm *kadm.Client, extra ...string) (kadm.DescribedProducersTopics, []string, error) {
	actx, cancel := context.WithTimeout(ctx, hr.cfg.ConnectTimeout)
	defer cancel()
	outputs, internal := hr.writes()
	topics := append([]string{"__consumer_offsets"}, outputs...)
	for _, t := range extra {
		if !slices.Contains(topics, t) {
			topics = append(topics, t)
		}
	}
	topics = append(topics, internal...)
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
		return nil, denied, withLeaderless(details, err)
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

// hangingCandidates returns the transactions of the partitions all
// describes (searched with ev) that hang, with their verdicts: this instance's producer id at an epoch
// older than this session's, and those of the app's other instances (or
// of producer ids no coordinator knows) that txnrepair.FindHanging finds.
// It also returns the grants it lacked.
func (hr *hangingRepair) hangingCandidates(ctx context.Context, all kadm.DescribedProducersTopics, ev *txnrepair.Evidence) ([]txnrepair.Hanging, []string) {
	var out []txnrepair.Hanging
	var others []kadm.DescribedProducer
	all.EachProducer(func(p kadm.DescribedProducer) {
		switch {
		case p.CurrentTxnStartOffset < 0:
		case p.ProducerID == hr.pid && p.ProducerEpoch < hr.pidEpoch:
			out = append(out, hr.ownHanging(ev, p))
		case p.ProducerID != hr.pid:
			others = append(others, p)
		}
	})
	orphans, err := hr.finder().FindHanging(ctx, txnrepair.Facts{AppID: hr.cfg.AppID, MaxTimeout: config.MaxTransactionTimeout,
		Instances: hr.groupInstances, Search: ev.Search, ActsOn: unattended}, others)
	var denied []string
	if err != nil {
		hr.log.Info("cannot ask the coordinators about every open transaction to tell hanging ones from open ones", zap.Error(err))
		if errors.Is(err, kerr.TransactionalIDAuthorizationFailed) {
			denied = append(denied, "Describe on the transactional ids "+hr.cfg.AppID+config.TransactionalIDSeparator+" (prefixed)")
		}
	}
	return append(out, orphans...), denied
}

// unattended reports whether the runtime completes h on its proven
// outcome by itself: when its coordinator has moved to a later epoch, or
// no coordinator lists its producer id (no live producer is unlisted).
// The other kinds hang by their age, read from the producer's last record
// timestamp, which is the record's own time: a live transaction whose
// marker is on its way can look old, so a marker written for it could
// land on its producer's next transaction. They wait as unproven ones
// do, and past recovery_timeout the stall names them for an operator
// (`eosctl txn hanging`, then `eosctl txn commit|abort`).
func unattended(h txnrepair.Hanging) bool {
	return h.TxnID == "" || h.Coordinator != nil && h.Coordinator.ProducerEpoch > h.ProducerEpoch
}

// ownHanging is a transaction of this instance's previous sessions that
// partition p holds open after InitProducerId. What the coordinator said
// before InitProducerId moved it on proves its outcome (see noteOwnTxn);
// failing that, its log or the markers it wrote elsewhere.
func (hr *hangingRepair) ownHanging(ev *txnrepair.Evidence, p kadm.DescribedProducer) txnrepair.Hanging {
	h := txnrepair.Hanging{DescribedProducer: p, TxnID: runcfg.TransactionalID(hr.cfg), Current: hr.pidEpoch,
		Reason: fmt.Sprintf("a transaction of this instance's producer at epoch %d, older than its current epoch %d", p.ProducerEpoch, hr.pidEpoch)}
	if v, ok := hr.ownTxns[txnEpoch{p.ProducerID, p.ProducerEpoch}]; ok {
		h.Verdict = v
	} else {
		h.Verdict = ev.Search(h.TxnID, p)
	}
	return h
}

// finder is the evidence search over this run's admin client.
func (hr *hangingRepair) finder() *txnrepair.Finder {
	admin := hr.admin()
	if hr.txnFinder == nil || hr.finderOn != admin {
		read := func(topic string, partition int32, offset int64) (*kgo.Client, error) {
			opts, err := kafkautil.ConnOptions(hr.cfg, hr.extra...)
			if err != nil {
				return nil, err
			}
			opts = append(opts, kgo.WithLogger(kzap.New(hr.log.Named("kgo"), kzap.LevelFn(hr.clientLevel))))
			return kgo.NewClient(append(opts, txnrepair.ReaderOpts(topic, partition, offset)...)...)
		}
		hr.txnFinder, hr.finderOn = txnrepair.NewFinder(admin, read, hr.log), admin
	}
	return hr.txnFinder
}

// txnEpoch names one transaction of a producer under transaction
// version 2, where every transaction has an epoch of its own.
type txnEpoch struct {
	pid   int64
	epoch int16
}

// stillOpen keeps the candidates whose partitions still hold the same
// transaction open after the coordinators and the searches (see
// txnrepair.StillOpen). It reports false when the partitions cannot be
// described.
func (hr *hangingRepair) stillOpen(ctx context.Context, adm *kadm.Client, cands []txnrepair.Hanging) ([]txnrepair.Hanging, bool) {
	out, err := txnrepair.StillOpen(ctx, adm, cands)
	if err != nil {
		hr.log.Info("cannot describe the partitions of hanging transactions again; leaving them for the next check", zap.Error(err))
		return nil, false
	}
	return out, true
}

// completeHanging writes the marker of h's proven outcome, at the epoch
// its coordinator would have used (txnrepair.Finder.RepairEpoch), and
// reports whether it did; a missing grant is added to denied.
func (hr *hangingRepair) completeHanging(ctx context.Context, adm *kadm.Client, h txnrepair.Hanging, denied *[]string) bool {
	fields := []zap.Field{zap.String("transactional_id", h.TxnID), zap.String("topic", h.Topic), zap.Int32("partition", h.Partition),
		zap.Int64("start_offset", h.CurrentTxnStartOffset), zap.Int64("producer_id", h.ProducerID), zap.Int16("stale_epoch", h.ProducerEpoch),
		zap.String("marker", h.Verdict.Marker()), zap.String("why", h.Reason), zap.String("proof", h.Verdict.Where)}
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	err := txnrepair.Complete(wctx, adm, h.DescribedProducer, h.Verdict, hr.finder().RepairEpoch(ctx, h.DescribedProducer, h.Current))
	if err != nil {
		if errors.Is(err, kerr.ClusterAuthorizationFailed) && !slices.Contains(*denied, "ClusterAction on the cluster") {
			*denied = append(*denied, "ClusterAction on the cluster")
		}
		hr.log.Warn("could not complete a hanging transaction whose outcome is proven; complete it with `eosctl txn "+
			strings.ToLower(h.Verdict.Marker())+"`", append(fields, zap.Error(err))...)
		return false
	}
	hr.log.Warn("completed a hanging transaction left by a broker crash with the outcome its coordinator decided", fields...)
	return true
}

// noteUnproven keeps the hanging transactions whose outcome nothing
// proves, and since when some have been, for the stall check: the
// pipeline waits for proof (a coordinator, its log, a marker, or an
// operator) up to recovery_timeout, and then stops with an error that
// names them (see HangingTxn). Each wait is logged.
func (hr *hangingRepair) noteUnproven(list []txnrepair.Hanging) {
	if len(list) == 0 {
		hr.unproven, hr.unprovenSince = nil, time.Time{}
		return
	}
	if hr.unprovenSince.IsZero() {
		hr.unprovenSince = time.Now()
	}
	hr.unproven = hr.unproven[:0]
	for _, h := range list {
		u := HangingTxn{TransactionalID: h.TxnID, ProducerID: h.ProducerID, Epoch: h.ProducerEpoch,
			Topic: h.Topic, Partition: h.Partition, StartOffset: h.CurrentTxnStartOffset}
		hr.unproven = append(hr.unproven, u)
		hr.log.Warn("waiting for proof of how a hanging transaction ended; it stays open, since completing it on a guess could drop committed records or expose aborted ones",
			zap.String("transactional_id", h.TxnID), zap.String("topic", h.Topic), zap.Int32("partition", h.Partition),
			zap.Int64("start_offset", h.CurrentTxnStartOffset), zap.Int64("producer_id", h.ProducerID), zap.Int16("epoch", h.ProducerEpoch),
			zap.String("why", h.Reason), zap.Bool("a_read_failed", h.Verdict.Unsure),
			zap.Duration("waited", time.Since(hr.unprovenSince).Round(time.Second)), zap.Duration("recovery_timeout", hr.cfg.RecoveryTimeout),
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
func (hr *hangingRepair) lookBeforeWriting(ctx context.Context) error {
	for try := 1; ; try++ {
		hr.repairHanging(ctx)
		err := hr.ownUnproven()
		if err == nil || hr.blind == nil || try == blindLooks {
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
func (hr *hangingRepair) ownUnproven() error {
	var own []HangingTxn
	for _, h := range hr.unproven {
		if h.ProducerID == hr.pid {
			own = append(own, h)
		}
	}
	if len(own) == 0 {
		if hr.blind != nil {
			hr.log.Warn("cannot look yet for hanging transactions of this instance's earlier sessions; waiting before writing, as Kafka would join a new transaction to one still open",
				zap.Error(hr.blind), zap.Duration("recovery_timeout", hr.cfg.RecoveryTimeout))
			return &rebuildError{fmt.Errorf("looking for hanging transactions of this instance before writing: %w; inspect with `eosctl txn hanging`", hr.blind)}
		}
		return nil
	}
	return &rebuildError{&HangingError{Hanging: own, Waited: time.Since(hr.unprovenSince)}}
}

// noteOwnTxn asks the coordinator of this instance's transactional id
// for its state before InitProducerId moves it on, and keeps what it
// proves of the transaction one epoch before (see
// txnrepair.Finder.FromCoordinator): repairHanging completes a partition
// that still holds that one open with the same outcome. Proofs are kept
// across sessions (a transaction's outcome is final), so a session that
// starts after a failed repair still has them. Bounded like
// InitProducerId, which waits for the same coordinator.
func (hr *hangingRepair) noteOwnTxn(ctx context.Context) {
	if hr.admin() == nil {
		return
	}
	dctx, cancel := context.WithTimeout(ctx, hr.coordTimeout)
	defer cancel()
	id := runcfg.TransactionalID(hr.cfg)
	described, err := kadm.NewClient(hr.admin()).DescribeTransactions(dctx, id)
	d, ok := described[id]
	if err == nil && ok {
		err = d.Err
	}
	if errors.Is(err, kerr.TransactionalIDNotFound) {
		return // a new instance: no transaction to prove
	}
	if err != nil || !ok {
		hr.log.Info("cannot read this instance's last transaction from its coordinator; a partition found still holding it open waits for other proof of its outcome",
			zap.String("transactional_id", id), zap.Error(err))
		return
	}
	if d.ProducerEpoch <= 0 {
		return
	}
	prev := kadm.DescribedProducer{ProducerID: d.ProducerID, ProducerEpoch: d.ProducerEpoch - 1}
	if v := hr.finder().FromCoordinator(dctx, d, prev); v.Proven() {
		if hr.ownTxns == nil {
			hr.ownTxns = make(map[txnEpoch]txnrepair.Verdict)
		}
		hr.ownTxns[txnEpoch{prev.ProducerID, prev.ProducerEpoch}] = v
	}
}

// groupInstances returns the instance ids of the group's members now;
// none when the group cannot be described.
func (hr *hangingRepair) groupInstances(ctx context.Context) map[string]bool {
	dctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	ids := map[string]bool{}
	g, err := kafkautil.DescribeGroup(dctx, hr.admin(), hr.cfg.AppID)
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
func (hr *hangingRepair) noteHangingDenied(denied []string, err error) {
	if errors.Is(err, kerr.TopicAuthorizationFailed) || errors.Is(err, kerr.ClusterAuthorizationFailed) {
		// Refused before any producer was seen: name all it takes.
		denied = []string{"Read on the topics it writes and on __consumer_offsets", "ClusterAction on the cluster"}
	}
	if len(denied) == 0 {
		return
	}
	hr.denied = "this instance may not look for or complete its own hanging transactions (it needs " +
		strings.Join(denied, ", ") + "); grant them, or settle the transaction with `eosctl txn hanging` and `eosctl txn commit` or `eosctl txn abort` as an admin"
	hr.log.Warn("cannot repair hanging transactions after a broker crash", zap.String("why", hr.denied))
}

// isAuthError reports a refusal for want of a grant, which no retry
// changes.
func isAuthError(err error) bool {
	return errors.Is(err, kerr.TopicAuthorizationFailed) || errors.Is(err, kerr.ClusterAuthorizationFailed) ||
		errors.Is(err, kerr.TransactionalIDAuthorizationFailed)
}
