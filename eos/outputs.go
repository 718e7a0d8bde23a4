package eos

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/eosflow/eosflow/processor"
	"github.com/eosflow/eosflow/topology"
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

// outputLimit is the engine's OutputLimits hook: outputs the broker
// would refuse go through their sink's error policy before they are
// produced, instead of aborting the whole batch. A topic chosen per record
// (ToTopicFunc) is looked up the first time it is used: if it does not
// exist, the output is the sink's error naming it, rather than a produce
// that fails until the batch aborts.
func (r *Runner) outputLimit(topic string) (int, bool, error) {
	if l, ok := r.limits[topic]; ok {
		return l.maxBytes, l.compacted, nil
	}
	if r.staticOutputs[topic] || r.admin == nil {
		return 0, false, nil // checked by preflight
	}
	if _, err := r.outputTopic(topic); errors.Is(err, processor.ErrUnknownTopic) {
		return 0, false, err
	}
	return 0, false, nil // other lookup errors: the broker's answer to the produce decides
}

// missingRecheck is how long a topic found missing is taken as missing
// before the broker is asked again (a topic created meanwhile may take as
// long to show in the client's metadata anyway).
const missingRecheck = 5 * time.Second

func (r *Runner) noteMissing(topic string) {
	if r.missing == nil {
		r.missing = make(map[string]time.Time)
	}
	r.missing[topic] = time.Now()
}

func (r *Runner) unknownTopic(topic string) error {
	return fmt.Errorf("%w: %q; create it with `eosctl topic create %s`, or return an existing topic from the ToTopicFunc function",
		processor.ErrUnknownTopic, topic, topic)
}

