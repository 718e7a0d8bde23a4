package eos

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/eosflow/eosflow/config"
	"github.com/eosflow/eosflow/internal/engine"
	"github.com/eosflow/eosflow/internal/kafkautil"
	"github.com/eosflow/eosflow/topology"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"
)

// pendingBatch is a batch whose commit was sent but not answered.
type pendingBatch struct {
	offsets map[string]map[int32]kgo.EpochOffset // what the commit carried
	in, out int
	tally   engine.Tally // its records' outcomes
}

// settlePending decides a batch whose commit outcome was lost from the
// offsets the group has committed, so the counters say what the broker
// did: a landed commit counts as committed; one that did not land is
// redone (and, without transactions, may duplicate). It runs before a new
// session processes anything, after the producer id load has ended any
// transaction left open, so the committed offsets are stable.
func (r *Runner) settlePending(ctx context.Context) error {
	p := r.pending
	if p == nil {
		return nil
	}
	landed, err := r.landed(p.offsets, r.endTimeout())
	if err != nil && r.abortHanging(ctx) > 0 {
		landed, err = r.landed(p.offsets, r.endTimeout())
	}
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return &rebuildError{fmt.Errorf("reading group %q's committed offsets to settle a commit whose answer was lost: %w; inspect with `eosctl group lag %s` and `eosctl txn hanging --topic __consumer_offsets`", r.cfg.AppID, err, r.cfg.AppID)}
	}
	r.pending = nil
	if landed {
		r.countSettled(p)
		return nil
	}
	r.noteAbort(abortCommit)
	r.noteRedone(&batch{in: p.in, out: p.out})
	r.log.Info("a batch whose commit answer was lost had not committed; redoing it", zap.Int("records", p.in))
	return nil
}

func (r *Runner) countSettled(p *pendingBatch) {
	r.healthy()
	r.count(p.in, p.out, p.tally)
	r.log.Info("a batch whose commit answer was lost had committed", zap.Int("records", p.in))
}

