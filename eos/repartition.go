package eos

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/eosflow/eosflow/internal/kafkautil"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"
)

// DefaultPurgeInterval is how often, by default, the records of
// repartition topics that the group has committed past are deleted: Kafka
// Streams' default repartition.purge.interval.ms.
const DefaultPurgeInterval = 30 * time.Second

// PurgeInterval sets how often the records of repartition topics that the
// group has committed past are deleted (DeleteRecords), overriding
// DefaultPurgeInterval. Shorter keeps the topics smaller at the cost of
// more requests; a purge runs in the background after a commit.
func PurgeInterval(d time.Duration) Option {
	return optFunc(func(r *Runner) { r.purgeEvery = d })
}

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
func (r *Runner) repartitions(ctx context.Context, adm *kadm.Client, partitions map[string]int32) error {
	specs := r.proc.Repartitions()
	if len(specs) == 0 {
		return nil
	}
	names := make([]string, len(specs))
	for i, s := range specs {
		names[i] = s.Topic
	}
	details, err := adm.ListTopics(ctx, names...)
	if err != nil {
		return fmt.Errorf("eos: listing repartition topics: %w", err)
	}
	for _, s := range specs {
		d, ok := details[s.Topic]
		switch {
		case !ok || errors.Is(d.Err, kerr.UnknownTopicOrPartition):
			want := s.Partitions
			if want == 0 {
				for _, f := range s.From {
					want = max(want, partitions[f])
				}
			}
			if want <= 0 {
				return fmt.Errorf("eos: the partition count of %v, upstream of repartition topic %s, is unknown; create %s with `eosctl topic create %s --partitions N`, or set topology.RepartitionPartitions",
					s.From, s.Topic, s.Topic, s.Topic)
			}
			if err := kafkautil.RequestTopics(ctx, adm, want, -1, repartitionConfigs(), s.Topic); err != nil {
				return fmt.Errorf("eos: creating repartition topic %s: %w; create it with `eosctl topic create %s --partitions %d`", s.Topic, err, s.Topic, want)
			}
			r.log.Info("created repartition topic", zap.String("topic", s.Topic), zap.Int32("partitions", want))
			partitions[s.Topic] = want
		case d.Err != nil:
			return fmt.Errorf("eos: repartition topic %s: %w", s.Topic, d.Err)
		default:
			have := int32(len(d.Partitions))
			if s.Partitions > 0 && s.Partitions != have {
				r.log.Warn("repartition topic keeps the partition count it has", zap.String("topic", s.Topic),
					zap.Int32("partitions", have), zap.Int32("asked", s.Partitions))
			}
			if err := r.checkNotCompacted(ctx, adm, s.Topic); err != nil {
				return err
			}
			partitions[s.Topic] = have
		}
	}
	return nil
}

// checkNotCompacted refuses a repartition topic that compaction would
// thin out: records of a key not yet aggregated would be lost.
func (r *Runner) checkNotCompacted(ctx context.Context, adm *kadm.Client, topic string) error {
	configs, err := adm.DescribeTopicConfigs(ctx, topic)
	if err != nil {
		r.log.Info("repartition topic cleanup.policy unknown", zap.String("topic", topic), zap.Error(err))
		return nil
	}
	rc, err := configs.On(topic, nil)
	if err != nil || rc.Err != nil {
		return nil
	}
	for _, c := range rc.Configs {
		if c.Key == "cleanup.policy" && c.Value != nil && strings.Contains(*c.Value, "compact") {
			return fmt.Errorf("eos: repartition topic %s has cleanup.policy=%s: compaction would drop records not yet aggregated; "+
				"set cleanup.policy=delete (kafka-configs.sh --alter --entity-type topics --entity-name %s --add-config cleanup.policy=delete) or delete it so the runtime makes it",
				topic, *c.Value, topic)
		}
	}
	return nil
}

// notePurge remembers the committed offsets of repartition topics and,
// at most every purge interval, deletes the records before them in the
// background: the group has consumed them exactly once, so nothing reads
// them again. A failed purge is logged and tried at the next interval.
func (r *Runner) notePurge(offsets map[string]map[int32]kgo.EpochOffset) {
	if len(r.repartitioned) == 0 || r.admin == nil {
		return
	}
	for topic, parts := range offsets {
		if !r.repartitioned[topic] {
			continue
		}
		for p, o := range parts {
			r.purgeTo.Add(kadm.Offset{Topic: topic, Partition: p, At: o.Offset, LeaderEpoch: -1})
		}
	}
	if len(r.purgeTo) == 0 || time.Since(r.lastPurge) < r.purgeEvery || !r.purging.CompareAndSwap(false, true) {
		return
	}
	to := r.purgeTo
	r.purgeTo, r.lastPurge = kadm.Offsets{}, time.Now()
	adm := kadm.NewClient(r.admin)
	r.purgeWG.Add(1)
	go func() {
		defer r.purgeWG.Done()
		defer r.purging.Store(false)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		resps, err := adm.DeleteRecords(ctx, to)
		if err == nil {
			resps.Each(func(d kadm.DeleteRecordsResponse) {
				if d.Err != nil && err == nil {
					err = fmt.Errorf("%s/%d: %w", d.Topic, d.Partition, d.Err)
				}
			})
		}
		if err != nil {
			r.log.Info("purging consumed records of repartition topics failed; will try again", zap.Error(err))
			return
		}
		names := to.TopicsSet().Topics()
		slices.Sort(names)
		r.log.Debug("purged consumed records of repartition topics", zap.Strings("topics", names))
	}()
}
