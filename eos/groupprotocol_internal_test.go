package eos

import (
	"context"
	"testing"
	"time"

	"github.com/eosflow/eosflow/config"
	"github.com/eosflow/eosflow/internal/kafkautil"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// A session of this Runner that ended while its member was still joining
// (its look for hanging transactions failed, say) may leave that member
// active in a consumer-protocol group: its client is closed, but no leave
// reached the coordinator. The next session's member would be refused
// (UNRELEASED_INSTANCE_ID) until the group's session timeout, 45 s, so
// takeOverInstance removes the dead member although it was this Runner's
// own; one that left for now (epoch -2) stays.
func TestTakeOverInstanceRemovesOwnDeadSession(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "in", "out"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	cfg := config.Default()
	cfg.Brokers, cfg.AppID, cfg.InstanceID = c.ListenAddrs(), "app", "pod"
	cfg.GroupProtocol = config.GroupProtocolConsumer
	r := hangingRunner(t, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	heartbeat := func(epoch int32) {
		t.Helper()
		req := kmsg.NewPtrConsumerGroupHeartbeatRequest()
		req.Group, req.MemberID, req.MemberEpoch, req.InstanceID = "app", "own-session", epoch, kmsg.StringPtr("pod")
		req.RebalanceTimeoutMillis, req.SubscribedTopicNames, req.Topics = 10000, []string{"in"}, []kmsg.ConsumerGroupHeartbeatRequestTopic{}
		resp, err := req.RequestWith(ctx, r.admin)
		if err != nil || resp.ErrorCode != 0 {
			t.Fatalf("heartbeat at epoch %d: %v, error code %d", epoch, err, resp.ErrorCode)
		}
	}
	member := func() (kafkautil.GroupMember, bool) {
		t.Helper()
		g, err := kafkautil.DescribeGroup(ctx, r.admin, "app")
		if err != nil {
			t.Fatal(err)
		}
		return g.Member("pod")
	}
	heartbeat(0)
	r.members.own["own-session"] = true
	if m, ok := member(); !ok || m.Epoch < 0 {
		t.Fatalf("the own session's member is not active in the group: %+v (present %v)", m, ok)
	}
	r.members.takeOverInstance(ctx)
	if m, ok := member(); ok {
		t.Fatalf("the dead member of this Runner's own session is still in the group: %+v", m)
	}

	heartbeat(0)
	heartbeat(-2) // left for now, as franz-go's close of a static member does
	r.members.takeOverInstance(ctx)
	if m, ok := member(); !ok || m.Epoch != -2 {
		t.Fatalf("a member that left for now was touched: %+v (present %v)", m, ok)
	}
}
