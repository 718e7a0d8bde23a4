package eos

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/eosflow/eosflow/config"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
)

// While the group rebalances, its coordinator already lists the new
// member id of this client's own rejoin (after a broker restart, for
// seconds before the client learns it): a fenced instance must not take
// it for a successor with its instance id and stop as a zombie. Once the
// group is Stable, a member id with this instance id that no client of
// this Runner had is a successor.
func TestInstanceTakenOnlyInASettledGroup(t *testing.T) {
	c := fenceCluster(t)
	state, asked := "PreparingRebalance", 0
	groupHolds(c, "member-after-rejoin", func() string { asked++; return state })
	r, cl := fenceRunner(t, c)
	ctx := context.Background()
	if taken, settled := r.members.instanceTaken(ctx, cl); taken || settled {
		t.Fatalf("a rebalancing group: taken %v, settled %v; want neither", taken, settled)
	}
	if asked == 0 {
		t.Fatal("the group was never described: the test proves nothing")
	}
	state = "CompletingRebalance"
	if taken, settled := r.members.instanceTaken(ctx, cl); taken || settled {
		t.Fatalf("a group completing a rebalance: taken %v, settled %v; want neither", taken, settled)
	}
	state = "Stable"
	if taken, settled := r.members.instanceTaken(ctx, cl); !taken || !settled {
		t.Fatalf("a Stable group's member with this instance id, never this Runner's: taken %v, settled %v; want both", taken, settled)
	}
	if taken, known := r.members.slotTaken(ctx); !taken || !known {
		t.Fatalf("slotTaken = %v, %v; want the slot taken", taken, known)
	}
}

// A fenced instance whose transaction outlived its timeout (so it looks
// for a successor only briefly) still waits for a rebalancing group to
// settle: a successor that is joining shows only then, and redoing the
// batch with a new producer epoch would fence it and keep a zombie
// running.
func TestClassifyFenceWaitsForARebalancingGroup(t *testing.T) {
	c := fenceCluster(t)
	var described atomic.Int32
	groupHolds(c, "successor", func() string {
		if described.Add(1) > 4 { // about 2s on
			return "Stable"
		}
		return "PreparingRebalance"
	})
	r, cl := fenceRunner(t, c)
	fence := kerr.InvalidProducerEpoch
	start := time.Now()
	got := r.members.classifyFence(context.Background(), fence, r.cfg.TransactionTimeout+time.Second, cl)
	if !errors.Is(got, fence) {
		t.Fatalf("classifyFence = %v; want the fence itself (a successor took over), not a redo", got)
	}
	var rb *rebuildError
	if errors.As(got, &rb) {
		t.Fatalf("classifyFence = %v: a redo would fence the successor", got)
	}
	if described.Load() <= 4 {
		t.Fatalf("the group was described %d times: the test proves nothing", described.Load())
	}
	if d := time.Since(start); d > fenceSettleWait {
		t.Fatalf("took %s, more than fenceSettleWait", d)
	}
}

// A fenced instance waiting for a rebalancing group to settle says so
// every fenceSettleLog, not once: a group that rebalances for long never
// leaves it silent past the 15 s the harness allows.
func TestClassifyFenceKeepsSayingItWaitsForARebalance(t *testing.T) {
	t.Parallel()
	c := fenceCluster(t)
	groupHolds(c, "successor", func() string { return "PreparingRebalance" })
	r, cl := fenceRunner(t, c)
	core, logs := observer.New(zap.InfoLevel)
	r.members.log = zap.New(core)
	ctx, cancel := context.WithTimeout(context.Background(), 2*fenceSettleLog+3*time.Second)
	defer cancel()
	// Open past transaction_timeout: no successor is looked for first,
	// only the rebalance waited out.
	_ = r.members.classifyFence(ctx, kerr.InvalidProducerEpoch, r.cfg.TransactionTimeout+time.Second, cl)
	const waiting = "producer fenced while the group rebalances; waiting for it to settle to tell a successor with this instance_id from this instance's own rejoin"
	if n := logs.FilterMessage(waiting).Len(); n < 3 {
		t.Fatalf("%d lines say what the wait is for in %v; want one every %v", n, 2*fenceSettleLog+3*time.Second, fenceSettleLog)
	}
}

// groupHolds makes c answer DescribeGroups with one member, memberID,
// holding instance id "1", in the state state returns at each call.
func groupHolds(c *kfake.Cluster, memberID string, state func() string) {
	c.ControlKey(int16(kmsg.DescribeGroups), func(kr kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		req := kr.(*kmsg.DescribeGroupsRequest)
		resp := req.ResponseKind().(*kmsg.DescribeGroupsResponse)
		st := state()
		for _, g := range req.Groups {
			dg := kmsg.NewDescribeGroupsResponseGroup()
			dg.Group, dg.State, dg.ProtocolType = g, st, "consumer"
			m := kmsg.NewDescribeGroupsResponseGroupMember()
			id := "1"
			m.MemberID, m.InstanceID = memberID, &id
			dg.Members = append(dg.Members, m)
			resp.Groups = append(resp.Groups, dg)
		}
		return resp, nil, true
	})
}

// fenceCluster is a kfake cluster with topics in and out, closed with t.
func fenceCluster(t *testing.T) *kfake.Cluster {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "in", "out"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// fenceRunner is a Runner of app with instance id "1" on c, and a plain
// client of c standing for its session's client (in no group).
func fenceRunner(t *testing.T, c *kfake.Cluster) (*Runner, *kgo.Client) {
	t.Helper()
	cfg := config.Default()
	cfg.Brokers, cfg.AppID, cfg.InstanceID = c.ListenAddrs(), "app", "1"
	r := hangingRunner(t, cfg)
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return r, cl
}

// A fenced instance looks for a successor for fenceWait before it redoes
// the batch; it says so when it starts looking, not only when it is done,
// so a stalled pipeline is never silent.
func TestClassifyFenceSaysWhatItLooksFor(t *testing.T) {
	c := fenceCluster(t)
	r, cl := fenceRunner(t, c)
	core, logs := observer.New(zap.InfoLevel)
	r.members.log = zap.New(core)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- r.members.classifyFence(ctx, kerr.ProducerFenced, time.Second, cl) }()
	deadline := time.Now().Add(time.Second)
	for logs.FilterMessageSnippet("looking in the group for a newer instance").Len() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("a fenced instance looked for a successor for a second without a word")
		}
		time.Sleep(10 * time.Millisecond)
	}
	select {
	case err := <-done:
		t.Fatalf("classifyFence returned %v at once: the test proves nothing", err)
	default:
	}
	cancel() // Run ending: it stops looking
	var rb *rebuildError
	if err := <-done; !errors.As(err, &rb) {
		t.Fatalf("classifyFence = %v; want a redo (no successor in the group)", err)
	}
}
