package eos

import (
	"context"

	"github.com/eosflow/eosflow/config"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"
)

// onAssigned and onRevoked are the rebalance callbacks.
func (r *Runner) onAssigned(ctx context.Context, cl *kgo.Client, got map[string][]int32) {
	// At info, so an operator sees the member joined and how much it got;
	// the partitions themselves at debug, as there may be hundreds.
	r.log.Info("partitions assigned", zap.Any("per_topic", counts(got)))
	r.log.Debug("partitions assigned, in full", zap.Any("partitions", got))
	r.contexts.assign(ctx, cl, got)
	r.health.assign(got)
	if r.state != nil {
		// franz-go calls this after every join (and, under the consumer
		// protocol, every new assignment), also when a revoke before it
		// was swallowed: the tasks kept wait for the group to confirm
		// them, before the partitions given up can move on.
		_, gen := cl.GroupMetadata()
		r.state.newAssignment(gen)
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
	if r.contract.atomic {
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
