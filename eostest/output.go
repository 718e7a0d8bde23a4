package eostest

import (
	"bytes"
	"slices"
	"time"

	"github.com/eosflow/eosflow/codec"
	"github.com/eosflow/eosflow/processor"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Record is a record the topology wrote, as a consumer of its topic
// reads it, its value decoded to V.
type Record[V any] struct {
	Key       []byte // nil: no key
	Value     V      // the zero V for a nil value (a tombstone)
	Headers   []processor.Header
	Timestamp time.Time // whole milliseconds, in UTC
	Topic     string
	Partition int32
	Offset    int64
	// Tombstone reports a nil value: a deleted row (topology.ToTable
	// writes one for each row a table deletes), which a zero Value alone
	// cannot tell from a row whose value decodes to zero.
	Tombstone bool
}

// OutputTopic reads the records the topology wrote to one topic, their
// values decoded to V. Records are read in the order they were written,
// across partitions; each partition's offsets increase.
type OutputTopic[V any] struct {
	d *Driver
	t *topic
	c codec.Codec[V]
}

// Output returns a typed reader of topic, decoding values with c (the
// codec of the topology's sink, usually). The topic must be one the
// driver knows: one the topology writes or reads, or one declared with
// Topics or Partitions.
func Output[V any](d *Driver, topic string, c codec.Codec[V]) *OutputTopic[V] {
	d.helper()
	t := d.topics[topic]
	if t == nil {
		d.failf("no topic %q; the driver knows %v", topic, mapKeys(d.topics))
	}
	if c == nil {
		d.failf("Output of topic %q with a nil codec", topic)
	}
	return &OutputTopic[V]{d: d, t: t, c: c}
}

// Records returns the records written to the topic and not yet read by
// ReadAll, leaving them unread.
func (o *OutputTopic[V]) Records() []Record[V] {
	o.d.helper()
	return o.decode(o.t.unread)
}

// ReadAll returns the records written to the topic and not yet read, and
// marks them read: the next call returns only later ones. Readers of one
// topic share what has been read.
func (o *OutputTopic[V]) ReadAll() []Record[V] {
	o.d.helper()
	out := o.decode(o.t.unread)
	o.t.unread = nil
	return out
}

func (o *OutputTopic[V]) decode(rs []*kgo.Record) []Record[V] {
	out := make([]Record[V], len(rs))
	for i, r := range rs {
		out[i] = Record[V]{Key: bytes.Clone(r.Key), Headers: slices.Clone(r.Headers), Timestamp: r.Timestamp,
			Topic: r.Topic, Partition: r.Partition, Offset: r.Offset}
		if r.Value == nil {
			out[i].Tombstone = true
			continue
		}
		v, err := o.c.Decode(bytes.Clone(r.Value))
		if err != nil {
			o.d.failf("decoding the value of %s/%d@%d: %v", r.Topic, r.Partition, r.Offset, err)
		}
		out[i].Value = v
	}
	return out
}

// DeadLetter is a record of a dead-letter topic: the failed input
// record's key, value and headers (the dead-letter headers included), and
// what those headers say: the node that failed, the error, and where the
// record was read (Topic, Partition, Offset and Timestamp name the
// source record, not the dead letter).
type DeadLetter struct {
	Key     []byte
	Value   []byte
	Headers []processor.Header
	processor.DeadLetter
}

// DeadLetters returns the records written to the dead-letter topic and
// not yet read (see OutputTopic.ReadAll), leaving them unread. Every one
// must be a dead letter.
func (d *Driver) DeadLetters(topic string) []DeadLetter {
	d.helper()
	rs := Output(d, topic, codec.Bytes()).Records()
	out := make([]DeadLetter, len(rs))
	for i, r := range rs {
		dl, ok := processor.ParseDeadLetter(r.Headers)
		if !ok {
			d.failf("%s/%d@%d is not a dead letter: it has no %s or %s header", r.Topic, r.Partition, r.Offset, processor.HeaderSourceTopic, processor.HeaderExpiryNode)
		}
		out[i] = DeadLetter{Key: r.Key, Value: r.Value, Headers: r.Headers, DeadLetter: dl}
	}
	return out
}
