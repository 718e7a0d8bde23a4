package eos

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/eosflow/eosflow/processor"
	"github.com/eosflow/eosflow/topology"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"
)

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
	} else if l, ok := r.outputs.limits[rec.Topic]; ok && errors.Is(err, kerr.MessageTooLarge) {
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
