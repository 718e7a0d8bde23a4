package topology

import (
	"context"
	"fmt"

	"github.com/eosflow/eosflow/internal/store"

	"github.com/eosflow/eosflow/codec"
	"github.com/eosflow/eosflow/internal/graph"
	"github.com/eosflow/eosflow/state"
)

// Grouped is a stream made ready for an aggregation (Count, Reduce,
// Aggregate) that keeps one value per key. The zero Grouped is invalid;
// get one from GroupByKey or GroupBy.
type Grouped[T any] struct{ s Stream[T] }

// Node is the node that feeds the aggregation: the GroupByKey node, or
// for a repartitioned stream the source that reads the repartition topic.
func (g Grouped[T]) Node() *Node { return g.s.n }

// Table is what an aggregation keeps, seen as a stream of updates: for
// each input record, the record's key and the key's new aggregate (with
// LatestPerCommit, only each key's last of a batch). Turn
// it into a Stream with ToStream, or write it with ToTable. The zero
// Table is invalid; get tables from the aggregations, TableFrom and
// JoinTables.
//
// An aggregation never deletes a row: Count, Reduce and Aggregate only
// set them, as Kafka Streams' aggregations of a stream do. Tables from
// TableFrom and JoinTables delete rows too, and session windows under
// every-update output retract the sessions a record replaced (see
// Session); those deletes reach JoinTables and ToTable but not ToStream.
type Table[V any] struct {
	s     Stream[V]
	store string         // the store holding the table, for joins; "" if none
	c     codec.Codec[V] // its values' codec
	del   *deletes       // its deleted rows; nil for a table that deletes none
}

// Node is the aggregation that emits the updates.
func (t Table[V]) Node() *Node { return t.s.n }

// GroupByKey groups s by the records' own keys, for an aggregation.
//
// When keys come unchanged from the input topics, nothing is
// repartitioned: each key must already live in one partition of its topic
// (as it does when producers partition by key), and each task aggregates
// the keys of its own partition. After a node that may change keys (Map,
// FlatMap, Process, ProcessWith) the records of one key may sit in any
// partition, so they must go through a repartition topic as GroupBy's do:
// pass Repartition(codec) (Validate asks for it). Repartition(codec) also
// repartitions a stream whose keys are unchanged, for inputs not
// partitioned by key.
//
// A record without a key (nil) is an error of the aggregation, or of this
// node when it repartitions.
func GroupByKey[T any](s Stream[T], name string, opts ...GroupOption) Grouped[T] {
	conf := groupConfOf(opts)
	if t := s.topology(); t != nil {
		by := rekeyed(s.n)
		if conf.codec != nil || conf.partitions != 0 || by != "" {
			c, ok := conf.codec.(codec.Codec[T])
			if !ok {
				p := codecProblem[T]("GroupByKey", conf.codec)
				if conf.codec == nil && by != "" {
					var zero T
					p = fmt.Sprintf("GroupByKey follows %s, which may change keys, so the records of one key may sit in several partitions "+
						"and each task would aggregate them apart; send them through a repartition topic, as Kafka Streams does: "+
						"pass topology.Repartition(codec.JSON[%T]()) or another codec for the values, or group with GroupBy", by, zero)
				}
				t.problem(name, "%s", p)
				c = nil
			}
			return repartition(s, name, "GroupByKey", nil, c, conf.partitions)
		}
	}
	p := &port[T]{}
	n := attach(s, name, KindProcessor, "GroupByKey", func(n *Node) func(graph.Exec, Record[T]) error {
		return func(x graph.Exec, r Record[T]) error {
			x.Enter(n.index)
			return p.push(x, r)
		}
	})
	return Grouped[T]{Stream[T]{n: n, p: p}}
}

