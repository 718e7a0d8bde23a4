package topology

import (
	"context"
	"errors"
	"fmt"

	"github.com/eosflow/eosflow/codec"
	"github.com/eosflow/eosflow/internal/graph"
	"github.com/eosflow/eosflow/processor"
)

// SinkOption tunes To, ToTable and ToTopicFunc: Partitioner, or Named.
type SinkOption[T any] interface{ sinkOption() }

type sinkConf[T any] struct {
	partitioner func(r Record[T], partitions int32) int32
}

type sinkOpt[T any] func(*sinkConf[T])

func (sinkOpt[T]) sinkOption() {}

// Partitioner makes the sink choose each output's partition with fn, given
// the record and the topic's partition count (read once per topic for the
// run), overriding the default:
// Kafka's murmur2 hash of the key modulo the partition count, as the Java
// producer and Kafka Streams compute it, so every client agrees where a
// key lives (records without a key are spread in sticky batches). A
// partition out of range is an error of the sink, wrapping
// processor.ErrPartitionOutOfRange, handled by its error policy. A
// tombstone ToTable writes for a deleted row is given with the zero
// value, as Kafka Streams gives its partitioners a null one.
func Partitioner[T any](fn func(r Record[T], partitions int32) int32) SinkOption[T] {
	return sinkOpt[T](func(c *sinkConf[T]) { c.partitioner = fn })
}

// To writes s to topic, encoding values with c. The node is named after
// the topic unless Named says otherwise.
func To[T any](s Stream[T], topic string, c codec.Codec[T], opts ...SinkOption[T]) {
	to(s, topic, c, opts)
}

// to adds To's sink and returns it, with where it writes.
func to[T any](s Stream[T], topic string, c codec.Codec[T], opts []SinkOption[T]) (*Node, sinkTarget[T]) {
	n, tg := sink(s, topic, topic, c, nil, opts)
	if n != nil && topic == "" {
		n.t.problem(n.name, "sink has no topic; pass the topic to write, or use ToTopicFunc")
	}
	return n, tg
}

// ToTopicFunc writes each record to the topic topicOf chooses for it; an
// error, an empty topic or one that does not exist is an error of the
// sink, handled by its error policy. ctx is cancelled on shutdown and when
// the record's partition is revoked. Having no one topic to be named
// after, the node takes name.
func ToTopicFunc[T any](s Stream[T], name string, topicOf func(ctx context.Context, r Record[T]) (string, error), c codec.Codec[T], opts ...SinkOption[T]) {
	n, _ := sink(s, name, "", c, topicOf, opts)
	if n != nil {
		n.t.nilFunc(n, topicOf == nil)
	}
}

var errEmptyTopic = errors.New("sink chose an empty topic; return a topic name from the ToTopicFunc function")

// sink adds a sink node named def unless Named in opts says otherwise,
// and returns it with where it writes.
func sink[T any](s Stream[T], def, topic string, c codec.Codec[T], topicOf func(context.Context, Record[T]) (string, error), opts []SinkOption[T]) (*Node, sinkTarget[T]) {
	var conf sinkConf[T]
	t := s.topology()
	if t == nil {
		return nil, sinkTarget[T]{} // a zero Stream: no topology to add to
	}
	name := nodeOptions(t, def, "was made for a sink of another value type; build it for this sink's values", opts, func(o SinkOption[T]) bool {
		f, ok := o.(sinkOpt[T])
		if ok {
			f(&conf)
		}
		return ok
	})
	if name == "" && topic == "" && topicOf == nil {
		name = "To(no topic)" // so that its one problem is the topic
	}
	var encode func(context.Context, T) ([]byte, error)
	if c != nil {
		encode = func(_ context.Context, v T) ([]byte, error) { return c.Encode(v) }
	}
	tg := sinkTarget[T]{topic: topic, topicOf: topicOf, partitioner: conf.partitioner}
	n := attach(s, name, KindSink, "Sink", func(n *Node) func(graph.Exec, Record[T]) error {
		return func(x graph.Exec, r Record[T]) error {
			v, err := call(x, n, encode, r.Value)
			if err != nil {
				return err
			}
			return tg.deliver(x, n, r, v)
		}
	})
	if n == nil {
		return nil, tg
	}
	n.fuse = func(fz *fusion) any { return fuseSink(fz, n, c, encode, tg) }
	n.topic = topic
	n.codec = codec.Name(c)
	n.partitioned = conf.partitioner != nil
	if c == nil {
		n.t.problem(name, "sink has no codec; pass codec.Bytes(), codec.String(), codec.JSON[T]() or your own")
	}
	return n, tg
}

// sinkTarget is where a sink's records go: topic, or the one topicOf
// chooses, in the partition the partitioner chooses, if one does.
type sinkTarget[T any] struct {
	topic       string
	topicOf     func(context.Context, Record[T]) (string, error)
	partitioner func(r Record[T], partitions int32) int32
}

// plain reports whether every record goes to topic, partitioned by key.
func (tg sinkTarget[T]) plain() bool { return tg.topicOf == nil && tg.partitioner == nil }

// choose is the topic topicOf picks for r; an empty one is an error.
func (tg sinkTarget[T]) choose(ctx context.Context, r Record[T]) (string, error) {
	dst, err := tg.topicOf(ctx, r)
	if err == nil && dst == "" {
		err = errEmptyTopic
	}
	return dst, err
}

// deliver emits r, whose value encodes to v, to its topic and partition.
func (tg sinkTarget[T]) deliver(x graph.Exec, n *Node, r Record[T], v []byte) error {
	var err error
	dst := tg.topic
	if tg.topicOf != nil {
		if dst, err = call(x, n, tg.choose, r); err != nil {
			return err
		}
	}
	part := graph.AnyPartition
	if tg.partitioner != nil {
		x.Enter(n.index)
		count, err := x.Partitions(dst)
		if errors.Is(err, processor.ErrUnknownTopic) {
			return &NodeError{Node: n.name, Err: err} // the sink chose it: its policy settles the record
		}
		if err != nil {
			return err // the runtime could not tell (a broker not answering): no policy may drop the record for it
		}
		if part = tg.partitioner(r, count); part < 0 || part >= count {
			return &NodeError{Node: n.name, Err: fmt.Errorf("%w: partitioner chose %d, topic %q has partitions 0 to %d",
				processor.ErrPartitionOutOfRange, part, dst, count-1)}
		}
	}
	return x.Emit(n.index, graph.Output{Topic: dst, Partition: part, Key: r.Key, Value: v, Headers: r.Headers, Timestamp: r.Timestamp})
}

// fuseSink is the sink as the last link of a fused chain: bytes out to a
// plain target go uncopied, others are encoded and delivered.
func fuseSink[T any](fz *fusion, n *Node, c codec.Codec[T], encode func(context.Context, T) ([]byte, error), tg sinkTarget[T]) any {
	cur, f := fz.cur, fz.f
	plain := tg.plain()
	if plain && codec.IsBytes(c) {
		l := link[[]byte](func(x graph.Exec, key []byte, v []byte) error {
			cur.Node = n.index
			return x.EmitRecord(n.index, f.output(tg.topic, key, v))
		})
		if l, ok := any(l).(link[T]); ok {
			return l
		}
	}
	return link[T](func(x graph.Exec, key []byte, v T) error {
		cur.Node = n.index
		b, err := c.Encode(v)
		if err != nil {
			if b, err = again(x, n, encode, v, b, err); err != nil {
				return err
			}
		}
		if plain {
			return x.EmitRecord(n.index, f.output(tg.topic, key, b))
		}
		return tg.deliver(x, n, record(f, key, v), b)
	})
}
