package eos

import (
	"context"
	"testing"

	"github.com/eosflow/eosflow/config"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// While the group rebalances, its coordinator already lists the new
// member id of this client's own rejoin (after a broker restart, for
// seconds before the client learns it): a fenced instance must not take
// it for a successor with its instance id and stop as a zombie. Once the
// group is Stable, a member id with this instance id that no client of
// this Runner had is a successor.
func TestInstanceTakenOnlyInASettledGroup(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "in", "out"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	state, asked := "PreparingRebalance", 0
	c.ControlKey(int16(kmsg.DescribeGroups), func(kr kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		asked++
		req := kr.(*kmsg.DescribeGroupsRequest)
		resp := req.ResponseKind().(*kmsg.DescribeGroupsResponse)
		for _, g := range req.Groups {
			dg := kmsg.NewDescribeGroupsResponseGroup()
			dg.Group, dg.State, dg.ProtocolType = g, state, "consumer"
			m := kmsg.NewDescribeGroupsResponseGroupMember()
			id := "1"
			m.MemberID, m.InstanceID = "member-after-rejoin", &id
			dg.Members = append(dg.Members, m)
			resp.Groups = append(resp.Groups, dg)
		}
		return resp, nil, true
	})
	cfg := config.Default()
	cfg.Brokers, cfg.AppID, cfg.InstanceID = c.ListenAddrs(), "app", "1"
	r := hangingRunner(t, cfg)
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx := context.Background()
	if r.instanceTaken(ctx, cl) {
		t.Fatal("a rebalancing group's member with this instance id was taken for a successor")
	}
	if asked == 0 {
		t.Fatal("the group was never described: the test proves nothing")
	}
	for _, st := range []string{"CompletingRebalance", "Empty"} {
		state = st
		if r.instanceTaken(ctx, cl) {
			t.Fatalf("a group in state %s was taken to hold a successor", st)
		}
	}
	state = "Stable"
	if !r.instanceTaken(ctx, cl) {
		t.Fatal("a Stable group's member with this instance id, never this Runner's, was not taken for a successor")
	}
	if taken, known := r.slotTaken(ctx); !taken || !known {
		t.Fatalf("slotTaken = %v, %v; want the slot taken", taken, known)
	}
}
