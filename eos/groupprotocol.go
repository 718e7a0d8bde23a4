package eos

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/eosflow/eosflow/config"
	"github.com/eosflow/eosflow/internal/kafkautil"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"
)

// ErrGroupProtocol means group_protocol is consumer (KIP-848) and the
// brokers do not serve that protocol: they are older than Apache Kafka
// 4.0, or their group.coordinator.rebalance.protocols leaves it out.
// franz-go would fall back to the classic protocol without a word, so Run
// stops at start-up instead.
var ErrGroupProtocol = errors.New("eos: the brokers do not serve the consumer group protocol")

// checkGroupProtocol makes sure, under group_protocol consumer, that every
// broker offers ConsumerGroupHeartbeat v1 (what franz-go speaks) and that
// the group coordinator accepts it: a broker with the protocol switched
// off still lists the API, but answers UNSUPPORTED_VERSION. The probe is
// a leave, for a member id no client has, which changes no group. An
// answer that settles nothing (a coordinator still loading, a refused
// grant) leaves the question to the join itself.
func (r *Runner) checkGroupProtocol(ctx context.Context, cl *kgo.Client) error {
	if !r.cfg.Consumer() {
		return nil
	}
	fix := "set group_protocol: classic (EOS_GROUP_PROTOCOL=classic)"
	vs, err := kadm.NewClient(cl).ApiVersions(ctx)
	if err != nil {
		return nil // preflight's other requests report unreachable brokers
	}
	var problem error
	vs.Each(func(v kadm.BrokerApiVersions) {
		if v.Err != nil || problem != nil {
			return
		}
		if max, ok := v.KeyMaxVersion(int16(kmsg.ConsumerGroupHeartbeat)); !ok || max < 1 {
			problem = fmt.Errorf("%w: group_protocol consumer needs ConsumerGroupHeartbeat v1 (KIP-848, Apache Kafka 4.0 or later), and broker %d (Kafka %s) does not offer it; upgrade the brokers or %s",
				ErrGroupProtocol, v.NodeID, v.VersionGuess(), fix)
		}
	})
	if problem != nil {
		return problem
	}
	id := make([]byte, 16)
	_, _ = rand.Read(id)
	for attempt := 0; attempt < 3 && ctx.Err() == nil; attempt++ {
		req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
		req.Group = r.cfg.AppID
		req.MemberID = base64.RawURLEncoding.EncodeToString(id)
		req.MemberEpoch = -1 // a leave
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			return nil
		}
		switch err := kerr.ErrorForCode(resp.ErrorCode); {
		case errors.Is(err, kerr.UnsupportedVersion):
			return fmt.Errorf("%w: group_protocol consumer (KIP-848): the group coordinator of %q at %s answers UNSUPPORTED_VERSION, so the brokers' group.coordinator.rebalance.protocols leaves out consumer; add it there or %s",
				ErrGroupProtocol, r.cfg.AppID, strings.Join(r.cfg.Brokers, ","), fix)
		case errors.Is(err, kerr.CoordinatorNotAvailable), errors.Is(err, kerr.CoordinatorLoadInProgress), errors.Is(err, kerr.NotCoordinator):
			select { // the client does not retry a heartbeat
			case <-ctx.Done():
			case <-time.After(200 * time.Millisecond):
			}
		default:
			return nil // served: the member or the group is unknown, as it should be
		}
	}
	return nil
}

// leaveConsumerGroup is leave_group_on_close under the consumer protocol.
// franz-go closes a static member with a temporary leave (member epoch
// -2), after which the group keeps its partitions for the member's
// return until the brokers' group.consumer.session.timeout.ms; a leave
// with epoch -1 for the same member id gives them to the others at once.
// A member id this Runner never had is a successor that took the
// instance id over, and stays.
func (r *Runner) leaveConsumerGroup(ctx context.Context) error {
	g, err := kafkautil.DescribeGroup(ctx, r.admin, r.cfg.AppID)
	if err != nil {
		return err
	}
	m, ok := g.Member(r.cfg.InstanceID)
	if !ok {
		return nil // gone already
	}
	if !r.ownMembers[m.MemberID] {
		return fmt.Errorf("instance_id %q is held by member %s, which this process never was: another process took it over, and keeps it", r.cfg.InstanceID, m.MemberID)
	}
	return r.removeMember(ctx, m.MemberID)
}

// removeMember makes the member memberID, holding this instance's
// group.instance.id, leave the group for good (a consumer-protocol leave,
// member epoch -1).
func (r *Runner) removeMember(ctx context.Context, memberID string) error {
	req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	req.Group = r.cfg.AppID
	req.MemberID = memberID
	req.InstanceID = &r.cfg.InstanceID
	req.MemberEpoch = -1
	resp, err := req.RequestWith(ctx, r.admin)
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
func (r *Runner) takeOverInstance(ctx context.Context) {
	if !r.cfg.Consumer() || r.admin == nil {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, r.cfg.ConnectTimeout)
	defer cancel()
	g, err := kafkautil.DescribeGroup(ctx, r.admin, r.cfg.AppID)
	if err != nil || g.Protocol != config.GroupProtocolConsumer {
		return
	}
	m, ok := g.Member(r.cfg.InstanceID)
	if !ok || m.Epoch < 0 {
		return
	}
	which := "the previous incarnation of this instance"
	if r.ownMembers[m.MemberID] {
		which = "this instance's previous session"
	}
	if err := r.removeMember(ctx, m.MemberID); err != nil {
		r.log.Warn("could not remove "+which+" from the group; joining once the brokers expire it (group.consumer.session.timeout.ms)",
			zap.String("member_id", m.MemberID), zap.Error(err))
		return
	}
	r.log.Info("removed "+which+" from the group, which had not left", zap.String("member_id", m.MemberID),
		zap.Int32("member_epoch", m.Epoch))
}
