package eos

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/eosflow/eosflow/config"
	"github.com/eosflow/eosflow/internal/kafkautil"
	"github.com/eosflow/eosflow/internal/runcfg"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"
)

// membership answers for this instance's place in the group: whether a
// fence or a FENCED_INSTANCE_ID is a newer process with the same
// instance_id (a zombie's end) or only the coordinator's own doing, how
// a member that died without leaving is removed, and how this one leaves.
// It knows the member ids this Runner's clients had, which are its own
// and never a successor's.
type membership struct {
	cfg   config.Config
	log   *zap.Logger
	admin func() *kgo.Client // preflight's client, once made
	own   map[string]bool    // group member ids this Runner's clients had
}

// note records a member id one of this Runner's clients had.
func (ms *membership) note(memberID string) {
	if memberID != "" {
		ms.own[memberID] = true
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
func (ms *membership) classifyFence(ctx context.Context, err error, open time.Duration, cl *kgo.Client) error {
	wait := fenceWait
	if open >= ms.cfg.TransactionTimeout {
		wait = 0 // our own timeout explains it; a successor would already show
	}
	deadline := time.Now().Add(wait)
	settleBy := time.Now().Add(max(wait, fenceSettleWait))
	if wait > 0 {
		ms.log.Info("producer fenced; looking in the group for a newer instance with this instance_id before redoing the batch",
			zap.String("instance_id", ms.cfg.InstanceID), zap.Duration("for", wait), zap.Error(err))
	}
	seen := 0 // a successor must show twice: our own rejoin can look like one for a moment
	var logged time.Time
	for {
		taken, settled := ms.instanceTaken(ctx, cl)
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
			ms.log.Info("producer fenced while the group rebalances; waiting for it to settle to tell a successor with this instance_id from this instance's own rejoin",
				zap.String("instance_id", ms.cfg.InstanceID), zap.Time("until", settleBy))
		}
		if !time.Now().Before(deadline) && seen == 0 && !unsettled || ctx.Err() != nil {
			break
		}
		time.Sleep(500 * time.Millisecond)
	}
	why := "a coordinator abort (e.g. after a coordinator failover)"
	if open >= ms.cfg.TransactionTimeout {
		why = fmt.Sprintf("the transaction, open %s, outliving transaction_timeout %s", open.Round(time.Millisecond), ms.cfg.TransactionTimeout)
	}
	ms.log.Warn("producer fenced, but no other instance with this instance_id is in the group; redoing the batch with a new producer epoch",
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
func (ms *membership) instanceTaken(ctx context.Context, cl *kgo.Client) (taken, settled bool) {
	id, _ := cl.GroupMetadata()
	ms.note(id)
	taken, known, settled := ms.slotState(ctx)
	return taken && settled, settled || !known
}

// slotTaken reports whether the group has a member with this instance id
// whose member id no client of this Runner ever had, and whether the
// group could be described at all.
func (ms *membership) slotTaken(ctx context.Context) (taken, known bool) {
	taken, known, _ = ms.slotState(ctx)
	return taken, known
}

// slotState is slotTaken, and whether the group is Stable.
func (ms *membership) slotState(ctx context.Context) (taken, known, settled bool) {
	dctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	g, err := kafkautil.DescribeGroup(dctx, ms.admin(), ms.cfg.AppID)
	if err != nil {
		return false, false, false
	}
	settled = g.State == "Stable"
	for _, m := range g.Members {
		if m.InstanceID == ms.cfg.InstanceID && !ms.own[m.MemberID] {
			return true, true, settled
		}
	}
	return false, true, settled
}

// leaveGroup makes a static member leave on a clean shutdown when
// LeaveGroupOnClose asks for it, so a scale-down moves its partitions at
// once; otherwise the member stays until session_timeout, which lets a
// restart take its partitions back without a rebalance.
func (ms *membership) leaveGroup() {
	if !ms.cfg.LeaveGroupOnClose || ms.admin() == nil {
		ms.log.Debug("staying in the group as a static member until session_timeout; set leave_group_on_close to leave on shutdown")
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), ms.cfg.ConnectTimeout)
	defer cancel()
	var err error
	if runcfg.Consumer(ms.cfg) {
		err = ms.leaveConsumerGroup(ctx)
	} else {
		var resp kadm.LeaveGroupResponses
		resp, err = kadm.NewClient(ms.admin()).LeaveGroup(ctx, kadm.LeaveGroup(ms.cfg.AppID).InstanceIDs(ms.cfg.InstanceID).Reason("eosflow shutdown"))
		if err == nil {
			err = resp.Error()
		}
	}
	if err != nil {
		ms.log.Warn("could not leave the group; its partitions move after session_timeout", zap.Error(err))
		return
	}
	ms.log.Info("left the group", zap.String("instance_id", ms.cfg.InstanceID))
}

// leaveConsumerGroup is leave_group_on_close under the consumer protocol.
// franz-go closes a static member with a temporary leave (member epoch
// -2), after which the group keeps its partitions for the member's
// return until the brokers' group.consumer.session.timeout.ms; a leave
// with epoch -1 for the same member id gives them to the others at once.
// A member id this Runner never had is a successor that took the
// instance id over, and stays.
func (ms *membership) leaveConsumerGroup(ctx context.Context) error {
	g, err := kafkautil.DescribeGroup(ctx, ms.admin(), ms.cfg.AppID)
	if err != nil {
		return err
	}
	m, ok := g.Member(ms.cfg.InstanceID)
	if !ok {
		return nil // gone already
	}
	if !ms.own[m.MemberID] {
		return fmt.Errorf("instance_id %q is held by member %s, which this process never was: another process took it over, and keeps it", ms.cfg.InstanceID, m.MemberID)
	}
	return ms.removeMember(ctx, m.MemberID)
}

// removeMember makes the member memberID, holding this instance's
// group.instance.id, leave the group for good (a consumer-protocol leave,
// member epoch -1).
func (ms *membership) removeMember(ctx context.Context, memberID string) error {
	req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	req.Group = ms.cfg.AppID
	req.MemberID = memberID
	req.InstanceID = &ms.cfg.InstanceID
	req.MemberEpoch = -1
	resp, err := req.RequestWith(ctx, ms.admin())
	if err != nil {
		return err
	}
	if err := kerr.ErrorForCode(resp.ErrorCode); err != nil && !errors.Is(err, kerr.UnknownMemberID) {
		return err
	}
	return nil
}

// takeOverInstance lets this Runner take its instance's place in a
// consumer-protocol group at once, as a static member does under the
// classic protocol. A member that holds the instance's group.instance.id
// and is still active (not a static member that left for now, epoch -2)
// is dead: a previous incarnation that died without leaving (SIGKILL, a
// lost node), or one of this Runner's own sessions, whose client is
// closed by now but whose leave did not reach the group (a session that
// ended while it was still joining). The coordinator refuses the new
// member (UNRELEASED_INSTANCE_ID) until group.consumer.session.timeout.ms
// (45 s by default) expires it, so it is removed first. One that left for
// now is left alone: the new member takes its place and its partitions
// without a rebalance. The instance id belongs to one process, as the
// transactional id does: a live process using it too is fenced, as under
// the classic protocol.
func (ms *membership) takeOverInstance(ctx context.Context) {
	if !runcfg.Consumer(ms.cfg) || ms.admin() == nil {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, ms.cfg.ConnectTimeout)
	defer cancel()
	g, err := kafkautil.DescribeGroup(ctx, ms.admin(), ms.cfg.AppID)
	if err != nil || g.Protocol != config.GroupProtocolConsumer {
		return
	}
	m, ok := g.Member(ms.cfg.InstanceID)
	if !ok || m.Epoch < 0 {
		return
	}
	which := "the previous incarnation of this instance"
	if ms.own[m.MemberID] {
		which = "this instance's previous session"
	}
	if err := ms.removeMember(ctx, m.MemberID); err != nil {
		ms.log.Warn("could not remove "+which+" from the group; joining once the brokers expire it (group.consumer.session.timeout.ms)",
			zap.String("member_id", m.MemberID), zap.Error(err))
		return
	}
	ms.log.Info("removed "+which+" from the group, which had not left", zap.String("member_id", m.MemberID),
		zap.Int32("member_epoch", m.Epoch))
}

// slotFreed answers a FENCED_INSTANCE_ID: the group gave this instance
// id's slot to a member id this Runner never had. A live process holding
// it keeps it; a dead incarnation's (restored by a broker restart) is
// dropped by the group after session_timeout. It waits that long, logging
// why, and reports whether the slot is free again.
func (ms *membership) slotFreed(ctx context.Context) bool {
	deadline := time.Now().Add(ms.cfg.SessionTimeout + 5*time.Second)
	ms.log.Warn("another member holds this instance's group slot; waiting up to session_timeout to see whether it is alive",
		zap.String("instance_id", ms.cfg.InstanceID), zap.Time("until", deadline))
	for time.Now().Before(deadline) {
		if ctx.Err() != nil {
			return true // shutting down: the backoff returns nil
		}
		if taken, known := ms.slotTaken(ctx); known && !taken {
			return true
		}
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
	return false
}
