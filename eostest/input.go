package eostest

import (
	"bytes"
	"time"

	"github.com/eosflow/eosflow/codec"
	"github.com/eosflow/eosflow/internal/graph"
	"github.com/eosflow/eosflow/processor"
	"github.com/twmb/franz-go/pkg/kgo"
)

// PipeOption sets something of a piped record other than its key and
// value.
type PipeOption interface{ applyPipe(*kgo.Record) }

type pipeOpt func(*kgo.Record)

func (f pipeOpt) applyPipe(r *kgo.Record) { f(r) }

// Timestamp sets the record's Kafka timestamp, overriding the default:
// the wall clock's time (Driver.Now), as a producer stamps a record. It
// is kept in whole milliseconds, as Kafka keeps it.
func Timestamp(t time.Time) PipeOption { return pipeOpt(func(r *kgo.Record) { r.Timestamp = t }) }

// Header adds a header to the record.
func Header(key string, value []byte) PipeOption {
	return pipeOpt(func(r *kgo.Record) {
		r.Headers = append(r.Headers, processor.Header{Key: key, Value: bytes.Clone(value)})
	})
}

// Headers adds headers to the record, in order.
func Headers(hs ...processor.Header) PipeOption {
	return pipeOpt(func(r *kgo.Record) {
		for _, h := range hs {
			r.Headers = append(r.Headers, processor.Header{Key: h.Key, Value: bytes.Clone(h.Value)})
		}
	})
}

// InPartition puts the record in partition p, overriding the default:
// the partition the runtime's producer would choose, Kafka's murmur2 hash
// of the key, or partition 0 for a record without a key.
func InPartition(p int32) PipeOption { return pipeOpt(func(r *kgo.Record) { r.Partition = p }) }

// Pipe writes a record to topic, which the topology must read, and runs
// it through the topology in a batch of its own (or in the open Batch),
// followed by the records it fed back (see Batch). key and value are the
// record's bytes as they are; a nil key is no key. The error is what
// would stop eos.Runner.Run: the record failed under the Fail policy
// (a *processor.RecordError), or a stream-time timer it fired did (a
// *processor.TimerError); the record's batch then aborted, keeping
// none of its outputs or store writes, and the record is passed over.
// A record that fails under DeadLetter or Skip is no error. A record
// piped to a global table's topic (topology.GlobalTableFrom) sets its
// key's row, or deletes it if value is nil, for the records piped after
// it: the runtime applies such an update between batches.
func (d *Driver) Pipe(topic string, key, value []byte, opts ...PipeOption) error {
	d.usable("Pipe")
	if d.gl.pipe(topic, key, value) {
		return nil // a global table's update, applied as between batches
	}
	r := &kgo.Record{Topic: topic, Partition: graph.AnyPartition, Key: bytes.Clone(key), Value: bytes.Clone(value)}
	return d.pipeRecord(r, opts)
}

// pipeRecord applies opts to r, whose slices the driver owns, places it
// in its topic and pipes it.
func (d *Driver) pipeRecord(r *kgo.Record, opts []PipeOption) error {
	for _, o := range opts {
		if o != nil {
			o.applyPipe(r)
		}
	}
	t := d.topics[r.Topic]
	if t == nil || !d.sources[r.Topic] {
		d.helper()
		d.failf("no source reads topic %q; the topology reads %v", r.Topic, mapKeys(d.sources))
	}
	if r.Partition >= t.partitions || r.Partition < graph.AnyPartition {
		d.helper()
		d.failf("partition %d of topic %q, which has partitions 0 to %d", r.Partition, r.Topic, t.partitions-1)
	}
	d.place(r, t)
	return d.pipe(r)
}

// InputTopic pipes records with values of type V to one topic the
// topology reads.
type InputTopic[V any] struct {
	d     *Driver
	topic string
	c     codec.Codec[V]
}

// Input returns a typed writer of topic, encoding values with c (the
// codec of the topology's source, usually).
func Input[V any](d *Driver, topic string, c codec.Codec[V]) *InputTopic[V] {
	d.helper()
	if !d.sources[topic] {
		d.failf("no source reads topic %q; the topology reads %v", topic, mapKeys(d.sources))
	}
	if c == nil {
		d.failf("Input of topic %q with a nil codec", topic)
	}
	return &InputTopic[V]{d: d, topic: topic, c: c}
}

// Pipe encodes value and pipes it with key, as Driver.Pipe does.
func (in *InputTopic[V]) Pipe(key string, value V, opts ...PipeOption) error {
	return in.pipe([]byte(key), value, opts)
}

// PipeValue pipes value without a key, as Driver.Pipe does.
func (in *InputTopic[V]) PipeValue(value V, opts ...PipeOption) error {
	return in.pipe(nil, value, opts)
}

func (in *InputTopic[V]) pipe(key []byte, value V, opts []PipeOption) error {
	d := in.d
	d.usable("Pipe")
	b, err := in.c.Encode(value)
	if err != nil {
		d.helper()
		d.failf("encoding a value for topic %q: %v", in.topic, err)
	}
	if codec.IsBytes(in.c) {
		b = bytes.Clone(b) // the value may be the caller's
	}
	r := &kgo.Record{Topic: in.topic, Partition: graph.AnyPartition, Key: key, Value: b}
	return d.pipeRecord(r, opts)
}
