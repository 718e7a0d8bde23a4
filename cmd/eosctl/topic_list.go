package main

import (
	"context"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
)

// listedTopicJSON is one topic of `topic list`.
type listedTopicJSON struct {
	Topic             string `json:"topic"`
	Partitions        int    `json:"partitions"`
	ReplicationFactor int    `json:"replication_factor"` // -1 when unknown
	Internal          bool   `json:"internal,omitempty"`
}

// newTopicListCmd lists the cluster's topics with their size, to check that
// a pipeline's topics exist.
func newTopicListCmd(g *globals) *cobra.Command {
	var internal bool
	c := &cobra.Command{
		Use:   "list [--internal]",
		Short: "List topics with their partition count and replication factor",
		Long: `List the topics the credentials may describe, sorted by name, with their
partition count and replication factor. Kafka's internal topics
(__consumer_offsets, __transaction_state) are left out unless --internal
is given.`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return g.withAdmin(cmd, func(ctx context.Context, adm *kadm.Client) error {
				var (
					details kadm.TopicDetails
					err     error
				)
				if internal {
					details, err = adm.ListTopicsWithInternal(ctx)
				} else {
					details, err = adm.ListTopics(ctx)
				}
				if err != nil {
					return kafkaErr("list topics", err)
				}
				out := []listedTopicJSON{}
				t := newTable("TOPIC", "PARTITIONS", "REPLICAS")
				for _, name := range details.Names() {
					d := details[name]
					j := listedTopicJSON{Topic: name, Partitions: len(d.Partitions), ReplicationFactor: replicationFactor(d), Internal: d.IsInternal}
					out = append(out, j)
					t.add(j.Topic, j.Partitions, countCell(int64(j.ReplicationFactor)))
				}
				return g.render(cmd.OutOrStdout(), out, t)
			})
		},
	}
	c.Flags().BoolVar(&internal, "internal", false, "include Kafka's internal topics")
	return c
}
