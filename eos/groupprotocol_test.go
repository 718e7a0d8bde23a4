package eos_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/eosflow/eosflow/config"
	"github.com/eosflow/eosflow/eos"
	"github.com/eosflow/eosflow/internal/kafkautil"
	"github.com/eosflow/eosflow/state"
	"github.com/eosflow/eosflow/tools/conformance"
	"github.com/eosflow/eosflow/tools/kafkatest"
	"github.com/eosflow/eosflow/topology"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

// group_protocol consumer: two processes of two workers each, in a
// KIP-848 group, count every record once and in order per key while the
// second process joins and leaves again.
func TestGroupProtocolConsumerExactlyOnce(t *testing.T) {
	env := kafkatest.Fake(t)
	env.CreateTopics(t, 6, "in", "out")
	const n = 6000
	cfg := env.Config("count", "pod", config.ExactlyOnce)
	cfg.Workers = 2
	cfg.GroupProtocol = config.GroupProtocolConsumer
	cfg.MaxBatchRecords = 200
	cfg.LeaveGroupOnClose = true
	top := func() *topology.Topology { return conformance.CountTopology("in", "out", state.Memory()) }
	x := conformance.Start(t, cfg, top(), slowBatches)
	waitWorkersAssigned(t, env, cfg, 2)
	g := describe(t, env, "count")
	if g.Protocol != config.GroupProtocolConsumer || len(g.Members) != 2 {
		t.Fatalf("group %+v: want a consumer-protocol group of the two workers", g)
	}
	conformance.SeedRange(t, env, "in", 0, n/3)

	cfg2 := cfg
	cfg2.InstanceID = "pod2"
	y := conformance.Start(t, cfg2, top(), slowBatches)
	waitWorkersAssigned(t, env, cfg2, 2)
	conformance.SeedRange(t, env, "in", n/3, 2*n/3)
	conformance.Until(t, 90*time.Second, "the second third counted", func() bool {
		return x.R.Stats().RecordsIn+y.R.Stats().RecordsIn >= 2*n/3
	})
	if g := describe(t, env, "count"); len(g.Members) != 4 {
		t.Fatalf("group %+v: want the four workers", g)
	}
	y.Stop()
	if err := y.Wait(t, 60*time.Second); err != nil {
		t.Fatalf("second process: %v", err)
	}
	conformance.SeedRange(t, env, "in", 2*n/3, n)
	conformance.Until(t, 90*time.Second, "every record counted", func() bool {
		return x.R.Stats().RecordsIn+y.R.Stats().RecordsIn >= n
	})
	conformance.CheckCounts(t, env, "out", topology.ChangelogTopic("count", "counts"), n)
	if ys := y.R.Stats(); ys.RecordsIn == 0 {
		t.Fatalf("the second process counted nothing: %+v", ys)
	}
	if g := describe(t, env, "count"); len(g.Members) != 2 {
		t.Errorf("group %+v after the second process left: want the first process's two workers", g)
	}

	// A process that never committed (nothing left to count) leaves too.
	cfg3 := cfg
	cfg3.InstanceID = "pod3"
	z := conformance.Start(t, cfg3, top())
	waitWorkersAssigned(t, env, cfg3, 2)
	z.Stop()
	if err := z.Wait(t, 60*time.Second); err != nil {
		t.Fatalf("third process: %v", err)
	}
	if zs := z.R.Stats(); zs.Committed != 0 {
		t.Fatalf("the third process committed %d batches; want none", zs.Committed)
	}
	if g := describe(t, env, "count"); len(g.Members) != 2 {
		t.Errorf("group %+v after the third process left: want the first process's two workers", g)
	}
	t.Logf("first %+v, second %+v", x.R.Stats(), y.R.Stats())
}

