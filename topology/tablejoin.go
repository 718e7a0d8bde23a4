package topology

import (
	"context"
	"fmt"

	"github.com/eosflow/eosflow/internal/graph"
)

// JoinTables joins two tables by key into a table: whenever either side's
// row of a key changes, fn(ctx, key, l, r) runs with both rows, if the
// other side has one, and its result is the joined table's new row (an
// inner join, as Kafka Streams' KTable#join). A row deleted from either
// side (a TableFrom tombstone) deletes the joined row if there was one,
// that is if the other side has a row under the key: ToTable then writes
// a tombstone for it. A delete where the other side has no row emits
// nothing, as there was no joined row. The joined table keeps no store
// of its own: write it with ToTable, join it no further. The tables'
// topics must be co-partitioned, as for Join. ctx is cancelled on
// shutdown and when the record's partition is revoked.
func JoinTables[L, R, Out any](left Table[L], right Table[R], name string, fn func(ctx context.Context, key []byte, l L, r R) (Out, error)) Table[Out] {
	j := tableJoin[L, R, Out]{op: "JoinTables"}
	if fn != nil {
		j.apply = func(ctx context.Context, in pair[L, R]) (Out, error) { return fn(ctx, in.key, in.l, in.r) }
	}
	return joinTables(left, right, name, j)
}

// LeftJoinTables is JoinTables that keeps every row of left (Kafka
// Streams' KTable#leftJoin): the joined row exists while left has a row,
// with found false and the zero R while right has none. A right row
// deleted under a left row updates the joined row to found false; a left
// row deleted deletes the joined row.
func LeftJoinTables[L, R, Out any](left Table[L], right Table[R], name string, fn func(ctx context.Context, key []byte, l L, r R, found bool) (Out, error)) Table[Out] {
	j := tableJoin[L, R, Out]{op: "LeftJoinTables", keepL: true}
	if fn != nil {
		j.apply = func(ctx context.Context, in pair[L, R]) (Out, error) { return fn(ctx, in.key, in.l, in.r, in.rok) }
	}
	return joinTables(left, right, name, j)
}

// OuterJoinTables is JoinTables that keeps every row of both sides (Kafka
// Streams' KTable#outerJoin): the joined row exists while either side has
// a row, fn getting the zero value and false for a side without one. A
// row deleted from one side updates the joined row while the other side
// has one, and deletes it otherwise.
func OuterJoinTables[L, R, Out any](left Table[L], right Table[R], name string,
	fn func(ctx context.Context, key []byte, l L, r R, lfound, rfound bool) (Out, error)) Table[Out] {
	j := tableJoin[L, R, Out]{op: "OuterJoinTables", keepL: true, keepR: true}
	if fn != nil {
		j.apply = func(ctx context.Context, in pair[L, R]) (Out, error) {
			return fn(ctx, in.key, in.l, in.r, in.lok, in.rok)
		}
	}
	return joinTables(left, right, name, j)
}

// tableJoin is one table-table join: which sides keep the joined row alive
// on their own (none: inner; left; both: outer), the user's function, and
// where the joined table's updates and deletes go.
type tableJoin[L, R, Out any] struct {
	op           string
	keepL, keepR bool
	apply        func(context.Context, pair[L, R]) (Out, error)
	n            *Node
	p            *port[Out]
	del          *deletes
}

