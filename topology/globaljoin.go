package topology

import (
	"context"
	"fmt"

	"github.com/eosflow/eosflow/internal/graph"
)

// JoinGlobal enriches each record of s with the row of global table g
// under keyOf(key, l), a key computed from the record (a foreign key, or
// the record's own key): fn(ctx, key, l, r) gives the output, emitted
// with the record's key. A record whose computed key is nil or has no
// row is dropped: an inner join. See LeftJoinGlobal to keep it. Unlike
// Join, the stream and the table need not be co-partitioned, and the
// stream need not be repartitioned after a change of keys: every instance
// holds the whole table.
//
// The table a batch sees is one version of it: before the first batch
// the runtime reads the topic up to its end as it was at start; later
// updates are applied between batches, never inside one. The join's
// outputs are exactly-once per input record, like every output, but
// which version of a row a record joins depends on when it is processed,
// as in Kafka Streams: a batch redone after an abort or a rebalance may
// join a newer row than the aborted attempt saw. Every row joined is one
// the table's topic committed. keyOf and fn run in the record's task;
// ctx is cancelled on shutdown and when the record's partition is
// revoked.
func JoinGlobal[L, R, Out any](s Stream[L], g GlobalTable[R], name string, keyOf func(key []byte, l L) []byte,
	fn func(ctx context.Context, key []byte, l L, r R) (Out, error)) Stream[Out] {
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
	return joinGlobal(s, g, name, "JoinGlobal", keyOf, step)
}

// LeftJoinGlobal is JoinGlobal that keeps every record of s: fn(ctx, key,
// l, r, found) gets found false and the zero R when the computed key is
// nil or has no row.
func LeftJoinGlobal[L, R, Out any](s Stream[L], g GlobalTable[R], name string, keyOf func(key []byte, l L) []byte,
	fn func(ctx context.Context, key []byte, l L, r R, found bool) (Out, error)) Stream[Out] {
	var step func(context.Context, joinIn[L, R]) (Out, bool, error)
	if fn != nil {
		step = func(ctx context.Context, in joinIn[L, R]) (Out, bool, error) {
			out, err := fn(ctx, in.key, in.l, in.r, in.found)
			return out, true, err
		}
	}
	return joinGlobal(s, g, name, "LeftJoinGlobal", keyOf, step)
}

// joinGlobal adds a node that looks up keyOf's key of each record in the
// global table g and emits what step makes of it, if anything.
func joinGlobal[L, R, Out any](s Stream[L], g GlobalTable[R], name, op string, keyOf func([]byte, L) []byte,
	step func(context.Context, joinIn[L, R]) (Out, bool, error)) Stream[Out] {
	n, p := lookupJoin(s, name, op, step, func(x graph.Exec, n *Node, r Record[L], in *joinIn[L, R]) error {
		return lookupGlobal(x, n, g, keyOf(r.Key, r.Value), &in.r, &in.found)
	})
	if n == nil {
		return Stream[Out]{}
	}
	t := n.t
	t.nilFunc(n, step == nil)
	if keyOf == nil {
		t.problem(name, "%s has a nil key function; pass keyOf, which gives the table key of each record "+
			"(return the record's key to join by it)", op)
	}
	switch d := t.global(g.name); {
	case g.t == nil:
		t.problem(name, "%s has no global table (a zero GlobalTable); pass one from topology.GlobalTableFrom", op)
	case g.t != t:
		t.problem(name, "%s's global table %q belongs to another topology; declare it on this one", op, g.name)
	case d != nil:
		d.used = true
		n.globals = append(n.globals, g.name)
	}
	return Stream[Out]{n: n, p: p}
}

// lookupGlobal sets *r and *found to key's row of g, if it has one (a nil
// key has none).
func lookupGlobal[R any](x graph.Exec, n *Node, g GlobalTable[R], key []byte, r *R, found *bool) error {
	if key == nil {
		return nil
	}
	st, err := x.Global(g.name)
	if err != nil {
		return &NodeError{Node: n.name, Err: fmt.Errorf("global table %q: %w", g.name, err)}
	}
	b, ok, err := st.Get(key)
	if err != nil {
		return &NodeError{Node: n.name, Err: fmt.Errorf("reading global table %q under %q: %w", g.name, key, err)}
	}
	if !ok {
		return nil
	}
	if *r, err = g.c.Decode(b); err != nil {
		return &NodeError{Node: n.name, Err: fmt.Errorf("decoding the row of global table %q under key %q: %w; "+
			"fix that record, or tombstone key %q in topic %s, for the table's codec to read it", g.name, key, err, key, g.topic)}
	}
	*found = true
	return nil
}