func describe(t *testing.T, env *kafkatest.Env, group string) kafkautil.Group {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	g, err := kafkautil.DescribeGroup(ctx, env.Client(t), group)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// A broker that does not serve KIP-848 stops Run at start-up with
// ErrGroupProtocol, naming the fix, instead of the client falling back to
// the classic protocol unseen: one older than Kafka 4.0 (no
// ConsumerGroupHeartbeat v1), and one whose coordinator has the protocol
// switched off (it answers UNSUPPORTED_VERSION).
func TestGroupProtocolConsumerUnsupported(t *testing.T) {
	old := kversion.Stable()
	old.SetMaxKeyVersion(int16(kmsg.ConsumerGroupHeartbeat), -1)
	for _, tt := range []struct {
		name    string
		env     func(t *testing.T) *kafkatest.Env
		mention string
	}{
		{"no KIP-848 API", func(t *testing.T) *kafkatest.Env { return kafkatest.Fake(t, kfake.MaxVersions(old)) }, "Apache Kafka 4.0"},
		{"protocol switched off", func(t *testing.T) *kafkatest.Env {
			env := kafkatest.Fake(t)
			env.Fake.ControlKey(int16(kmsg.ConsumerGroupHeartbeat), func(req kmsg.Request) (kmsg.Response, error, bool) {
				env.Fake.KeepControl()
				resp := req.(*kmsg.ConsumerGroupHeartbeatRequest).ResponseKind().(*kmsg.ConsumerGroupHeartbeatResponse)
				resp.ErrorCode = 35 // UNSUPPORTED_VERSION
				return resp, nil, true
			})
			return env
		}, "group.coordinator.rebalance.protocols"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			env := tt.env(t)
			env.CreateTopics(t, 2, "in", "out")
			cfg := env.Config("app", "pod", config.ExactlyOnce)
			cfg.GroupProtocol = config.GroupProtocolConsumer
			x := conformance.Start(t, cfg, conformance.Upper("in", "out", nil))
			err := x.Wait(t, 30*time.Second)
			if !errors.Is(err, eos.ErrGroupProtocol) || !strings.Contains(err.Error(), tt.mention) || !strings.Contains(err.Error(), "group_protocol: classic") {
				t.Fatalf("Run = %v; want ErrGroupProtocol mentioning %q and the classic protocol", err, tt.mention)
			}

			// The classic protocol runs on the same broker.
			cfg.GroupProtocol = ""
			cfg.InstanceID = "classic"
			y := conformance.Start(t, cfg, conformance.Upper("in", "out", nil))
			conformance.Seed(t, env, "in", 100)
			y.WaitCommitted(t, 100, 60*time.Second)
		})
	}
}

// Under the consumer protocol a restarted instance takes the place of its
// previous incarnation at once, as a static member does under the classic
// protocol: one that died without leaving is removed from the group (the
// coordinator would refuse the newcomer until the session timeout, 45 s
// here), one that left for now at a clean stop is not.
func TestGroupProtocolConsumerRestartTakesOver(t *testing.T) {
	env := kafkatest.Fake(t)
	env.CreateTopics(t, 3, "in", "out")
	cfg := env.Config("app", "pod", config.ExactlyOnce)
	cfg.GroupProtocol = config.GroupProtocolConsumer

	// The dead incarnation: a member that joined as pod and never
	// heartbeats again.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	join := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	join.Group, join.MemberID, join.MemberEpoch, join.InstanceID = "app", "dead-incarnation-of-pod", 0, kmsg.StringPtr("pod")
	join.RebalanceTimeoutMillis, join.SubscribedTopicNames, join.Topics = 10000, []string{"in"}, []kmsg.ConsumerGroupHeartbeatRequestTopic{}
	resp, err := join.RequestWith(ctx, env.Client(t))
	if err != nil || resp.ErrorCode != 0 {
		t.Fatalf("joining as the dead incarnation: %v, error code %d", err, resp.ErrorCode)
	}
	if m, ok := describe(t, env, "app").Member("pod"); !ok || m.MemberID != "dead-incarnation-of-pod" {
		t.Fatalf("the dead incarnation is not in the group: %+v", describe(t, env, "app"))
	}

	core, logs := observer.New(zapcore.InfoLevel)
	x := conformance.Start(t, cfg, conformance.Upper("in", "out", nil), eos.Logger(zap.New(core)))
	conformance.Seed(t, env, "in", 300)
	x.WaitCommitted(t, 300, 20*time.Second)
	if logs.FilterMessage("removed the previous incarnation of this instance from the group, which had not left").
		FilterField(zap.String("member_id", "dead-incarnation-of-pod")).Len() != 1 {
		t.Fatalf("no log of the dead incarnation's removal: %v", logs.All())
	}

	// A clean stop leaves for now; the next start takes the place over
	// without removing anything.
	x.Stop()
	if err := x.Wait(t, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	if m, ok := describe(t, env, "app").Member("pod"); !ok || m.Epoch != -2 {
		t.Fatalf("after a clean stop the member is %+v (present %v); want it left for now, epoch -2", m, ok)
	}
	core2, logs2 := observer.New(zapcore.InfoLevel)
	y := conformance.Start(t, cfg, conformance.Upper("in", "out", nil), eos.Logger(zap.New(core2)))
	conformance.SeedRange(t, env, "in", 300, 600)
	y.WaitCommitted(t, 300, 20*time.Second)
	if n := logs2.FilterMessage("removed the previous incarnation of this instance from the group, which had not left").Len(); n != 0 {
		t.Fatalf("the restart after a clean stop removed %d members; want none", n)
	}
	conformance.ExactlyOnce(t, env, "out", 600)
}
