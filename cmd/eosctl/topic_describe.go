package main

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// partitionDetailJSON is one partition in `topic describe`.
type partitionDetailJSON struct {
	Partition       int32   `json:"partition"`
	Leader          int32   `json:"leader"` // -1 when the partition has none
	LeaderEpoch     int32   `json:"leader_epoch"`
	Replicas        []int32 `json:"replicas"`
	ISR             []int32 `json:"isr"`
	OfflineReplicas []int32 `json:"offline_replicas,omitempty"`
	Error           string  `json:"error,omitempty"`
}

// topicConfigJSON is one config of `topic describe` that is not at
// Kafka's default.
type topicConfigJSON struct {
	Name      string `json:"name"`
	Value     string `json:"value"` // empty when sensitive
	Source    string `json:"source"`
	Sensitive bool   `json:"sensitive,omitempty"`
}

// describedTopicJSON is one topic of `topic describe`.
type describedTopicJSON struct {
	Topic             string                `json:"topic"`
	ID                string                `json:"id,omitempty"` // Kafka's spelling: URL-safe base64, no padding
	Internal          bool                  `json:"internal,omitempty"`
	ReplicationFactor int                   `json:"replication_factor"`
	Partitions        []partitionDetailJSON `json:"partitions"`
	Configs           []topicConfigJSON     `json:"configs"`
}

// newTopicDescribeCmd shows where a topic's partitions live and how it
// differs from the defaults, to check its durability and retention.
func newTopicDescribeCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "describe NAME...",
		Short: "Show topics' partitions (leader, replicas, ISR) and non-default configs",
		Long: `Show, for each topic, its partitions with their leader, replicas and in-sync
replicas (ISR), then the configs not at Kafka's default with where each is
set (DYNAMIC_TOPIC_CONFIG for the topic's own, broker sources otherwise).

A partition with no leader cannot be read or written; one whose ISR is
smaller than its replicas is under-replicated, and with acks=all (which
transactions use) stops taking writes once the ISR falls below
min.insync.replicas.

Topics that exist are shown; exits 1 naming any that do not.`,
		Example: "  eosctl topic describe orders invoices\n  eosctl topic describe orders -o json",
		Args:    usageArgs(cobra.MinimumNArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			names, err := topicNames(args)
			if err != nil {
				return err
			}
			return g.withAdmin(cmd, func(ctx context.Context, adm *kadm.Client) error {
				details, err := adm.ListTopics(ctx, names...)
				if err != nil {
					return kafkaErr("describe topic(s) "+quoteAll(names), err)
				}
				var found, missing []string
				var errs []error
				for _, n := range names {
					d, ok := details[n]
					switch {
					case !ok || errors.Is(d.Err, kerr.UnknownTopicOrPartition):
						missing = append(missing, n)
					case d.Err != nil:
						errs = append(errs, kafkaErr(fmt.Sprintf("describe topic %q", n), d.Err))
					default:
						found = append(found, n)
					}
				}
				configs, err := topicConfigsOf(ctx, adm, found)
				if err != nil {
					return err
				}
				out := []describedTopicJSON{}
				parts := newTable("TOPIC", "PARTITION", "LEADER", "REPLICAS", "ISR", "NOTE")
				cfgs := newTable("TOPIC", "CONFIG", "VALUE", "SOURCE")
				for _, n := range found {
					j := describedJSONOf(details[n], configs[n])
					out = append(out, j)
					for _, p := range j.Partitions {
						parts.add(n, p.Partition, leaderCell(p.Leader), int32sCell(p.Replicas), int32sCell(p.ISR), partitionNote(p))
					}
					for _, c := range j.Configs {
						v := c.Value
						if c.Sensitive {
							v = "(sensitive)"
						}
						cfgs.add(n, c.Name, v, c.Source)
					}
				}
				if err := renderDescribe(g, cmd, out, parts, cfgs); err != nil {
					return err
				}
				if len(missing) > 0 {
					errs = append([]error{errNoSuchTopics(missing)}, errs...)
				}
				return errors.Join(errs...)
			})
		},
	}
}