// Count counts the records of each key, in a store of engine named after
// the node, and emits each record's key with the key's new count.
//
// Like every aggregation, it writes the store before it emits the update,
// in the record's processing, so the runtime commits both in the batch's
// transaction or neither. A record without a key, and a value the store's
// codec cannot encode or decode, are errors of the node (its policy
// applies, without retries); a failure of the store itself fails the
// batch whatever the policy, since the record is not at fault. If a node
// after the aggregation fails on the record and its policy skips or
// dead-letters it, the runtime undoes the record's store writes too: a
// record either counts with its outputs or not at all. LatestPerCommit
// holds the updates back to emit each key's last one per batch; its doc
// says what a failure after the aggregation does then.
func Count[T any](g Grouped[T], name string, engine state.Engine, opts ...AggregateOption) Table[int64] {
	add := func(_ context.Context, in aggIn[T, int64]) (int64, error) { return in.acc + 1, nil }
	return aggregate(g, name, "Count", engine, codec.Int64(), add, opts)
}

// Reduce combines the values of each key with fn, in a store of engine
// named after the node, its values encoded by valueCodec: a key's first
// value is kept as it is, and each later one is combined with what the
// store holds, fn(ctx, acc, v). Each record's key is emitted with the
// key's new value. ctx is cancelled on shutdown and when the record's
// partition is revoked. Options: LatestPerCommit.
func Reduce[V any](g Grouped[V], name string, fn func(ctx context.Context, acc, v V) (V, error), engine state.Engine, valueCodec codec.Codec[V], opts ...AggregateOption) Table[V] {
	var step func(context.Context, aggIn[V, V]) (V, error)
	if fn != nil {
		step = func(ctx context.Context, in aggIn[V, V]) (V, error) {
			if !in.found {
				return in.v, nil
			}
			return fn(ctx, in.acc, in.v)
		}
	}
	return aggregate(g, name, "Reduce", engine, valueCodec, step, opts)
}

// Aggregate folds the values of each key into an aggregate of another
// type, in a store of engine named after the node, the aggregates encoded
// by aggCodec: a key's first record starts from init(), and each record
// gives fn(ctx, key, v, acc) as the key's new aggregate, which is emitted
// with the record's key. ctx is cancelled on shutdown and when the
// record's partition is revoked. Options: LatestPerCommit.
func Aggregate[T, A any](g Grouped[T], name string, init func() A, fn func(ctx context.Context, key []byte, v T, acc A) (A, error), engine state.Engine, aggCodec codec.Codec[A], opts ...AggregateOption) Table[A] {
	var step func(context.Context, aggIn[T, A]) (A, error)
	if init != nil && fn != nil {
		step = func(ctx context.Context, in aggIn[T, A]) (A, error) {
			acc := in.acc
			if !in.found {
				acc = init()
			}
			return fn(ctx, in.key, in.v, acc)
		}
	}
	return aggregate(g, name, "Aggregate", engine, aggCodec, step, opts)
}

// aggIn is what one step of an aggregation gets.
type aggIn[T, A any] struct {
	key   []byte
	v     T
	acc   A    // the key's aggregate, if found
	found bool // whether the store held one
}

// aggregate adds an aggregation node owning a store of its name: for each
// record it reads the key's aggregate, computes the next with step, writes
// it and only then emits it, all within the record's processing, so that
// the batch's overlay and its outputs commit or abort together. With
// LatestPerCommit it holds the update back instead (see graph.Exec.Hold).
func aggregate[T, A any](g Grouped[T], name, op string, engine state.Engine, c codec.Codec[A], step func(context.Context, aggIn[T, A]) (A, error), opts []AggregateOption) Table[A] {
	conf := aggOptions(opts)
	p := &port[A]{}
	n := attach(g.s, name, KindProcessor, op, func(n *Node) func(graph.Exec, Record[T]) error {
		return func(x graph.Exec, r Record[T]) error {
			x.Enter(n.index)
			if r.Key == nil {
				return &NodeError{Node: n.name, Err: fmt.Errorf("%w: %s aggregates by key, and a record without one has no aggregate "+
					"(Kafka Streams drops such records; here the node's error policy applies: Skip() drops them); "+
					"set a key before GroupByKey, or Filter keyless records out", ErrNoKey, op)}
			}
			st, err := taskStore(x, name)
			if err != nil {
				return storeFailed(x, n, err)
			}
			acc, _, err := fold(x, n, st, r.Key, r.Key, r.Value, c, step)
			if err != nil {
				return err
			}
			upd := Record[A]{Key: r.Key, Value: acc, Headers: r.Headers, Timestamp: r.Timestamp, Topic: r.Topic, Partition: r.Partition, Offset: r.Offset}
			if conf.latest {
				x.Hold(n.index, r.Key, func(x graph.Exec) error { return p.push(x, upd) })
				return nil
			}
			return p.push(x, upd)
		}
	})
	if n == nil {
		return Table[A]{}
	}
	t := n.t
	t.nilFunc(n, step == nil)
	if c == nil {
		t.problem(name, "%s has no codec for its store's values; pass codec.JSON[T]() or your own", op)
	}
	n.stores = []string{name}
	n.latest = conf.latest
	t.declareStore(name, engine, n)
	return Table[A]{s: Stream[A]{n: n, p: p}, store: name, c: c}
}

