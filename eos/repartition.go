package eos

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/eosflow/eosflow/internal/kafkautil"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"go.uber.org/zap"
)

// repartitionConfigs are those Kafka Streams gives repartition topics:
// records never expire by age (a pipeline stopped for a week must not lose
// what it had not read yet); the runtime deletes them once the group has
// committed past them, so segments are kept small enough to go soon.
func repartitionConfigs() map[string]*string {
	s := func(v string) *string { return &v }
	return map[string]*string{"cleanup.policy": s("delete"), "retention.ms": s("-1"), "segment.bytes": s("52428800")}
}

// repartitions makes sure every repartition topic exists: a missing one is
// created with the count its spec asks, else as many partitions as the
// largest of its upstream inputs. partitions holds the partition counts of
// the input topics and gets those of the repartition topics, in topology
// order, so one repartition topic can be sized after another upstream.
func (pc *preflightCheck) repartitions(ctx context.Context, adm *kadm.Client, partitions map[string]int32) error {
	specs := pc.proc.Repartitions()
	if len(specs) == 0 {
		return nil
	}
	names := make([]string, len(specs))
	for i, s := range specs {
		names[i] = s.Topic
	}
	details, err := adm.ListTopics(ctx, names...)
	if err != nil {
		return unreachable(fmt.Errorf("eos: listing repartition topics: %w", err))
	}
	for _, s := range specs {
		d, ok := details[s.Topic]
		switch {
		case !ok || errors.Is(d.Err, kerr.UnknownTopicOrPartition):
			want := s.Partitions
			if want == 0 {
				// Co-partitioned with other inputs (a join): as many
				// as they have; otherwise as the largest upstream.
				want = pc.groupPartitions(s.Topic, partitions)
			}
			if want == 0 {
				for _, f := range s.From {
					want = max(want, partitions[f])
				}
			}
			if want <= 0 {
				return fmt.Errorf("eos: the partition count of %v, upstream of repartition topic %s, is unknown; create %s with `eosctl topic create %s --partitions N %s`, or set topology.RepartitionPartitions",
					s.From, s.Topic, s.Topic, s.Topic, repartitionFlags)
			}
			if err := kafkautil.RequestTopics(ctx, adm, want, -1, repartitionConfigs(), s.Topic); err != nil {
				if isFatal(err) {
					return pc.authz.errOp(fmt.Errorf("creating repartition topic %s: %w", s.Topic, err), "Create", s.Topic)
				}
				return unreachable(fmt.Errorf("eos: creating repartition topic %s: %w; create it with `eosctl topic create %s --partitions %d %s`", s.Topic, err, s.Topic, want, repartitionFlags))
			}
			pc.log.Info("created repartition topic", zap.String("topic", s.Topic), zap.Int32("partitions", want))
			partitions[s.Topic] = want
		case d.Err != nil:
			return fmt.Errorf("eos: repartition topic %s: %w", s.Topic, d.Err)
		default:
			have := int32(len(d.Partitions))
			if s.Partitions > 0 && s.Partitions != have {
				pc.log.Warn("repartition topic keeps the partition count it has", zap.String("topic", s.Topic),
					zap.Int32("partitions", have), zap.Int32("asked", s.Partitions))
			}
			if err := pc.checkRepartitionConfigs(ctx, adm, s.Topic); err != nil {
				return err
			}
			partitions[s.Topic] = have
		}
	}
	return nil
}

// repartitionFlags are the eosctl topic create flags that give a
// repartition topic the configs the runtime would.
const repartitionFlags = "--topic-config cleanup.policy=delete --topic-config retention.ms=-1"

// checkRepartitionConfigs refuses a repartition topic that would lose
// records not yet aggregated: to compaction, or to time or size retention
// while the aggregating sub-topology lags (records keep their input's
// timestamps, so replayed old input expires at once). The runtime deletes
// what the group consumed instead.
func (pc *preflightCheck) checkRepartitionConfigs(ctx context.Context, adm *kadm.Client, topic string) error {
	configs, err := adm.DescribeTopicConfigs(ctx, topic)
	if err != nil {
		pc.log.Info("repartition topic configs unknown", zap.String("topic", topic), zap.Error(err))
		return nil
	}
	rc, err := configs.On(topic, nil)
	if err != nil || rc.Err != nil {
		return nil
	}
	// Compaction first: it is the worse, and removing retention would
	// not cure it.
	values := map[string]string{}
	for _, c := range rc.Configs {
		if c.Value != nil {
			values[c.Key] = *c.Value
		}
	}
	for _, check := range []struct {
		key  string
		bad  func(v string) bool
		want string
	}{
		{"cleanup.policy", func(v string) bool { return strings.Contains(v, "compact") }, "cleanup.policy=delete"},
		{"retention.ms", func(v string) bool { return pc.purgeEvery >= 0 && v != "-1" }, "retention.ms=-1"},
		{"retention.bytes", func(v string) bool { return pc.purgeEvery >= 0 && v != "-1" }, "retention.bytes=-1"},
	} {
		if v, ok := values[check.key]; ok && check.bad(v) {
			return fmt.Errorf("eos: repartition topic %s has %s=%s, which can delete records not yet aggregated; "+
				"set %s (kafka-configs.sh --alter --entity-type topics --entity-name %s --add-config %s) or delete the topic so the runtime makes it: "+
				"the runtime deletes what the group has consumed",
				topic, check.key, v, check.want, topic, check.want)
		}
	}
	return nil
}

// groupPartitions is the partition count of the first other topic of
// topic's co-partitioned group that partitions knows, or 0.
func (pc *preflightCheck) groupPartitions(topic string, partitions map[string]int32) int32 {
	for _, g := range pc.proc.CoPartitioned() {
		if !slices.Contains(g, topic) {
			continue
		}
		for _, other := range g {
			if n := partitions[other]; other != topic && n > 0 {
				return n
			}
		}
	}
	return 0
}

// checkCoPartitioned refuses co-partitioned topics whose partition counts
// differ: partition p of each would hold different keys, and a join would
// miss its matches.
func (pc *preflightCheck) checkCoPartitioned(partitions map[string]int32) error {
	for _, g := range pc.proc.CoPartitioned() {
		counts := make([]string, len(g))
		differ := false
		for i, topic := range g {
			counts[i] = fmt.Sprintf("%s: %d", topic, partitions[topic])
			differ = differ || partitions[topic] != partitions[g[0]]
		}
		if differ {
			return fmt.Errorf("eos: topics %v share state (a join, or a store used from each), so they must be co-partitioned: as many partitions, keyed alike; "+
				"they have %s. Give them the same partition count (`eosctl topic create` for a new one; a re-keyed stream can go Through a repartition topic "+
				"with topology.RepartitionPartitions)", g, strings.Join(counts, ", "))
		}
	}
	return nil
}
