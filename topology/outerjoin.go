package topology

import (
	"context"
	"time"

	"github.com/eosflow/eosflow/internal/store"

	"github.com/eosflow/eosflow/codec"
	"github.com/eosflow/eosflow/internal/graph"
	"github.com/eosflow/eosflow/state"
)

// LeftJoinStreams is JoinStreams that keeps every record of left: a left
// record that joined no right record comes out once, with found false and
// the zero R, when it expires: when stream time has passed it by twice the
// window plus the grace, so that no right record that is not late can
// still join it (Kafka Streams' KStream#leftJoin with JoinWindows, which
// also emits an unmatched record only once its window has closed, never
// at once). A left record that joined is never emitted unmatched; right
// records that joined nothing are dropped, as in JoinStreams. The
// unmatched result carries the left record's key and timestamp, no
// headers, and commits in the transaction of the batch whose record
// expired it, with the store change that drops it. Its emission is a unit
// of work of its own: if fn, or a node after the join, fails for it, the
// failing node's policy settles the unmatched record alone (Skip drops
// it, DeadLetter writes it with its own key, value and timestamp, Fail
// stops Run with a *processor.ExpiryError), it leaves the store, and the
// record that expired it is processed as if nothing had failed.
func LeftJoinStreams[L, R, Out any](left Stream[L], right Stream[R], name string, w JoinWindow, fn func(ctx context.Context, key []byte, l L, r R, found bool) (Out, error),
	engine state.Engine, lc codec.Codec[L], rc codec.Codec[R]) Stream[Out] {
	how := joinHow[L, R, Out]{op: "LeftJoinStreams", left: true}
	if fn != nil {
		how.apply = func(ctx context.Context, in pair[L, R]) (Out, error) { return fn(ctx, in.key, in.l, in.r, in.rok) }
	}
	return joinStreams(left, right, name, w, how, engine, lc, rc)
}

// OuterJoinStreams is LeftJoinStreams for both sides: a record of either
// side that joined no record of the other comes out once when it expires,
// fn(ctx, key, l, r, lfound, rfound) getting the zero value and false for
// the side without a record (Kafka Streams' KStream#outerJoin with
// JoinWindows). A joined pair has both found true, and a record that
// joined is never emitted unmatched.
func OuterJoinStreams[L, R, Out any](left Stream[L], right Stream[R], name string, w JoinWindow,
	fn func(ctx context.Context, key []byte, l L, r R, lfound, rfound bool) (Out, error),
	engine state.Engine, lc codec.Codec[L], rc codec.Codec[R]) Stream[Out] {
	how := joinHow[L, R, Out]{op: "OuterJoinStreams", left: true, right: true}
	if fn != nil {
		how.apply = func(ctx context.Context, in pair[L, R]) (Out, error) {
			return fn(ctx, in.key, in.l, in.r, in.lok, in.rok)
		}
	}
	return joinStreams(left, right, name, w, how, engine, lc, rc)
}

// matchedMark is the value of a side record's index entry once the record
// joined a partner, on a side whose unmatched records come out: expire
// emits only records without it. It commits with the batch that joined,
// so an aborted join leaves the record unmatched.
var matchedMark = []byte{1}

// emitUnmatched emits a side's record, encoded as b under key at ts, that
// expires without having joined; st is the side's store and o the record
// whose stream time expired it.
type emitUnmatched func(x graph.Exec, st *store.Store, key []byte, ts int64, b []byte, o origin) error

// unmatched makes the emitUnmatched of a side whose values c decodes and
// mk puts in a pair alone: fn's result goes out with the record's key and
// timestamp, as an expiry of its own (what names the side's record, for
// the expiry's dead letter and error).
func unmatched[V, L, R, Out any](n *Node, what string, c codec.Codec[V], p *port[Out], apply func(context.Context, pair[L, R]) (Out, error),
	mk func(key []byte, v V) pair[L, R]) emitUnmatched {
	return func(x graph.Exec, st *store.Store, key []byte, ts int64, b []byte, o origin) error {
		return expireEntry(x, n, o, what, key, b, ts, func() error {
			v, err := c.Decode(b)
			if err != nil {
				return &NodeError{Node: n.name, Err: codecError(st, "decode value", key, err)}
			}
			out, err := call(x, n, apply, mk(key, v))
			if err != nil {
				return err
			}
			return p.push(x, Record[Out]{Key: key, Value: out, Timestamp: time.UnixMilli(ts),
				Topic: o.topic, Partition: o.partition, Offset: o.offset})
		})
	}
}

// markMatched marks the records of key in theirs that a record just
// joined, so that they do not come out unmatched when they expire.
func markMatched[O any](x graph.Exec, n *Node, theirs *store.Store, key []byte, matches []joinMatch[O]) error {
	for _, m := range matches {
		ik := sideIndexKey(m.ts, m.seq, key)
		b, _, err := theirs.Get(ik)
		if err != nil {
			return storeFailed(x, n, err)
		}
		if len(b) > 0 {
			continue
		}
		if err := theirs.Put(ik, matchedMark); err != nil {
			return storeFailed(x, n, err)
		}
	}
	return nil
}
