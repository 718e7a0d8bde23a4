package topology

import (
	"context"
	"time"

	"github.com/eosflow/eosflow/codec"
	"github.com/eosflow/eosflow/internal/graph"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Fusion. Unfused, every node hands the next a whole Record through its
// port: a closure call, a copy of the record, and calls through
// graph.Exec to name the node running and to get the context. At compile
// time the nodes a source's records pass through one after another
// (MapValues, Map, Filter, FlatMap, Peek, ending at a sink or at the
// first node that is none of them) are fused instead: each calls the next
// directly with the record's key and value only, the rest of the record
// (headers, timestamp, origin) is read from the input record kept in the
// chain's frame, the node running and the context are set and read
// through the engine's graph.Cursor, and Bytes codecs are not called. A
// chain starts at a source and stops where a stream feeds several nodes,
// or a node several streams: from there on the unfused nodes run, given
// the record rebuilt from the frame. Outputs still wait in the engine
// until the whole record succeeded, so they stay all-or-nothing.

// frame is what a fused chain keeps of the record running through it
// besides its key and value: what does not change along a chain of
// stateless nodes. It keeps the input record after the chain ran, until
// the next one.
type frame struct {
	in *kgo.Record // headers, origin and, unless stamped, timestamp
	// at is the timestamp SourceTimestamp gave in, when stamped.
	at      time.Time
	stamped bool
}

// timestamp is the record's, as the source set it.
func (f *frame) timestamp() time.Time {
	if f.stamped {
		return f.at
	}
	return f.in.Timestamp
}

// stamp sets the timestamp SourceTimestamp gave the record. Storing a
// pointer into the heap costs a GC write barrier while the collector
// marks, and a time holds one (its location), so an equal time is not
// written again.
func (f *frame) stamp(at time.Time) {
	if at != f.at { // also compares locations: keep the record's own
		f.at = at
	}
}

// record rebuilds the whole record for the unfused nodes after a chain.
func record[T any](f *frame, key []byte, v T) Record[T] {
	in := f.in
	return Record[T]{Key: key, Value: v, Headers: in.Headers, Timestamp: f.timestamp(), Topic: in.Topic, Partition: in.Partition, Offset: in.Offset}
}

// output is the record a fused sink hands the engine.
func (f *frame) output(topic string, key, value []byte) *kgo.Record {
	return &kgo.Record{Topic: topic, Partition: graph.AnyPartition, Key: key, Value: value, Headers: f.in.Headers, Timestamp: f.timestamp()}
}

// link runs the rest of a fused chain for one record's key and value.
type link[T any] func(x graph.Exec, key []byte, v T) error

// fusion is what the nodes of one chain share: the engine's cursor and the
// chain's frame. Each compile builds its chains anew, so engines share
// neither.
type fusion struct {
	cur *graph.Cursor
	f   *frame
}

// fused returns the link that runs what follows p in a chain: its only
// child's own link when that child can be fused, else p's unfused
// children, given the record rebuilt from the frame.
func (p *port[T]) fused(fz *fusion) link[T] {
	if len(p.next) == 1 {
		if c := p.next[0].node; c != nil && c.fuse != nil && len(c.parents) == 1 {
			if l, ok := c.fuse(fz).(link[T]); ok {
				return l
			}
		}
	}
	f := fz.f
	return func(x graph.Exec, key []byte, v T) error { return p.push(x, record(f, key, v)) }
}

// sourceOf is what the engine runs for the records of source n: its fused
// chain, with a frame of its own, if it has one.
func (t *Topology) sourceOf(n *Node, cur *graph.Cursor) graph.Source {
	if n.fuse == nil || t.unfused {
		return n.source
	}
	if src, ok := n.fuse(&fusion{cur: cur, f: new(frame)}).(graph.Source); ok {
		return src
	}
	return n.source
}

// sourceFuse is the fuse of source n: its records are decoded with c,
// given the timestamp ts reads (nil: the Kafka record's) and fed to p. A
// Bytes codec is not called: the value is the record's.
func sourceFuse[T any](n *Node, p *port[T], c codec.Codec[T], ts func(key []byte, v T) time.Time) func(*fusion) any {
	decode := func(_ context.Context, b []byte) (T, error) { return c.Decode(b) }
	return func(fz *fusion) any {
		cur, f, next := fz.cur, fz.f, p.fused(fz)
		f.stamped = ts != nil
		if ts == nil && codec.IsBytes(c) {
			if nb, ok := any(next).(link[[]byte]); ok {
				return graph.Source(func(x graph.Exec, r *kgo.Record) error {
					f.in = r
					return nb(x, r.Key, r.Value)
				})
			}
		}
		return graph.Source(func(x graph.Exec, r *kgo.Record) error {
			cur.Node = n.index
			v, err := c.Decode(r.Value)
			if err != nil {
				if v, err = again(x, n, decode, r.Value, v, err); err != nil {
					return err
				}
			}
			f.in = r
			if ts != nil {
				f.stamp(ts(r.Key, v))
			}
			return next(x, r.Key, v)
		})
	}
}
