package kafkautil

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// AwaitTopicsOnEveryBroker waits until every broker of the cluster lists
// each topic with a leader for every partition, or ctx ends. A topic just
// created shows on one broker before the others: a client that starts at
// once and asks another one may find it missing (an eos.Runner then stops
// with MissingTopicsError).
func AwaitTopicsOnEveryBroker(ctx context.Context, cl *kgo.Client, topics ...string) error {
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		why := topicsMissingSomewhere(ctx, cl, topics)
		if why == "" {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("topics %s not on every broker yet: %s: %w", strings.Join(topics, ", "), why, ctx.Err())
		case <-tick.C:
		}
	}
}

// topicsMissingSomewhere says which broker does not list which topic
// ready yet, or "" once all do.
func topicsMissingSomewhere(ctx context.Context, cl *kgo.Client, topics []string) string {
	brokers, err := kadm.NewClient(cl).ListBrokers(ctx)
	if err != nil {
		return "listing the brokers: " + err.Error()
	}
	for _, b := range brokers {
		req := kmsg.NewPtrMetadataRequest()
		for _, t := range topics {
			rt := kmsg.NewMetadataRequestTopic()
			rt.Topic = kmsg.StringPtr(t)
			req.Topics = append(req.Topics, rt)
		}
		resp, err := req.RequestWith(ctx, cl.Broker(int(b.NodeID)))
		if err != nil {
			return fmt.Sprintf("broker %d: %v", b.NodeID, err)
		}
		seen := map[string]bool{}
		for _, t := range resp.Topics {
			if t.Topic == nil || t.ErrorCode != 0 || len(t.Partitions) == 0 {
				continue
			}
			ready := true
			for _, p := range t.Partitions {
				ready = ready && p.ErrorCode == 0 && p.Leader >= 0
			}
			seen[*t.Topic] = ready
		}
		for _, t := range topics {
			if !seen[t] {
				return fmt.Sprintf("broker %d does not list %s with a leader for every partition", b.NodeID, t)
			}
		}
	}
	return ""
}
