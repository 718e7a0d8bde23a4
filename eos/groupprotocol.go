package eos

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/eosflow/eosflow/internal/runcfg"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
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
func (pc *preflightCheck) checkGroupProtocol(ctx context.Context, cl *kgo.Client) error {
	if !runcfg.Consumer(pc.cfg) {
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
		req.Group = pc.cfg.AppID
		req.MemberID = base64.RawURLEncoding.EncodeToString(id)
		req.MemberEpoch = -1 // a leave
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			return nil
		}
		switch err := kerr.ErrorForCode(resp.ErrorCode); {
		case errors.Is(err, kerr.UnsupportedVersion):
			return fmt.Errorf("%w: group_protocol consumer (KIP-848): the group coordinator of %q at %s answers UNSUPPORTED_VERSION, so the brokers' group.coordinator.rebalance.protocols leaves out consumer; add it there or %s",
				ErrGroupProtocol, pc.cfg.AppID, strings.Join(pc.cfg.Brokers, ","), fix)
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