// joinTables adds the node of j joining left and right, wired to both
// sides' updates and deletes.
func joinTables[L, R, Out any](left Table[L], right Table[R], name string, j tableJoin[L, R, Out]) Table[Out] {
	t := left.s.topology()
	if t == nil {
		t = right.s.topology()
	}
	if t == nil {
		return Table[Out]{}
	}
	j.p, j.del = &port[Out]{}, &deletes{}
	j.n = t.add(name, KindProcessor, j.op, left.s.n, right.s.n)
	jp := &j
	asLeft := func(key []byte, l L, r R, found bool) pair[L, R] {
		return pair[L, R]{key: key, l: l, r: r, lok: true, rok: found}
	}
	asRight := func(key []byte, r R, l L, found bool) pair[L, R] {
		return pair[L, R]{key: key, l: l, r: r, lok: found, rok: true}
	}
	if left.s.p != nil && left.s.n != nil && left.s.n.t == t && right.store != "" {
		left.s.p.next = append(left.s.p.next, child[L]{name: name, fn: onRowUpdate(jp, j.keepL, right, asLeft)})
	}
	if right.s.p != nil && right.s.n != nil && right.s.n.t == t && left.store != "" {
		right.s.p.next = append(right.s.p.next, child[R]{name: name, fn: onRowUpdate(jp, j.keepR, left, asRight)})
	}
	if left.del != nil && left.s.n.t == t && right.store != "" {
		left.del.add(onRowDelete(jp, j.keepL, j.keepR, right, func(key []byte, r R) pair[L, R] { return pair[L, R]{key: key, r: r, rok: true} }))
	}
	if right.del != nil && right.s.n.t == t && left.store != "" {
		right.del.add(onRowDelete(jp, j.keepR, j.keepL, left, func(key []byte, l L) pair[L, R] { return pair[L, R]{key: key, l: l, lok: true} }))
	}
	t.nilFunc(j.n, j.apply == nil)
	joinSides(t, j.n, name, tableSide{left.store, left.s.n}, tableSide{right.store, right.s.n})
	return Table[Out]{s: Stream[Out]{n: j.n, p: j.p}, del: j.del}
}

// onRowUpdate handles a new row of one side: the joined row is emitted
// when the other table has a row under the key, or when this side keeps
// the joined row alive alone (keep).
func onRowUpdate[S, O, L, R, Out any](j *tableJoin[L, R, Out], keep bool, other Table[O], mk func(key []byte, s S, o O, found bool) pair[L, R]) func(graph.Exec, Record[S]) error {
	return func(x graph.Exec, r Record[S]) error {
		x.Enter(j.n.index)
		o, found, err := readRow(x, j.n, other, r.Key)
		if err != nil || !found && !keep {
			return err
		}
		return j.emit(x, mk(r.Key, r.Value, o, found), Record[struct{}]{Key: r.Key, Headers: r.Headers, Timestamp: r.Timestamp,
			Topic: r.Topic, Partition: r.Partition, Offset: r.Offset})
	}
}

// onRowDelete handles a deleted row of one side. The joined row existed if
// the other table has a row under the key, or if this side kept it alive
// alone (keep). If the other side keeps it alive alone (keepOther) and has
// a row, the joined row is updated without this side (mk); otherwise an
// existing joined row is deleted.
func onRowDelete[O, L, R, Out any](j *tableJoin[L, R, Out], keep, keepOther bool, other Table[O], mk func(key []byte, o O) pair[L, R]) func(graph.Exec, Record[struct{}]) error {
	return func(x graph.Exec, r Record[struct{}]) error {
		x.Enter(j.n.index)
		o, found, err := readRow(x, j.n, other, r.Key)
		switch {
		case err != nil:
			return err
		case found && keepOther:
			return j.emit(x, mk(r.Key, o), r)
		case found || keep:
			return j.del.push(x, r)
		}
		return nil
	}
}

// emit runs the user's function on in and passes the joined row on, with
// the headers, timestamp and origin of the record that changed it.
func (j *tableJoin[L, R, Out]) emit(x graph.Exec, in pair[L, R], meta Record[struct{}]) error {
	out, err := call(x, j.n, j.apply, in)
	if err != nil {
		return err
	}
	return j.p.push(x, Record[Out]{Key: in.key, Value: out, Headers: meta.Headers, Timestamp: meta.Timestamp,
		Topic: meta.Topic, Partition: meta.Partition, Offset: meta.Offset})
}

// readRow reads and decodes key's row of table tbl, if it has one.
func readRow[V any](x graph.Exec, n *Node, tbl Table[V], key []byte) (V, bool, error) {
	var v V
	b, found, err := lookupRow(x, n, tbl.store, key)
	if err != nil || !found {
		return v, false, err
	}
	if v, err = tbl.c.Decode(b); err != nil {
		return v, false, &NodeError{Node: n.name, Err: fmt.Errorf("decoding the row of %q under %q: %w", tbl.s.n.name, key, err)}
	}
	return v, true, nil
}