// renderDescribe prints the JSON, or the partitions table and the configs
// table separated by a blank line.
func renderDescribe(g *globals, cmd *cobra.Command, out []describedTopicJSON, parts, cfgs *table) error {
	w := cmd.OutOrStdout()
	if g.output == outputJSON {
		return g.render(w, out, nil)
	}
	if err := parts.write(w); err != nil {
		return err
	}
	fmt.Fprintln(w)
	return cfgs.write(w)
}

// topicConfigsOf returns, per topic, its configs that are not at Kafka's
// default, sorted by name.
func topicConfigsOf(ctx context.Context, adm *kadm.Client, names []string) (map[string][]topicConfigJSON, error) {
	out := make(map[string][]topicConfigJSON, len(names))
	if len(names) == 0 {
		return out, nil
	}
	rcs, err := adm.DescribeTopicConfigs(ctx, names...)
	if err != nil {
		return nil, kafkaErr("describe configs of topic(s) "+quoteAll(names), err)
	}
	for _, rc := range rcs {
		if rc.Err != nil {
			return nil, kafkaErr(fmt.Sprintf("describe configs of topic %q", rc.Name), fmt.Errorf("%w%s", rc.Err, brokerMessage(rc.ErrMessage)))
		}
		list := []topicConfigJSON{}
		for _, c := range rc.Configs {
			if c.Source == kmsg.ConfigSourceDefaultConfig {
				continue
			}
			j := topicConfigJSON{Name: c.Key, Source: c.Source.String(), Sensitive: c.Sensitive}
			if c.Value != nil && !c.Sensitive {
				j.Value = *c.Value
			}
			list = append(list, j)
		}
		slices.SortFunc(list, func(a, b topicConfigJSON) int { return strings.Compare(a.Name, b.Name) })
		out[rc.Name] = list
	}
	return out, nil
}

// describedJSONOf builds one topic's description from its metadata and its
// non-default configs.
func describedJSONOf(d kadm.TopicDetail, configs []topicConfigJSON) describedTopicJSON {
	j := describedTopicJSON{
		Topic:             d.Topic,
		Internal:          d.IsInternal,
		ReplicationFactor: replicationFactor(d),
		Partitions:        []partitionDetailJSON{},
		Configs:           configs,
	}
	if d.ID != (kadm.TopicID{}) {
		// As Kafka prints topic ids, so they can be compared with its tools and logs.
		j.ID = base64.RawURLEncoding.EncodeToString(d.ID[:])
	}
	if j.Configs == nil {
		j.Configs = []topicConfigJSON{}
	}
	for _, p := range d.Partitions.Sorted() {
		pj := partitionDetailJSON{
			Partition: p.Partition, Leader: p.Leader, LeaderEpoch: p.LeaderEpoch,
			Replicas: orEmpty(p.Replicas), ISR: orEmpty(p.ISR), OfflineReplicas: p.OfflineReplicas,
		}
		if p.Err != nil {
			pj.Error = p.Err.Error()
		}
		j.Partitions = append(j.Partitions, pj)
	}
	return j
}

// orEmpty keeps JSON arrays as [] rather than null.
func orEmpty(ids []int32) []int32 {
	if ids == nil {
		return []int32{}
	}
	return ids
}

// leaderCell prints a partition's leader, or "none".
func leaderCell(id int32) string {
	if id < 0 {
		return "none"
	}
	return fmt.Sprint(id)
}

// partitionNote says what is wrong with a partition, or "" when nothing
// is.
func partitionNote(p partitionDetailJSON) string {
	var notes []string
	if p.Leader < 0 {
		notes = append(notes, "no leader: cannot be read or written")
	}
	if len(p.ISR) < len(p.Replicas) {
		notes = append(notes, fmt.Sprintf("under-replicated: %d of %d replicas in sync", len(p.ISR), len(p.Replicas)))
	}
	if len(p.OfflineReplicas) > 0 {
		notes = append(notes, "offline replicas "+int32sCell(p.OfflineReplicas))
	}
	if p.Error != "" {
		notes = append(notes, p.Error)
	}
	return strings.Join(notes, "; ")
}

// int32sCell prints broker ids as 1,2,3, or "-" for none.
func int32sCell(ids []int32) string {
	if len(ids) == 0 {
		return "-"
	}
	s := make([]string, len(ids))
	for i, id := range ids {
		s[i] = fmt.Sprint(id)
	}
	return strings.Join(s, ",")
}
