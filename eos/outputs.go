package eos

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/eosflow/eosflow/config"
	"github.com/eosflow/eosflow/processor"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"
)

// topicLimits is what the brokers accept on an output topic.
type topicLimits struct {
	maxBytes  int  // max.message.bytes
	compacted bool // cleanup.policy includes compact: records need keys
}

// outputTopics knows what the brokers accept on the output topics: their
// limits, read by preflight, and, for topics chosen per record, whether
// they exist and how many partitions they have, asked once each. The
// engine consults it before producing, so an output the broker would
// refuse goes through its sink's error policy instead of aborting the
// whole batch. Only the batch loop uses it.
type outputTopics struct {
	cfg    config.Config
	log    *zap.Logger
	admin  func() *kgo.Client     // preflight's client, once made
	static map[string]bool        // output topics known before running, checked by preflight
	limits map[string]topicLimits // output topics' limits, when known
	// maxRecordBytes is the output topics' max.message.bytes, when known,
	// for the producer's own size check.
	maxRecordBytes  func(topic string) int32
	partitionCounts map[string]int32     // output topics' partition counts, when asked
	missing         map[string]time.Time // topics chosen per record found missing, and when
}

// limit is the engine's OutputLimits hook: outputs the broker
// would refuse go through their sink's error policy before they are
// produced, instead of aborting the whole batch. A topic chosen per record
// (ToTopicFunc) is looked up the first time it is used: if it does not
// exist, the output is the sink's error naming it, rather than a produce
// that fails until the batch aborts.
func (o *outputTopics) limit(topic string) (int, bool, error) {
	if l, ok := o.limits[topic]; ok {
		return l.maxBytes, l.compacted, nil
	}
	if o.static[topic] || o.admin() == nil {
		return 0, false, nil // checked by preflight
	}
	if _, err := o.lookup(topic); errors.Is(err, processor.ErrUnknownTopic) {
		return 0, false, err
	}
	return 0, false, nil // other lookup errors: the broker's answer to the produce decides
}

// missingRecheck is how long a topic found missing is taken as missing
// before the broker is asked again (a topic created meanwhile may take as
// long to show in the client's metadata anyway).
const missingRecheck = 5 * time.Second

func (o *outputTopics) noteMissing(topic string) {
	if o.missing == nil {
		o.missing = make(map[string]time.Time)
	}
	o.missing[topic] = time.Now()
}

func unknownTopic(topic string) error {
	return fmt.Errorf("%w: %q; create it with `eosctl topic create %s`, or return an existing topic from the ToTopicFunc function",
		processor.ErrUnknownTopic, topic, topic)
}

// loadLimits reads max.message.bytes and cleanup.policy of the output
// topics. Without DescribeConfigs permission the check is skipped and the
// broker's answer, attributed to its input record, is the backstop.
func (o *outputTopics) loadLimits(ctx context.Context, adm *kadm.Client, topics []string) {
	configs, err := adm.DescribeTopicConfigs(ctx, topics...)
	if err != nil {
		o.log.Info("output topic limits unknown; oversized outputs are caught when the broker refuses them", zap.Error(err))
		return
	}
	limits := make(map[string]topicLimits, len(topics))
	for _, rc := range configs {
		if rc.Err != nil {
			continue
		}
		var l topicLimits
		for _, c := range rc.Configs {
			switch c.Key {
			case "max.message.bytes":
				if c.Value != nil {
					l.maxBytes, _ = strconv.Atoi(*c.Value)
				}
			case "cleanup.policy":
				l.compacted = c.Value != nil && slices.Contains(strings.Split(strings.ReplaceAll(*c.Value, " ", ""), ","), "compact")
			}
		}
		if l.maxBytes > 0 {
			limits[rc.Name] = l
		}
	}
	o.limits = limits
	// The client's own size check must not refuse what the topic accepts.
	o.maxRecordBytes = func(topic string) int32 {
		if l, ok := limits[topic]; ok && l.maxBytes >= 512 {
			return int32(min(l.maxBytes, 1<<30))
		}
		return 1000012 // franz-go's default ProducerBatchMaxBytes
	}
}

// partitionCount is the partition count of an output topic, for sinks with
// their own partitioner; asked once per topic. A topic that does not
// exist is the sink's error; any other failure to learn the count is the
// client's, and the batch is redone with a new one, as after any client
// error, rather than dropping the record.
func (o *outputTopics) partitionCount(topic string) (int32, error) {
	n, err := o.lookup(topic)
	if err != nil && !errors.Is(err, processor.ErrUnknownTopic) {
		return 0, &rebuildError{err}
	}
	return n, err
}

// lookup looks up an output topic once: its partition count, or that
// it does not exist (asked again after missingRecheck). Both a sink's
// partitioner and the check of topics chosen per record use it, so one
// lookup serves both.
func (o *outputTopics) lookup(topic string) (int32, error) {
	if n, ok := o.partitionCounts[topic]; ok {
		return n, nil
	}
	if seen, ok := o.missing[topic]; ok && time.Since(seen) < missingRecheck {
		return 0, unknownTopic(topic)
	}
	if o.admin() == nil {
		return 0, fmt.Errorf("the partition count of topic %q is unknown: no admin client", topic)
	}
	ctx, cancel := context.WithTimeout(context.Background(), o.cfg.ConnectTimeout)
	defer cancel()
	td, err := kadm.NewClient(o.admin()).ListTopics(ctx, topic)
	if err == nil && !errors.Is(td.Error(), kerr.UnknownTopicOrPartition) {
		err = td.Error()
	}
	if d, ok := td[topic]; err == nil && (!ok || errors.Is(d.Err, kerr.UnknownTopicOrPartition)) {
		o.noteMissing(topic)
		return 0, unknownTopic(topic)
	}
	if err != nil {
		return 0, fmt.Errorf("reading the partition count of topic %q: %w; check it with `eosctl topic describe %s`", topic, err, topic)
	}
	delete(o.missing, topic)
	n := int32(len(td[topic].Partitions))
	if o.partitionCounts == nil {
		o.partitionCounts = make(map[string]int32)
	}
	o.partitionCounts[topic] = n
	return n, nil
}
