package kafkautil

import (
	"context"
	"errors"

	"github.com/eosflow/eosflow/config"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// GroupMember is one member of a consumer group as its coordinator
// describes it, under either group protocol.
type GroupMember struct {
	MemberID   string
	InstanceID string // the group.instance.id; "" for a dynamic member
	// Assigned are the partitions the member holds now: under the
	// consumer protocol those it has taken up, not its target.
	Assigned map[string][]int32
	// Epoch is the consumer protocol's member epoch: -2 for a static
	// member that left for now (it keeps its partitions for its return
	// until the session timeout). 0 under the classic protocol.
	Epoch int32
}

// Group is a consumer group as its coordinator describes it.
type Group struct {
	// Protocol is the protocol the group runs: a group of the consumer
	// protocol is described by ConsumerGroupDescribe, a classic one by
	// DescribeGroups, and each API refuses the other kind.
	Protocol config.GroupProtocol
	// State is the coordinator's word for it: Stable once every member
	// holds what it was assigned (classic: also PreparingRebalance and
	// CompletingRebalance; consumer: Assigning and Reconciling), Empty,
	// or Dead for a group that does not exist.
	State   string
	Members []GroupMember
}

// Member returns the member with group.instance.id instance.
func (g Group) Member(instance string) (GroupMember, bool) {
	for _, m := range g.Members {
		if m.InstanceID == instance {
			return m, true
		}
	}
	return GroupMember{}, false
}

// DescribeGroup describes group whichever protocol it runs, so that the
// runtime's checks (who holds an instance id, which partitions are
// this instance's) work under group_protocol consumer too: DescribeGroups
// answers for a classic group, and for a KIP-848 group says
// GROUP_ID_NOT_FOUND (Apache Kafka) or shows no members (kfake), and
// then ConsumerGroupDescribe answers. A group that exists under neither
// is Dead with no members. The error is the request's or the classic
// group's own (e.g. not authorized).
func DescribeGroup(ctx context.Context, cl *kgo.Client, group string) (Group, error) {
	adm := kadm.NewClient(cl)
	described, err := adm.DescribeGroups(ctx, group)
	if err != nil {
		return Group{}, err
	}
	d := described[group]
	if d.Err != nil && !errors.Is(d.Err, kerr.GroupIDNotFound) {
		return Group{}, d.Err
	}
	g := Group{Protocol: config.GroupProtocolClassic, State: d.State}
	if d.Err != nil {
		g.State = "Dead"
	}
	for _, m := range d.Members {
		gm := GroupMember{MemberID: m.MemberID, Assigned: map[string][]int32{}}
		if m.InstanceID != nil {
			gm.InstanceID = *m.InstanceID
		}
		if c, ok := m.Assigned.AsConsumer(); ok {
			for _, t := range c.Topics {
				gm.Assigned[t.Topic] = append(gm.Assigned[t.Topic], t.Partitions...)
			}
		}
		g.Members = append(g.Members, gm)
	}
	if len(g.Members) > 0 {
		return g, nil
	}
	// No classic members: a KIP-848 group, or an empty or missing one.
	// Brokers before Kafka 3.7 lack the API and answer with an error.
	req := kmsg.NewPtrConsumerGroupDescribeRequest()
	req.Groups = []string{group}
	resp, err := req.RequestWith(ctx, cl)
	if err != nil || len(resp.Groups) != 1 || resp.Groups[0].ErrorCode != 0 {
		return g, nil
	}
	cg := resp.Groups[0]
	g = Group{Protocol: config.GroupProtocolConsumer, State: cg.State}
	var names map[[16]byte]string // topic ids the answer does not name (kfake)
	for _, m := range cg.Members {
		gm := GroupMember{MemberID: m.MemberID, Assigned: map[string][]int32{}, Epoch: m.MemberEpoch}
		if m.InstanceID != nil {
			gm.InstanceID = *m.InstanceID
		}
		for _, tp := range m.Assignment.TopicPartitions {
			topic := tp.Topic
			if topic == "" {
				if names == nil {
					names = topicNames(ctx, adm)
				}
				topic = names[tp.TopicID]
			}
			gm.Assigned[topic] = append(gm.Assigned[topic], tp.Partitions...)
		}
		g.Members = append(g.Members, gm)
	}
	return g, nil
}

// topicNames maps the cluster's topic ids to their names; empty when the
// metadata cannot be read.
func topicNames(ctx context.Context, adm *kadm.Client) map[[16]byte]string {
	names := map[[16]byte]string{}
	md, err := adm.Metadata(ctx)
	if err != nil {
		return names
	}
	for _, t := range md.Topics {
		names[t.ID] = t.Topic
	}
	return names
}
