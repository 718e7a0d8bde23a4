package eos

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/eosflow/eosflow/internal/engine"
	"github.com/eosflow/eosflow/internal/kafkautil"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
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
	landed, err := r.landed(ctx, p.offsets, r.endTimeout())
	if err != nil && ctx.Err() == nil && r.hanging.repairHanging(ctx) > 0 {
		landed, err = r.landed(ctx, p.offsets, r.endTimeout())
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
	r.floor.raise(p.offsets)
	r.count(p.in, p.out, p.tally)
	r.log.Info("a batch whose commit answer was lost had committed", zap.Int("records", p.in))
}

// landed reports whether the group's committed offsets have reached
// offsets on every partition of a batch. A partition whose offsets are
// held back by a pending transactional commit (UNSTABLE_OFFSET_COMMIT) is
// asked again until timeout; after that the outcome is an error. It looks
// only at the batch's partitions: other members' open transactions on
// other partitions do not matter. It ends with ctx too: settling at a
// new session's start must not hold Close for its timeouts.
func (r *Runner) landed(ctx context.Context, offsets map[string]map[int32]kgo.EpochOffset, timeout time.Duration) (bool, error) {
	ctx, cancel := context.WithTimeout(kadm.RequireStable(ctx), timeout)
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
			unsettled = r.committedBelowFloor(committed, offsets)
		}
		if err == nil && unsettled == nil {
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
	if wait > 0 {
		r.log.Info("producer fenced; looking in the group for a newer instance with this instance_id before redoing the batch",
			zap.String("instance_id", r.cfg.InstanceID), zap.Duration("for", wait), zap.Error(err))
	}
	seen := 0 // a successor must show twice: our own rejoin can look like one for a moment
	var logged time.Time
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
		if unsettled && !time.Now().Before(deadline) && time.Since(logged) >= fenceSettleLog {
			logged = time.Now()
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
// to settle before it concludes the same, saying so every fenceSettleLog.
const (
	fenceWait       = 10 * time.Second
	fenceSettleWait = 30 * time.Second
	fenceSettleLog  = 5 * time.Second
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