// landed reports whether the group's committed offsets have reached
// offsets on every partition of a batch. A partition whose offsets are
// held back by a pending transactional commit (UNSTABLE_OFFSET_COMMIT) is
// asked again until timeout; after that the outcome is an error. It looks
// only at the batch's partitions: other members' open transactions on
// other partitions do not matter.
func (r *Runner) landed(offsets map[string]map[int32]kgo.EpochOffset, timeout time.Duration) (bool, error) {
	ctx, cancel := context.WithTimeout(kadm.RequireStable(context.Background()), timeout)
	defer cancel()
	topics := make([]string, 0, len(offsets))
	for t := range offsets {
		topics = append(topics, t)
	}
	adm := kadm.NewClient(r.admin)
	for {
		committed, err := adm.FetchOffsetsForTopics(ctx, r.cfg.AppID, topics...)
		unsettled := err
		if err == nil {
		partitions:
			for topic, ps := range offsets {
				for partition, want := range ps {
					got, ok := committed.Lookup(topic, partition)
					switch {
					case !ok:
						unsettled = fmt.Errorf("no offset for %s/%d", topic, partition)
					case got.Err != nil:
						unsettled = fmt.Errorf("%s/%d: %w", topic, partition, got.Err)
					case got.At < want.Offset:
						// A transaction commits all its offsets or none.
						return false, nil
					default:
						continue
					}
					break partitions
				}
			}
			if unsettled == nil {
				return true, nil
			}
		}
		select {
		case <-ctx.Done():
			return false, unsettled
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// classifyFence tells a transaction the coordinator aborted on its own
// (it outlived transaction_timeout, or a coordinator failover aborted it)
// from a newer instance owning the transactional.id. The broker answers
// both the same way: the coordinator's abort bumps the producer epoch
// (always under transaction.version 2), so the stale producer's next
// Produce gets INVALID_PRODUCER_EPOCH and its EndTxn PRODUCER_FENCED or
// INVALID_TXN_STATE, exactly as a zombie's. The group tells them apart:
// the instance id is the static group.instance.id, so a newer process
// with the same id joins the group in this member's place, moments after
// its InitProducerId fenced us. Only then is this instance a zombie; any
// other fence is redone with a new producer epoch.
func (r *Runner) classifyFence(ctx context.Context, err error, open time.Duration, cl *kgo.Client) error {
	wait := fenceWait
	if open >= r.cfg.TransactionTimeout {
		wait = 0 // our own timeout explains it; a successor would already show
	}
	deadline := time.Now().Add(wait)
	settleBy := time.Now().Add(max(wait, fenceSettleWait))
	seen := 0 // a successor must show twice: our own rejoin can look like one for a moment
	logged := false
	for {
		taken, settled := r.instanceTaken(ctx, cl)
		if taken {
			if seen++; seen >= 2 {
				return err
			}
		} else {
			seen = 0
		}
		// A rebalancing group cannot tell a successor from this client's
		// own rejoin: wait for it to settle, up to fenceSettleWait.
		unsettled := !settled && time.Now().Before(settleBy)
		if unsettled && !logged && !time.Now().Before(deadline) {
			logged = true
			r.log.Info("producer fenced while the group rebalances; waiting for it to settle to tell a successor with this instance_id from this instance's own rejoin",
				zap.String("instance_id", r.cfg.InstanceID), zap.Time("until", settleBy))
		}
		if !time.Now().Before(deadline) && seen == 0 && !unsettled || ctx.Err() != nil {
			break
		}
		time.Sleep(500 * time.Millisecond)
	}
	why := "a coordinator abort (e.g. after a coordinator failover)"
	if open >= r.cfg.TransactionTimeout {
		why = fmt.Sprintf("the transaction, open %s, outliving transaction_timeout %s", open.Round(time.Millisecond), r.cfg.TransactionTimeout)
	}
	r.log.Warn("producer fenced, but no other instance with this instance_id is in the group; redoing the batch with a new producer epoch",
		zap.String("cause", why), zap.Error(err))
	// %v, not %w: this fence is not another instance's, so nothing
	// further up may take it for one.
	return &rebuildError{fmt.Errorf("producer fenced by %s: %v", why, err)}
}

// fenceWait is how long a fenced instance looks for a successor with its
// instance id in the group before it concludes there is none;
// fenceSettleWait how long it waits, past that, for a rebalancing group
// to settle before it concludes the same.
const (
	fenceWait       = 10 * time.Second
	fenceSettleWait = 30 * time.Second
)

// instanceTaken reports whether the group has a member with this
// instance id that is not this Runner: not the member id cl has now, nor
// one it had before (a rejoin after a broker restart changes it). Only a
// settled group counts: while it rebalances, the coordinator already
// lists the new member id of this client's own rejoin, which the client
// learns only when the join completes (seconds, after a broker restart),
// so it would pass for a successor.
func (r *Runner) instanceTaken(ctx context.Context, cl *kgo.Client) (taken, settled bool) {
	if id, _ := cl.GroupMetadata(); id != "" {
		r.ownMembers[id] = true
	}
	taken, known, settled := r.slotState(ctx)
	return taken && settled, settled || !known
}

// slotTaken reports whether the group has a member with this instance id
// whose member id no client of this Runner ever had, and whether the
// group could be described at all.
func (r *Runner) slotTaken(ctx context.Context) (taken, known bool) {
	taken, known, _ = r.slotState(ctx)
	return taken, known
}

// slotState is slotTaken, and whether the group is Stable.
func (r *Runner) slotState(ctx context.Context) (taken, known, settled bool) {
	dctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	g, err := kafkautil.DescribeGroup(dctx, r.admin, r.cfg.AppID)
	if err != nil {
		return false, false, false
	}
	settled = g.State == "Stable"
	for _, m := range g.Members {
		if m.InstanceID == r.cfg.InstanceID && !r.ownMembers[m.MemberID] {
			return true, true, settled
		}
	}
	return false, true, settled
}

// checkStall runs when no batch started for longer than stallBound. If
// records wait on partitions assigned to this instance (or the instance
// is not in the group at all while records wait), it logs what the
// client is waiting for and returns a rebuildError the first time and a
// *StallError the second time in a row. With nothing waiting it returns
// nil: an idle pipeline is not a stalled one.
func (r *Runner) checkStall(ctx context.Context, waited time.Duration) error {
	actx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	adm := kadm.NewClient(r.admin)
	inputs := r.inputs
	stable, err := adm.ListCommittedOffsets(actx, inputs...)
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return &rebuildError{fmt.Errorf("no batch for %s and the brokers %v do not answer: %w", waited.Round(time.Second), r.cfg.Brokers, err)}
	}
	committed, err := adm.FetchOffsetsForTopics(actx, r.cfg.AppID, inputs...)
	if err != nil {
		return &rebuildError{fmt.Errorf("no batch for %s and group %q's offsets cannot be read: %w", waited.Round(time.Second), r.cfg.AppID, err)}
	}
	mine, member, known := r.assigned(actx)
	// Candidates: this instance's partitions whose committed offset is
	// below the last stable offset.
	candidates := make(map[string]map[int32]kgo.Offset)
	stable.Each(func(o kadm.ListedOffset) {
		if o.Err != nil || known && member && !mine[o.Topic][o.Partition] {
			return
		}
		at := int64(0)
		if c, ok := committed.Lookup(o.Topic, o.Partition); ok && c.At >= 0 {
			at = c.At
		}
		if at < o.Offset {
			if candidates[o.Topic] == nil {
				candidates[o.Topic] = make(map[int32]kgo.Offset)
			}
			candidates[o.Topic][o.Partition] = kgo.NewOffset().At(at)
		}
	})
	// Below the last stable offset may lie only transaction markers and
	// aborted records, which no consumer ever gets: records wait only
	// where a read_committed reader finds some.
	waiting := r.readable(ctx, candidates)
	if len(waiting) == 0 {
		return nil
	}
	if n := r.abortHanging(ctx); n > 0 {
		return &rebuildError{fmt.Errorf("no batch for %s: aborted %d hanging transaction(s); restarting from the committed offsets", waited.Round(time.Second), n)}
	}
	what := "records from these partitions (the consumer fetched none)"
	if known && !member {
		what = "to join the group (this instance is not a member)"
	} else {
		sctx, scancel := context.WithTimeout(kadm.RequireStable(ctx), 3*time.Second)
		_, serr := adm.FetchOffsetsForTopics(sctx, r.cfg.AppID, inputs...)
		scancel()
		if serr != nil {
			what = fmt.Sprintf("the group's committed offsets, which a pending transactional offset commit holds back (%v): an open or hanging transaction", serr)
			if r.hangingDenied != "" {
				what += "; " + r.hangingDenied
			}
		}
	}
	serr := &StallError{Group: r.cfg.AppID, Partitions: waiting, Waited: waited, Waiting: what}
	r.stalls++
	if r.stalls >= 2 {
		r.log.Error("stalled; a new client did not help", zap.Error(serr))
		return serr
	}
	r.log.Warn("stalled; rebuilding the client", zap.Error(serr))
	return &rebuildError{serr}
}

// readable returns, as "topic/partition", the partitions where a
// read_committed reader starting at the given offsets gets a record
// within a few seconds.
func (r *Runner) readable(ctx context.Context, from map[string]map[int32]kgo.Offset) []string {
	if len(from) == 0 {
		return nil
	}
	base, err := r.cfg.KgoOpts()
	if err != nil {
		return nil
	}
	opts := append(append([]kgo.Opt{}, r.extra...), base...)
	cl, err := kgo.NewClient(append(opts, kgo.ConsumePartitions(from), kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.FetchMaxWait(500*time.Millisecond))...)
	if err != nil {
		return nil
	}
	defer cl.Close()
	pctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	n := 0
	for _, ps := range from {
		n += len(ps)
	}
	seen := make(map[string]bool)
	for len(seen) < n && pctx.Err() == nil {
		cl.PollFetches(pctx).EachPartition(func(p kgo.FetchTopicPartition) {
			if len(p.Records) > 0 {
				seen[p.Topic+"/"+strconv.Itoa(int(p.Partition))] = true
			}
		})
	}
	out := make([]string, 0, len(seen))
	for tp := range seen {
		out = append(out, tp)
	}
	slices.Sort(out)
	return out
}

// assigned returns the input partitions the group assigned to this
// instance, whether the instance is a member, and whether the group could
// be described at all (without DescribeGroups permission every partition
// is judged).
func (r *Runner) assigned(ctx context.Context) (map[string]map[int32]bool, bool, bool) {
	g, err := kafkautil.DescribeGroup(ctx, r.admin, r.cfg.AppID)
	if err != nil {
		return nil, false, false
	}
	m, ok := g.Member(r.cfg.InstanceID)
	if !ok {
		return nil, false, true
	}
	mine := make(map[string]map[int32]bool)
	for t, ps := range m.Assigned {
		mine[t] = make(map[int32]bool)
		for _, p := range ps {
			mine[t][p] = true
		}
	}
	return mine, true, true
}

// leaveGroup makes a static member leave on a clean shutdown when
// LeaveGroupOnClose asks for it, so a scale-down moves its partitions at
// once; otherwise the member stays until session_timeout, which lets a
// restart take its partitions back without a rebalance.
func (r *Runner) leaveGroup() {
	if !r.cfg.LeaveGroupOnClose || r.admin == nil {
		r.log.Debug("staying in the group as a static member until session_timeout; set leave_group_on_close to leave on shutdown")
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), r.cfg.ConnectTimeout)
	defer cancel()
	var err error
	if r.cfg.Consumer() {
		err = r.leaveConsumerGroup(ctx)
	} else {
		var resp kadm.LeaveGroupResponses
		resp, err = kadm.NewClient(r.admin).LeaveGroup(ctx, kadm.LeaveGroup(r.cfg.AppID).InstanceIDs(r.cfg.InstanceID).Reason("eosflow shutdown"))
		if err == nil {
			err = resp.Error()
		}
	}
	if err != nil {
		r.log.Warn("could not leave the group; its partitions move after session_timeout", zap.Error(err))
		return
	}
	r.log.Info("left the group", zap.String("instance_id", r.cfg.InstanceID))
}

func (r *Runner) closeAdmin() {
	r.health.admin.Store(nil)
	if r.admin != nil {
		r.admin.Close()
	}
}

// isInstanceFenced reports the group coordinator's word that another
// member joined with this instance's group.instance.id.
func isInstanceFenced(err error) bool { return errors.Is(err, kerr.FencedInstanceID) }

// abortHanging writes markers that end transactions that a partition
// this app writes still holds open although their producer has moved on
// (ABORT, or COMMIT where the coordinator proves a commit): this
// instance's producer id at an epoch older than the one this session's
// InitProducerId got (proved by what the coordinator said before it, see
// noteOwnTxn, or by the markers it wrote elsewhere, see markerOutcome),
// and the producers of the app's other instances that
// orphaned (see orphaned). A coordinator ends a
// transaction by writing markers to its partitions, but after a broker
// crash they can be lost, or skipped while the restarted broker's
// partitions have no leader yet: the partition then keeps the transaction
// open for good (KIP-664 calls it hanging), which holds back the group's
// committed offsets (UNSTABLE_OFFSET_COMMIT on every fetch), the output's
// last stable offset, or a changelog's restore. Nothing else can finish
// them; this is what `eosctl txn hanging` and `eosctl txn abort` do by
// hand. State stores never keep what such an abort removes: a restore
// reads back the last record a store applied (see restore). It returns
// how many it ended.
func (r *Runner) abortHanging(ctx context.Context) int {
	if r.pidEpoch < 0 {
		return 0 // no producer id loaded (not transactional)
	}
	r.hangingDenied = ""
	actx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	adm := kadm.NewClient(r.admin)
	// Every topic this instance writes in its transactions: outputs,
	// repartition topics and changelogs.
	topics := append([]string{"__consumer_offsets"}, r.top.OutputTopics()...)
	for topic := range r.repartitioned {
		topics = append(topics, topic)
	}
	if r.state != nil {
		for _, s := range r.state.specs {
			topics = append(topics, topology.ChangelogTopic(r.cfg.AppID, s.Name))
		}
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
		r.log.Warn("cannot list partitions to look for hanging transactions", zap.Error(err))
		return 0
	}
	for _, d := range details.Sorted() {
		if errors.Is(d.Err, kerr.TopicAuthorizationFailed) {
			denied = append(denied, "Describe on topic "+d.Topic)
		}
	}
	producers, err := adm.DescribeProducers(actx, details.TopicsSet())
	if err != nil {
		r.log.Warn("cannot describe producers to look for hanging transactions", zap.Error(err))
		r.noteHangingDenied(denied, err)
		return 0
	}
	refused := map[string]bool{}
	producers.EachPartition(func(p kadm.DescribedProducersPartition) {
		if errors.Is(p.Err, kerr.TopicAuthorizationFailed) && !refused[p.Topic] {
			refused[p.Topic] = true
			denied = append(denied, "Read on topic "+p.Topic)
		}
	})
	aborted := 0
	end := func(p kadm.DescribedProducer, commit bool, why string, epoch int16) {
		marker := "ABORT"
		if commit {
			marker = "COMMIT"
		}
		fields := []zap.Field{zap.String("topic", p.Topic), zap.Int32("partition", p.Partition), zap.Int64("start_offset", p.CurrentTxnStartOffset),
			zap.Int64("producer_id", p.ProducerID), zap.Int16("stale_epoch", p.ProducerEpoch), zap.String("marker", marker), zap.String("why", why)}
		wctx, wcancel := context.WithTimeout(ctx, 10*time.Second)
		defer wcancel()
		resp, err := adm.WriteTxnMarkers(wctx, kadm.TxnMarkers{
			ProducerID: p.ProducerID, ProducerEpoch: epoch,
			CoordinatorEpoch: max(p.CoordinatorEpoch, 0), Commit: commit,
			Topics: kadm.TopicsSet{p.Topic: {p.Partition: struct{}{}}},
		})
		if err == nil {
			resp.EachPartition(func(pr kadm.TxnMarkersPartitionResponse) {
				if pr.Err != nil && err == nil {
					err = pr.Err
				}
			})
		}
		if err != nil {
			if errors.Is(err, kerr.ClusterAuthorizationFailed) && !slices.Contains(denied, "ClusterAction on the cluster") {
				denied = append(denied, "ClusterAction on the cluster")
			}
			r.log.Warn("could not end a hanging transaction; end it with `eosctl txn abort`", append(fields, zap.Error(err))...)
			return
		}
		aborted++
		r.log.Warn("ended a hanging transaction left by a broker crash", fields...)
	}
	// How a hanging transaction ended, where its coordinator no longer
	// says: its own log first, then the markers it wrote elsewhere.
	// Searches share one bound, so that a repair with many hanging
	// transactions still ends in time for the next stall check.
	sctx, scancel := context.WithTimeout(ctx, 3*markerSearchTimeout)
	defer scancel()
	verdicts := map[txnEpoch]markerVerdict{}
	verdict := func(p kadm.DescribedProducer, txnID string) markerVerdict {
		k := txnEpoch{p.ProducerID, p.ProducerEpoch}
		v, ok := verdicts[k]
		if !ok {
			v = r.txnLogOutcome(sctx, adm, txnID, p.ProducerID, p.ProducerEpoch)
			if !v.found {
				m := r.markerOutcome(sctx, adm, producers, p)
				m.unsure = m.unsure || v.unsure && !m.found
				v = m
			}
			if v.unsure {
				r.log.Warn("cannot tell yet how the coordinator ended a hanging transaction; leaving it for the next check",
					zap.String("transactional_id", txnID), zap.Int64("producer_id", p.ProducerID), zap.Int16("epoch", p.ProducerEpoch),
					zap.String("topic", p.Topic), zap.Int32("partition", p.Partition))
			}
			verdicts[k] = v
		}
		return v
	}
	var others []kadm.DescribedProducer
	producers.EachProducer(func(p kadm.DescribedProducer) {
		switch {
		case p.CurrentTxnStartOffset < 0:
		case p.ProducerID == r.pid && p.ProducerEpoch < r.pidEpoch:
			// The coordinator finished the previous sessions' transactions
			// before InitProducerId answered, so only what it said before,
			// or the markers it wrote elsewhere, decide: a partition whose
			// marker a restarting broker skipped may hold a transaction
			// that committed everywhere else, and an ABORT would drop
			// offsets whose outputs committed.
			commit := r.committedTxns[txnEpoch{p.ProducerID, p.ProducerEpoch}]
			proven := commit
			why := fmt.Sprintf("a transaction of this instance's producer at epoch %d, older than its current epoch %d", p.ProducerEpoch, r.pidEpoch)
			if commit {
				why += ", that its coordinator committed"
			} else if v := verdict(p, r.cfg.TransactionalID()); v.found {
				commit, proven = v.commit, true
				why += ", that its coordinator ended with " + v.marker() + " (" + v.where + ")"
			} else if v.unsure {
				return // a read failed: an ABORT now could drop a commit
			} else {
				why += ", that no answer of its coordinator, its log or a marker it wrote proved committed"
			}
			end(p, commit, why, r.repairEpoch(ctx, p, proven, r.pidEpoch))
		case p.ProducerID != r.pid:
			others = append(others, p)
		}
	})
	orphans, odenied := r.orphaned(ctx, adm, others, verdict)
	for _, p := range orphans {
		end(p.DescribedProducer, p.commit, p.why, r.repairEpoch(ctx, p.DescribedProducer, p.proven, p.coord.ProducerEpoch))
	}
	denied = append(denied, odenied...)
	r.noteHangingDenied(denied, nil)
	return aborted
}

// orphan is an open transaction found hanging, the marker that ends it,
// whether that marker is proven, why, and its coordinator's state.
type orphan struct {
	kadm.DescribedProducer
	commit bool
	proven bool // the outcome is known, not a default
	why    string
	coord  kadm.DescribedTransaction // what its coordinator said
}

// orphaned returns the transactions of open (held open by partitions for
// producers other than this instance's) that hang: the producer is one
// of this app's (its transactional id starts with app_id:), and its
// coordinator has since moved to a newer epoch and is writing no markers
// (neither PrepareCommit nor PrepareAbort), so none will come. The
// partitions are described again after the coordinators, so that a
// marker written meanwhile is seen rather than raced.
//
// The marker is COMMIT when the coordinator proves the transaction
// committed: under transaction version 2 every EndTxn bumps the epoch, so
// a coordinator at the next epoch in CompleteCommit has committed exactly
// this transaction and written no marker of a later one anywhere; its
// partitions that got their markers are committed, and the rest must be
// too. Once the producer has ended a later transaction, the coordinator
// no longer says; the markers it wrote on the transaction's other
// partitions still do (verdict, see markerOutcome), and the hanging
// partition gets the same one. Otherwise ABORT: an unproven commit would
// keep input offsets whose outputs may be gone, while a transaction that
// wrote nowhere else (no outputs, no state) is harmless to run again. A
// transaction of an instance that runs again (in the group, its
// coordinator in a new session) and that no marker decides is left to
// it: it alone holds the proof (see noteOwnTxn). It also returns the
// grants it lacked.
func (r *Runner) orphaned(ctx context.Context, adm *kadm.Client, open []kadm.DescribedProducer, verdict func(kadm.DescribedProducer, string) markerVerdict) ([]orphan, []string) {
	if len(open) == 0 {
		return nil, nil
	}
	var denied []string
	deny := func(err error) {
		if errors.Is(err, kerr.TransactionalIDAuthorizationFailed) {
			denied = append(denied, "Describe on the transactional ids "+r.cfg.AppID+": (prefixed)")
		}
	}
	pids := make([]int64, 0, len(open))
	for _, p := range open {
		if !slices.Contains(pids, p.ProducerID) {
			pids = append(pids, p.ProducerID)
		}
	}
	lctx, lcancel := context.WithTimeout(ctx, 10*time.Second)
	defer lcancel()
	listed, err := adm.ListTransactions(lctx, pids, nil)
	if err != nil && len(listed) == 0 {
		r.log.Info("cannot list transactions to tell hanging ones from open ones", zap.Error(err))
		deny(err)
		return nil, denied
	}
	var ids []string
	for _, l := range listed {
		if strings.HasPrefix(l.TxnID, r.cfg.AppID+":") {
			ids = append(ids, l.TxnID)
		}
	}
	if len(ids) == 0 {
		return nil, denied
	}
	described, err := adm.DescribeTransactions(lctx, ids...)
	if err != nil && len(described) == 0 {
		r.log.Info("cannot describe transactions to tell hanging ones from open ones", zap.Error(err))
		deny(err)
		return nil, denied
	}
	byPID := map[int64]kadm.DescribedTransaction{}
	for _, d := range described {
		if d.Err == nil {
			byPID[d.ProducerID] = d
		} else {
			deny(d.Err)
		}
	}
	var instances map[string]bool // the group's, described once, when first asked
	live := func(txnID string) bool {
		if instances == nil {
			instances = r.groupInstances(ctx)
		}
		return instances[strings.TrimPrefix(txnID, r.cfg.AppID+config.TransactionalIDSeparator)]
	}
	var cands []orphan
	again := kadm.TopicsSet{}
	for _, p := range open {
		d, ok := byPID[p.ProducerID]
		if !ok || d.ProducerEpoch <= p.ProducerEpoch || d.State == "PrepareCommit" || d.State == "PrepareAbort" {
			continue
		}
		o := orphan{DescribedProducer: p, coord: d, why: fmt.Sprintf("a transaction of %s at epoch %d, whose coordinator is at epoch %d (%s) and writes it no marker",
			d.TxnID, p.ProducerEpoch, d.ProducerEpoch, d.State)}
		switch {
		case d.State == "CompleteCommit" && r.provenCommit(ctx, d, p):
			o.commit, o.proven = true, true
		case d.State == "CompleteAbort" && r.provenCommit(ctx, d, p):
			o.proven = true // its very EndTxn aborted it
		default:
			// Searched before the partitions are described again, so
			// that the marker follows the last look closely.
			if v := verdict(p, d.TxnID); v.found {
				o.commit, o.proven = v.commit, true
				o.why += ", and that it ended with " + v.marker() + " (" + v.where + ")"
			} else if v.unsure {
				continue // a read failed: an ABORT now could drop a commit
			} else if (d.State == "Empty" || d.State == "Ongoing") && live(d.TxnID) {
				// Its instance has started a new session and runs: it
				// knows, from before its InitProducerId, whether this one
				// committed, and ends it itself. An abort from here could
				// drop the offsets of a committed batch.
				continue
			} else {
				o.why += ", and neither its log nor a marker it wrote elsewhere was found"
			}
		}
		cands = append(cands, o)
		again.Add(p.Topic, p.Partition)
	}
	if len(cands) == 0 {
		return nil, denied
	}
	nctx, ncancel := context.WithTimeout(ctx, 10*time.Second)
	defer ncancel()
	now, err := adm.DescribeProducers(nctx, again)
	if err != nil {
		r.log.Info("cannot describe the partitions of hanging transactions again; leaving them", zap.Error(err))
		return nil, denied
	}
	var out []orphan
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
	return out, denied
}

// txnEpoch names one transaction of a producer under transaction
// version 2, where every transaction has an epoch of its own.
type txnEpoch struct {
	pid   int64
	epoch int16
}

// provenCommit reports whether coordinator state d, which has decided to
// commit, decided it for the transaction open in p: under transaction
// version 2 every EndTxn bumps the epoch, so the transaction of the epoch
// just before it is the one it committed. An earlier one, or any under
// version 1 (where an abort and a commit can share an epoch), may have
// aborted.
func (r *Runner) provenCommit(ctx context.Context, d kadm.DescribedTransaction, p kadm.DescribedProducer) bool {
	return d.ProducerID == p.ProducerID && d.ProducerEpoch == p.ProducerEpoch+1 && r.transactionsV2(ctx)
}

// repairEpoch is the epoch of the marker that ends hanging transaction
// p: the next one, as its coordinator writes it under transaction version
// 2, when the outcome is proven and the producer is past it (coordinator
// at current, beyond p's next epoch), so that a later search
// (markerOutcome) reads it as this transaction's outcome too; else p's
// own. Kafka checks a marker written by WriteTxnMarkers only against the
// partition's epoch (not below it): the next epoch on a partition that a
// live producer at that epoch has joined would end its open transaction
// too, and an unproven ABORT must not pass for the coordinator's.
func (r *Runner) repairEpoch(ctx context.Context, p kadm.DescribedProducer, proven bool, current int16) int16 {
	if proven && current > p.ProducerEpoch+1 && r.transactionsV2(ctx) {
		return p.ProducerEpoch + 1
	}
	return p.ProducerEpoch
}

// transactionsV2 reports whether the cluster has finalized
// transaction.version 2, under which the client bumps the epoch on every
// EndTxn. Only a yes is kept: a cluster is not downgraded under a
// running app, and a failed lookup must not stick as a no.
func (r *Runner) transactionsV2(ctx context.Context) bool {
	if r.txnV2 || r.admin == nil {
		return r.txnV2
	}
	actx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	resp, err := kmsg.NewPtrApiVersionsRequest().RequestWith(actx, r.admin)
	if err != nil || resp.ErrorCode != 0 {
		return false
	}
	for _, f := range resp.FinalizedFeatures {
		if f.Name == "transaction.version" && f.MaxVersionLevel >= 2 {
			r.txnV2 = true
		}
	}
	return r.txnV2
}

// noteOwnTxn asks the coordinator of this instance's transactional id
// for its state before InitProducerId moves it on, and keeps the
// transaction it proves committed: abortHanging commits, rather than
// aborts, a partition that still holds that one open. Proofs are kept
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
		r.log.Info("cannot read this instance's last transaction from its coordinator; a partition found still holding it open will be aborted",
			zap.String("transactional_id", id), zap.Error(err))
		return
	}
	if (d.State == "PrepareCommit" || d.State == "CompleteCommit") && d.ProducerEpoch > 0 && r.transactionsV2(ctx) {
		if r.committedTxns == nil {
			r.committedTxns = make(map[txnEpoch]bool)
		}
		r.committedTxns[txnEpoch{d.ProducerID, d.ProducerEpoch - 1}] = true
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
// instance from finding or aborting its hanging transactions: without
// them only an operator can end one, and the error must say so.
func (r *Runner) noteHangingDenied(denied []string, err error) {
	if errors.Is(err, kerr.TopicAuthorizationFailed) || errors.Is(err, kerr.ClusterAuthorizationFailed) {
		// Refused before any producer was seen: name all it takes.
		denied = []string{"Read on the topics it writes and on __consumer_offsets", "ClusterAction on the cluster"}
	}
	if len(denied) == 0 {
		return
	}
	r.hangingDenied = "this instance may not look for or abort its own hanging transactions (it needs " +
		strings.Join(denied, ", ") + "); grant them, or abort the transaction with `eosctl txn hanging` and `eosctl txn abort` as an admin"
	r.log.Warn("cannot repair hanging transactions after a broker crash", zap.String("why", r.hangingDenied))
}