// fold runs one step of an aggregation for the record (key k, value v):
// it reads the aggregate stored under sk, computes the next with step,
// and writes it back, returning it and whether one was stored before.
func fold[T, A any](x graph.Exec, n *Node, st *store.Store, sk, k []byte, v T, c codec.Codec[A], step func(context.Context, aggIn[T, A]) (A, error)) (A, bool, error) {
	in := aggIn[T, A]{key: k, v: v}
	b, found, err := st.Get(sk)
	if err != nil {
		return in.acc, false, storeFailed(x, n, err)
	}
	if found {
		if in.acc, err = c.Decode(b); err != nil {
			return in.acc, false, &NodeError{Node: n.name, Err: codecError(st, "decode value", k, err)}
		}
		in.found = true
	}
	acc, err := call(x, n, step, in)
	if err != nil {
		return acc, found, err
	}
	x.Enter(n.index)
	if b, err = c.Encode(acc); err != nil {
		return acc, found, &NodeError{Node: n.name, Err: codecError(st, "encode value", k, err)}
	}
	if err := st.Put(sk, b); err != nil {
		return acc, found, storeFailed(x, n, err)
	}
	return acc, found, nil
}

// storeFailed is the error of an aggregation whose store failed. That is
// no fault of the record, so no error policy applies: the batch fails (its
// transaction aborts) unless the record's context ended, in which case
// the store was most likely closed by a revoke and the record is left for
// the partition's next owner.
func storeFailed(x graph.Exec, n *Node, err error) error {
	if x.Context().Err() != nil {
		return &NodeError{Node: n.name, Err: err}
	}
	return fmt.Errorf("node %q: %w", n.name, err)
}

func codecError(st *store.Store, op string, key []byte, err error) error {
	return &state.CodecError{Store: st.Name(), Task: st.Task(), Op: op, Key: fmt.Sprintf("%q", key), Err: err}
}

// ToStream turns a table's updates into a stream, for further operators.
// A deleted row has no value to pass on, so the stream carries the updates
// only: write the table with ToTable to keep its deletes.
func ToStream[V any](tbl Table[V], name string) Stream[V] {
	p := &port[V]{}
	n := attach(tbl.s, name, KindProcessor, "ToStream", func(n *Node) func(graph.Exec, Record[V]) error {
		return func(x graph.Exec, r Record[V]) error {
			x.Enter(n.index)
			return p.push(x, r)
		}
	})
	return Stream[V]{n: n, p: p}
}

// ToTable writes a table's updates to topic, keyed, encoding values with
// c, as To does, and its deleted rows (see TableFrom, JoinTables and
// Session) as tombstones: the key with a nil value, which c is not called
// for, in the batch's transaction like the updates. A compacted topic
// suits it: compaction keeps each key's latest row and drops deleted
// ones, so the topic reads as the table itself. The node is named after
// the topic unless Named says otherwise.
func ToTable[V any](tbl Table[V], topic string, c codec.Codec[V], opts ...SinkOption[V]) {
	n, tg := to(tbl.s, topic, c, opts)
	if n != nil && tbl.del != nil && tbl.s.n.t == n.t {
		tbl.del.add(tombstone(n, tg))
	}
}
