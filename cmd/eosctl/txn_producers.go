package main

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
)

// producerJSON is one producer's state on one partition (DescribeProducers).
type producerJSON struct {
	Topic                 string     `json:"topic"`
	Partition             int32      `json:"partition"`
	Leader                int32      `json:"leader"`
	ProducerID            int64      `json:"producer_id"`
	ProducerEpoch         int16      `json:"producer_epoch"`
	LastSequence          int32      `json:"last_sequence"`
	LastTimestamp         *time.Time `json:"last_timestamp,omitempty"`
	CoordinatorEpoch      int32      `json:"coordinator_epoch"`
	CurrentTxnStartOffset int64      `json:"current_txn_start_offset"`
}

// producerToJSON converts kadm's producer state.
func producerToJSON(p kadm.DescribedProducer) producerJSON {
	j := producerJSON{
		Topic: p.Topic, Partition: p.Partition, Leader: p.Leader,
		ProducerID: p.ProducerID, ProducerEpoch: p.ProducerEpoch, LastSequence: p.LastSequence,
		CoordinatorEpoch: p.CoordinatorEpoch, CurrentTxnStartOffset: p.CurrentTxnStartOffset,
	}
	if ts := millis(p.LastTimestamp); !ts.IsZero() {
		j.LastTimestamp = &ts
	}
	return j
}

// topicPartitions resolves --topic/--partition into a topic set, failing
// clearly when the topic or partition does not exist. partition < 0 means
// every partition of the topic.
func topicPartitions(ctx context.Context, adm *kadm.Client, topic string, partition int32) (kadm.TopicsSet, error) {
	md, err := adm.Metadata(ctx, topic)
	if err != nil {
		return nil, kafkaErr("metadata for topic "+topic, err)
	}
	td, ok := md.Topics[topic]
	if !ok || td.Err != nil {
		return nil, fmt.Errorf("topic %q not found — check --topic (list topics with 'eosctl topic list')", topic)
	}
	s := kadm.TopicsSet{}
	if partition >= 0 {
		if _, ok := td.Partitions[partition]; !ok {
			return nil, fmt.Errorf("topic %q has no partition %d — it has %d partitions", topic, partition, len(td.Partitions))
		}
		s.Add(topic, partition)
		return s, nil
	}
	for p := range td.Partitions {
		s.Add(topic, p)
	}
	return s, nil
}

// describeProducers runs DescribeProducers and fails on partition errors.
func describeProducers(ctx context.Context, adm *kadm.Client, s kadm.TopicsSet) ([]kadm.DescribedProducer, error) {
	described, err := adm.DescribeProducers(ctx, s)
	if err != nil {
		return nil, kafkaErr("describe producers", err)
	}
	for _, p := range described.SortedPartitions() {
		if p.Err != nil {
			return nil, kafkaErr(fmt.Sprintf("describe producers of %s-%d", p.Topic, p.Partition), p.Err)
		}
	}
	return described.SortedProducers(), nil
}

// producersOf resolves --topic/--partition and describes the producers
// of those partitions, returning both.
func producersOf(ctx context.Context, adm *kadm.Client, topic string, partition int32) (kadm.TopicsSet, []kadm.DescribedProducer, error) {
	s, err := topicPartitions(ctx, adm, topic, partition)
	if err != nil {
		return nil, nil, err
	}
	producers, err := describeProducers(ctx, adm, s)
	return s, producers, err
}

// newTxnProducersCmd shows the producers writing to a topic's partitions.
func newTxnProducersCmd(g *globals) *cobra.Command {
	var (
		topic     string
		partition int32
	)
	c := &cobra.Command{
		Use:   "producers --topic T [--partition N]",
		Short: "Show active producers of a topic's partitions (DescribeProducers)",
		Long: `Show the producers the partition leaders track: producer id and epoch, last
sequence and timestamp, coordinator epoch, and the start offset of the
producer's open transaction (-1 when none is open).`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return g.withAdmin(cmd, func(ctx context.Context, adm *kadm.Client) error {
				_, producers, err := producersOf(ctx, adm, topic, partition)
				if err != nil {
					return err
				}
				out := []producerJSON{}
				t := newTable("TOPIC", "PARTITION", "LEADER", "PRODUCER ID", "EPOCH", "LAST SEQUENCE", "LAST TIMESTAMP", "COORDINATOR EPOCH", "TXN START OFFSET")
				for _, p := range producers {
					j := producerToJSON(p)
					out = append(out, j)
					t.add(p.Topic, p.Partition, p.Leader, p.ProducerID, p.ProducerEpoch, p.LastSequence,
						fmtTime(millis(p.LastTimestamp)), p.CoordinatorEpoch, p.CurrentTxnStartOffset)
				}
				return g.render(cmd.OutOrStdout(), out, t)
			})
		},
	}
	c.Flags().StringVar(&topic, "topic", "", "topic to describe (required)")
	c.Flags().Int32Var(&partition, "partition", -1, "only this partition (default all)")
	_ = c.MarkFlagRequired("topic")
	return c
}
