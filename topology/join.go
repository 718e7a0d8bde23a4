package topology

import (
	"context"
	"fmt"

	"github.com/eosflow/eosflow/codec"
	"github.com/eosflow/eosflow/internal/graph"
	"github.com/eosflow/eosflow/state"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TableFrom reads topic as a table: each record sets its key's value in a
// store of engine named after the node, and the updates flow on as the
// table's stream. A record with a nil value, a tombstone, deletes the
// key's row; when there was one, the delete flows on to JoinTables and
// ToTable (ToTable writes a tombstone), not to ToStream's stream, which
// has no value to give it. A tombstone for a key the table does not hold
// changes nothing. A compacted topic suits it, as for Kafka Streams'
// builder.table(). Join streams against it: their input topics and this
// one are then co-partitioned (see Join).
//
// The store's writes go to its changelog in the batch's transaction like
// any store's, so the table is exactly what the committed records of the
// topic say, across crashes and rebalances. The node, and so its store, is
// named after the topic unless Named says otherwise; Named is its only
// option.
func TableFrom[V any](t *Topology, topic string, c codec.Codec[V], engine state.Engine, opts ...SourceOption[V]) Table[V] {
	name := nodeOptions(t, topic, "does not apply to a table; TableFrom takes only Named", opts, func(SourceOption[V]) bool { return false })
	n := readTopic(t, name, topic, "TableFrom")
	n.codec = codec.Name(c)
	name = n.name
	p := &port[V]{}
	if topic != "" { // else the topic is its one problem, not a store
		n.stores = []string{name}
		t.declareStore(name, engine, n)
	}
	if c == nil {
		t.problem(name, "table has no codec; pass codec.JSON[T]() or your own")
		return Table[V]{s: Stream[V]{n: n, p: p}}
	}
	decode := func(_ context.Context, b []byte) (V, error) { return c.Decode(b) }
	del := &deletes{}
	n.source = func(x graph.Exec, r *kgo.Record) error {
		x.Enter(n.index)
		if r.Key == nil {
			return &NodeError{Node: n.name, Err: fmt.Errorf("%w: a table record without a key has no row to set; "+
				"key the records of %s", ErrNoKey, topic)}
		}
		st, err := taskStore(x, name)
		if err != nil {
			return storeFailed(x, n, err)
		}
		if r.Value == nil {
			return deleteRow(x, n, st, del, r)
		}
		v, err := call(x, n, decode, r.Value)
		if err != nil {
			return err
		}
		x.Enter(n.index)
		if err := st.Put(r.Key, r.Value); err != nil {
			return storeFailed(x, n, err)
		}
		return p.push(x, Record[V]{Key: r.Key, Value: v, Headers: r.Headers, Timestamp: r.Timestamp,
			Topic: r.Topic, Partition: r.Partition, Offset: r.Offset})
	}
	return Table[V]{s: Stream[V]{n: n, p: p}, store: name, c: c, del: del}
}

// Join enriches each record of s with the row of tbl under the record's
// key, as it stands when the record is processed: fn(ctx, key, l, r)
// gives the output, emitted with the record's key. A record whose key has
// no row (or no key) is dropped: an inner join. See LeftJoin to keep it.
//
// The stream's input topic and the table's must be co-partitioned: as
// many partitions, keyed alike, so that a key's records and its row are in
// the same task. The runtime checks the partition counts at start and
// assigns partition p of both to one instance. A stream whose keys changed
// upstream must go Through a repartition topic first (Validate says so).
// Records of both topics are merged by their Kafka timestamps as far as
// they have been fetched, so a row updated at about the time of a record
// may still be seen before or after the update. ctx is cancelled on shutdown and when the record's partition
// is revoked.
func Join[L, R, Out any](s Stream[L], tbl Table[R], name string, fn func(ctx context.Context, key []byte, l L, r R) (Out, error)) Stream[Out] {
	var step func(context.Context, joinIn[L, R]) (Out, bool, error)
	if fn != nil {
		step = func(ctx context.Context, in joinIn[L, R]) (Out, bool, error) {
			if !in.found {
				var zero Out
				return zero, false, nil
			}
			out, err := fn(ctx, in.key, in.l, in.r)
			return out, true, err
		}
	}
	return join(s, tbl, name, "Join", step)
}

// LeftJoin is Join that keeps every record of s: fn(ctx, key, l, r, found)
// gets found false and the zero R when the key has no row.
func LeftJoin[L, R, Out any](s Stream[L], tbl Table[R], name string, fn func(ctx context.Context, key []byte, l L, r R, found bool) (Out, error)) Stream[Out] {
	var step func(context.Context, joinIn[L, R]) (Out, bool, error)
	if fn != nil {
		step = func(ctx context.Context, in joinIn[L, R]) (Out, bool, error) {
			out, err := fn(ctx, in.key, in.l, in.r, in.found)
			return out, true, err
		}
	}
	return join(s, tbl, name, "LeftJoin", step)
}

// joinIn is what one step of a join gets.
type joinIn[L, R any] struct {
	key   []byte
	l     L
	r     R
	found bool
}

// join adds a node that looks each record's key up in tbl's store of the
// record's task and emits what step makes of it, if anything.
func join[L, R, Out any](s Stream[L], tbl Table[R], name, op string, step func(context.Context, joinIn[L, R]) (Out, bool, error)) Stream[Out] {
	n, p := lookupJoin(s, name, op, step, func(x graph.Exec, n *Node, r Record[L], in *joinIn[L, R]) error {
		if r.Key == nil {
			return nil
		}
		st, err := taskStore(x, tbl.store)
		if err != nil {
			return storeFailed(x, n, err)
		}
		b, found, err := st.Get(r.Key)
		if err != nil {
			return storeFailed(x, n, err)
		}
		if found {
			if in.r, err = tbl.c.Decode(b); err != nil {
				return &NodeError{Node: n.name, Err: codecError(st, "decode value", r.Key, err)}
			}
			in.found = true
		}
		return nil
	})
	if n == nil {
		return Stream[Out]{}
	}
	t := n.t
	t.nilFunc(n, step == nil)
	switch {
	case tbl.s.n == nil:
		t.problem(name, "%s has no table (a zero Table); pass one from TableFrom, Count, Reduce or Aggregate", op)
	case tbl.store == "":
		t.problem(name, "%s's table %q keeps no store to look rows up in (a windowed aggregation's results); "+
			"join a table from TableFrom, Count, Reduce or Aggregate", op, tbl.s.n.name)
	default:
		n.stores = []string{tbl.store}
	}
	if by := rekeyed(s.n); by != "" {
		t.problem(name, "%s follows %s, which may change keys, so a record may sit in another partition than its key's row; "+
			"send the stream Through a repartition topic first (topology.Through(s, name, topology.Repartition(codec))), "+
			"as Kafka Streams repartitions before a join", op, by)
	}
	return Stream[Out]{n: n, p: p}
}

// lookupJoin adds the node of a stream join with a table: lookup fills
// in the row for each record, and step makes what is emitted, if anything.
func lookupJoin[L, R, Out any](s Stream[L], name, op string, step func(context.Context, joinIn[L, R]) (Out, bool, error),
	lookup func(graph.Exec, *Node, Record[L], *joinIn[L, R]) error) (*Node, *port[Out]) {
	p := &port[Out]{}
	type result struct {
		out  Out
		emit bool
	}
	var apply func(context.Context, joinIn[L, R]) (result, error)
	if step != nil {
		apply = func(ctx context.Context, in joinIn[L, R]) (result, error) {
			out, emit, err := step(ctx, in)
			return result{out, emit}, err
		}
	}
	n := attach(s, name, KindProcessor, op, func(n *Node) func(graph.Exec, Record[L]) error {
		return func(x graph.Exec, r Record[L]) error {
			x.Enter(n.index)
			in := joinIn[L, R]{key: r.Key, l: r.Value}
			if err := lookup(x, n, r, &in); err != nil {
				return err
			}
			res, err := call(x, n, apply, in)
			if err != nil || !res.emit {
				return err
			}
			return p.push(x, Record[Out]{Key: r.Key, Value: res.out, Headers: r.Headers, Timestamp: r.Timestamp,
				Topic: r.Topic, Partition: r.Partition, Offset: r.Offset})
		}
	})
	return n, p
}

// lookupRow reads key's row of the table kept in store, if it has one.
func lookupRow(x graph.Exec, n *Node, store string, key []byte) ([]byte, bool, error) {
	st, err := taskStore(x, store)
	if err != nil {
		return nil, false, storeFailed(x, n, err)
	}
	b, found, err := st.Get(key)
	if err != nil {
		return nil, false, storeFailed(x, n, err)
	}
	return b, found, nil
}

// tableSide is a joined table: its store and its node.
type tableSide struct {
	store string
	n     *Node
}

// joinSides declares the joined tables' stores as the join node's, or
// reports a table that keeps none.
func joinSides(t *Topology, n *Node, name string, sides ...tableSide) {
	for _, side := range sides {
		switch {
		case side.n == nil:
			t.problem(name, "%s has a zero Table; pass tables from TableFrom, Count, Reduce or Aggregate", n.op)
		case side.store == "":
			t.problem(name, "%s's table %q keeps no store to look rows up in; join tables from TableFrom, Count, Reduce or Aggregate", n.op, side.n.name)
		default:
			n.stores = append(n.stores, side.store)
		}
	}
}
