package eos

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/eosflow/eosflow/internal/kafkautil"
	"github.com/eosflow/eosflow/topology"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"go.uber.org/zap"
)

// ensureTopics makes sure every store's changelog exists, compacted, with
// as many partitions as the store's source topic; partitions gives the
// source topics' partition counts.
func (cr *changelogReader) ensureTopics(ctx context.Context, adm *kadm.Client, partitions map[string]int32) error {
	if cr.stores == nil {
		return nil
	}
	want := map[string]int32{}
	var names []string
	for _, s := range cr.stores.specs {
		topic := topology.ChangelogTopic(cr.cfg.AppID, s.Name)
		if partitions[s.Source] <= 0 {
			return fmt.Errorf("eos: the partition count of %s, the input of store %q, is unknown, so its changelog %s cannot be made to match; create %s first (`eosctl topic create %s --partitions N`)",
				s.Source, s.Name, topic, s.Source, s.Source)
		}
		want[topic] = partitions[s.Source]
		names = append(names, topic)
	}
	sort.Strings(names)
	details, err := adm.ListTopics(ctx, names...)
	if err != nil {
		return unreachable(fmt.Errorf("eos: listing changelog topics: %w", err))
	}
	compact := "compact"
	for _, topic := range names {
		d, ok := details[topic]
		switch {
		case !ok || errors.Is(d.Err, kerr.UnknownTopicOrPartition):
			if err := kafkautil.RequestTopics(ctx, adm, want[topic], -1, map[string]*string{"cleanup.policy": &compact}, topic); err != nil {
				if isFatal(err) {
					return cr.authz.errOp(fmt.Errorf("creating changelog %s: %w", topic, err), "Create", topic)
				}
				return unreachable(fmt.Errorf("eos: creating changelog %s: %w; create it with `eosctl topic create %s --partitions %d --topic-config cleanup.policy=compact`", topic, err, topic, want[topic]))
			}
			cr.log.Info("created changelog topic", zap.String("topic", topic), zap.Int32("partitions", want[topic]))
		case isFatal(d.Err):
			return cr.authz.errOp(fmt.Errorf("changelog %s: %w", topic, d.Err), "Write", topic)
		case d.Err != nil:
			return fmt.Errorf("eos: changelog %s: %w", topic, d.Err)
		case int32(len(d.Partitions)) != want[topic]:
			return fmt.Errorf("eos: changelog %s has %d partitions, but its store's input has %d: a task's state lives in the changelog partition of the same number; recreate it (`eosctl topic delete %s`, then restart)",
				topic, len(d.Partitions), want[topic], topic)
		default:
			if err := cr.checkCompacted(ctx, adm, topic); err != nil {
				return err
			}
		}
	}
	return nil
}

// checkCompacted refuses an existing changelog whose records expire: the
// state would expire with them.
func (cr *changelogReader) checkCompacted(ctx context.Context, adm *kadm.Client, topic string) error {
	configs, err := adm.DescribeTopicConfigs(ctx, topic)
	if err != nil {
		cr.log.Info("changelog cleanup.policy unknown", zap.String("topic", topic), zap.Error(err))
		return nil
	}
	rc, err := configs.On(topic, nil)
	if err != nil || rc.Err != nil {
		return nil
	}
	for _, c := range rc.Configs {
		if c.Key == "delete.retention.ms" && c.Value != nil {
			if ms, err := strconv.ParseInt(*c.Value, 10, 64); err == nil && ms >= 0 {
				cr.deleteRetention[topic] = time.Duration(ms) * time.Millisecond
			}
		}
		if c.Key == "cleanup.policy" && c.Value != nil && !strings.Contains(*c.Value, "compact") {
			return fmt.Errorf("eos: changelog %s has cleanup.policy=%s: its records, and the state they hold, would expire; make it compacted (kafka-configs.sh --alter --entity-type topics --entity-name %s --add-config cleanup.policy=compact) or delete it so the runtime makes it",
				topic, *c.Value, topic)
		}
	}
	return nil
}