// loadLimits reads max.message.bytes and cleanup.policy of the output
// topics. Without DescribeConfigs permission the check is skipped and the
// broker's answer, attributed to its input record, is the backstop.
func (r *Runner) loadLimits(ctx context.Context, adm *kadm.Client, topics []string) {
	configs, err := adm.DescribeTopicConfigs(ctx, topics...)
	if err != nil {
		r.log.Info("output topic limits unknown; oversized outputs are caught when the broker refuses them", zap.Error(err))
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
	r.limits = limits
	// The client's own size check must not refuse what the topic accepts.
	r.maxRecordBytes = func(topic string) int32 {
		if l, ok := limits[topic]; ok && l.maxBytes >= 512 {
			return int32(min(l.maxBytes, 1<<30))
		}
		return 1000012 // franz-go's default ProducerBatchMaxBytes
	}
}

// rejection is an output the broker refused for the record itself, kept
// against the input record that produced it.
type rejection struct {
	sink string
	err  error
}

// outputSource tags an output with its input record and sink node while
// the runtime is finding which input made an output the broker refused.
type outputSource struct {
	context.Context
	in   *kgo.Record
	sink string
}

// outputSourceKey finds an outputSource inside a context derived from it:
// tracing hooks wrap the record's context in their span's.
type outputSourceKey struct{}

// Value answers outputSourceKey with the outputSource itself.
func (o *outputSource) Value(key any) any {
	if key == (outputSourceKey{}) {
		return o
	}
	return o.Context.Value(key)
}

func isDeadLetter(r *kgo.Record) bool { return header(r, processor.HeaderNode) != "" }

func header(r *kgo.Record, key string) string {
	for _, h := range r.Headers {
		if h.Key == key {
			return string(h.Value)
		}
	}
	return ""
}

// rejectionOf returns the rejection noted for input record rec; with none
// noted (the usual case) it costs nothing per record.
func (r *Runner) rejectionOf(rec *kgo.Record) (rejection, bool) {
	if len(r.rejected) == 0 {
		return rejection{}, false
	}
	rej, ok := r.rejected[recordKey(rec)]
	return rej, ok
}

func recordKey(r *kgo.Record) string {
	return r.Topic + "/" + strconv.Itoa(int(r.Partition)) + "@" + strconv.FormatInt(r.Offset, 10)
}

// isRecordRejected reports produce errors about the record itself, which
// no retry or new client can fix.
func isRecordRejected(err error) bool {
	return errors.Is(err, kerr.MessageTooLarge) || errors.Is(err, kerr.RecordListTooLarge) ||
		errors.Is(err, kerr.InvalidRecord) || errors.Is(err, kerr.CorruptMessage) ||
		errors.Is(err, kerr.InvalidTimestamp)
}

// noteRejection looks at an output the broker refused in the last batch.
// If it carries its input record, the next run of that record goes
// through its sink's error policy (DeadLetter, Skip, or Fail naming the
// record); if not, the redo tags every output so the next refusal does.
func (r *Runner) noteRejection(s session) {
	rec, err := s.rejected()
	if rec == nil {
		return
	}
	r.rejectionSeen = true
	if isDeadLetter(rec) {
		// A dead letter is the input record itself; refused, it has no
		// policy left to go through.
		r.deadLetterRefused = fmt.Errorf("eos: the dead letter of %s/%s@%s to %s was refused by the broker: %w; raise the dead-letter topic's max.message.bytes to at least the input topic's",
			header(rec, processor.HeaderSourceTopic), header(rec, processor.HeaderSourcePartition), header(rec, processor.HeaderSourceOffset), rec.Topic, err)
		return
	}
	if r.mirror != nil && rec.Topic == r.mirror.topic {
		r.deadLetterRefused = fmt.Errorf("eos: a record of the offsets mirror %s was refused by the broker: %w; check the topic with `eosctl topic describe %s`",
			rec.Topic, err, rec.Topic)
		return
	}
	if r.isChangelog(rec.Topic) {
		// State, not an output: no policy can drop it.
		r.deadLetterRefused = fmt.Errorf("eos: a changelog record of %s (key %q, %d bytes) was refused by the broker: %w; raise the changelog's max.message.bytes, or keep smaller values in the store",
			rec.Topic, rec.Key, len(rec.Key)+len(rec.Value), err)
		return
	}
	var src *outputSource
	if rec.Context != nil {
		src, _ = rec.Context.Value(outputSourceKey{}).(*outputSource)
	}
	if src == nil || src.in == nil {
		r.attribute = true
		r.log.Warn("the broker refused an output; redoing the batch to find its input record",
			zap.String("output_topic", rec.Topic), zap.Int("value_bytes", len(rec.Value)), zap.Error(err))
		return
	}
	if r.rejected == nil {
		r.rejected = make(map[string]rejection)
	}
	detail := fmt.Errorf("output to %s (%d bytes) refused by the broker: %w", rec.Topic, len(rec.Key)+len(rec.Value), err)
	if buf := r.cfg.Memory().ProducerBufferedBytes; errors.Is(err, kerr.MessageTooLarge) && recordBytes(rec) > int64(buf) {
		detail = fmt.Errorf("output to %s (%d bytes) refused by the producer: %w; it is larger than the producer buffer max_memory gives a worker (%d bytes, an eighth of its share): raise max_memory or make the record smaller",
			rec.Topic, recordBytes(rec), err, buf)
	} else if l, ok := r.limits[rec.Topic]; ok && errors.Is(err, kerr.MessageTooLarge) {
		detail = fmt.Errorf("%w; the topic's max.message.bytes is %d: raise it or make the record smaller", detail, l.maxBytes)
	}
	r.rejected[recordKey(src.in)] = rejection{sink: src.sink, err: detail}
	r.log.Warn("the broker refused an output; its input record goes through the sink's error policy",
		zap.String("input", recordKey(src.in)), zap.String("sink", src.sink), zap.Error(detail))
}

// isChangelog reports whether topic is one of the topology's changelogs.
func (r *Runner) isChangelog(topic string) bool {
	if r.state == nil {
		return false
	}
	for _, s := range r.state.specs {
		if topology.ChangelogTopic(r.cfg.AppID, s.Name) == topic {
			return true
		}
	}
	return false
}
