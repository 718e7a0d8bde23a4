package eos

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/eosflow/eosflow/internal/graph"
	"github.com/eosflow/eosflow/internal/runcfg"

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

// outputSource tags an output with its input record and sink node, and
// the expired entry whose emission made it, if one did, while the runtime
// is finding which input made an output the broker refused.
type outputSource struct {
	context.Context
	in   *kgo.Record
	sink string
	exp  *graph.Expiry
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

// rejections tracks the outputs the broker refused for the records
// themselves (too large, invalid), so that the redo of their batch sends
// each one's input record through its sink's error policy instead of
// failing the batch again. It belongs to the batch loop.
type rejections struct {
	log *zap.Logger
	// internal names the topics whose records no policy may drop: the
	// changelogs and the offsets mirror; a refusal there stops Run.
	internal map[string]string
	// producerBuf is the producer buffer a worker has, which a record
	// larger than it exceeds whatever the topic accepts.
	producerBuf int64
	outputs     *outputTopics
	byInput     map[string]rejection // input records whose outputs the broker refused
	// refuseExpiry hands the engine an expired entry an output of which
	// the broker refused: the entry is at fault, not the record that
	// expired it, and the redo settles it by the sink's policy.
	refuseExpiry func(x *graph.Expiry, sink string, err error)
	attribute    bool  // tag outputs with their input record (after a rejected output)
	seen         bool  // an output was rejected since the last commit
	refused      error // a dead letter or internal record the broker refused: Run stops
}

// newRejections is the rejections of r's outputs.
func newRejections(r *Runner) rejections {
	internal := map[string]string{}
	if r.contract.atomic {
		internal[topology.OffsetsTopic(r.cfg.AppID)] = "mirror"
	}
	if r.state != nil {
		for _, s := range r.state.specs {
			internal[topology.ChangelogTopic(r.cfg.AppID, s.Name)] = "changelog"
		}
	}
	return rejections{log: r.log, internal: internal, producerBuf: int64(runcfg.MemoryOf(r.cfg).ProducerBufferedBytes), outputs: r.outputs,
		refuseExpiry: r.proc.RefuseExpiry}
}

// of returns the rejection noted for input record rec; with none noted
// (the usual case) it costs nothing per record.
func (rj *rejections) of(rec *kgo.Record) (rejection, bool) {
	if len(rj.byInput) == 0 {
		return rejection{}, false
	}
	rej, ok := rj.byInput[recordKey(rec)]
	return rej, ok
}

// committed ends the tagging of outputs once a batch commits without a
// refusal: the records it was finding have gone through their policies.
func (rj *rejections) committed() {
	if rj.attribute && !rj.seen {
		rj.attribute = false
	}
	rj.seen = false
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

// note looks at an output the broker refused in the last batch.
// If it carries its input record, the next run of that record goes
// through its sink's error policy (DeadLetter, Skip, or Fail naming the
// record); if not, the redo tags every output so the next refusal does.
func (rj *rejections) note(s session) {
	rec, err := s.rejected()
	if rec == nil {
		return
	}
	rj.seen = true
	if isDeadLetter(rec) {
		// A dead letter is the input record itself; refused, it has no
		// policy left to go through.
		topic, part, off := processor.HeaderSourceTopic, processor.HeaderSourcePartition, processor.HeaderSourceOffset
		if header(rec, processor.HeaderExpiryNode) != "" {
			topic, part, off = processor.HeaderExpirySourceTopic, processor.HeaderExpirySourcePartition, processor.HeaderExpirySourceOffset
		}
		rj.refused = fmt.Errorf("eos: the dead letter of %s/%s@%s to %s was refused by the broker: %w; raise the dead-letter topic's max.message.bytes to at least the input topic's",
			header(rec, topic), header(rec, part), header(rec, off), rec.Topic, err)
		return
	}
	if rj.internal[rec.Topic] == "mirror" {
		rj.refused = fmt.Errorf("eos: a record of the offsets mirror %s was refused by the broker: %w; check the topic with `eosctl topic describe %s`",
			rec.Topic, err, rec.Topic)
		return
	}
	if rj.internal[rec.Topic] == "changelog" {
		// State, not an output: no policy can drop it.
		rj.refused = fmt.Errorf("eos: a changelog record of %s (key %q, %d bytes) was refused by the broker: %w; raise the changelog's max.message.bytes, or keep smaller values in the store",
			rec.Topic, rec.Key, len(rec.Key)+len(rec.Value), err)
		return
	}
	var src *outputSource
	if rec.Context != nil {
		src, _ = rec.Context.Value(outputSourceKey{}).(*outputSource)
	}
	if src == nil || src.in == nil {
		rj.attribute = true
		rj.log.Warn("the broker refused an output; redoing the batch to find its input record",
			zap.String("output_topic", rec.Topic), zap.Int("value_bytes", len(rec.Value)), zap.Error(err))
		return
	}
	detail := rj.detail(rec, err)
	if src.exp != nil {
		rj.refuseExpiry(src.exp, src.sink, detail)
		rj.log.Warn("the broker refused an output of an expired entry; the entry goes through the sink's error policy",
			zap.String("expired", src.exp.What), zap.ByteString("key", src.exp.Key), zap.Time("timestamp", src.exp.Timestamp),
			zap.String("expired_by", recordKey(src.in)), zap.String("sink", src.sink), zap.Error(detail))
		return
	}
	if rj.byInput == nil {
		rj.byInput = make(map[string]rejection)
	}
	rj.byInput[recordKey(src.in)] = rejection{sink: src.sink, err: detail}
	rj.log.Warn("the broker refused an output; its input record goes through the sink's error policy",
		zap.String("input", recordKey(src.in)), zap.String("sink", src.sink), zap.Error(detail))
}

// detail says why the broker (or the producer) refused output rec with
// err, and what to change.
func (rj *rejections) detail(rec *kgo.Record, err error) error {
	detail := fmt.Errorf("output to %s (%d bytes) refused by the broker: %w", rec.Topic, len(rec.Key)+len(rec.Value), err)
	if buf := rj.producerBuf; errors.Is(err, kerr.MessageTooLarge) && recordBytes(rec) > buf {
		detail = fmt.Errorf("output to %s (%d bytes) refused by the producer: %w; it is larger than the producer buffer max_memory gives a worker (%d bytes, an eighth of its share): raise max_memory or make the record smaller",
			rec.Topic, recordBytes(rec), err, buf)
	} else if l, ok := rj.outputs.limits[rec.Topic]; ok && errors.Is(err, kerr.MessageTooLarge) {
		detail = fmt.Errorf("%w; the topic's max.message.bytes is %d: raise it or make the record smaller", detail, l.maxBytes)
	}
	return detail
}
