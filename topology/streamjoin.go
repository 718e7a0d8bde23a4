package topology

import (
	"context"
	"encoding/binary"
	"fmt"
	"time"

	"github.com/eosflow/eosflow/internal/store"

	"github.com/eosflow/eosflow/codec"
	"github.com/eosflow/eosflow/internal/graph"
	"github.com/eosflow/eosflow/state"
)

// JoinWindow says how far apart in event time the records of two streams
// may be to join. Build one with Within.
type JoinWindow struct {
	within, grace time.Duration
	late          *ErrorPolicy
}

// Within joins records of the same key whose event times are at most d
// apart, either way, as Kafka Streams' JoinWindows.ofTimeDifference.
func Within(d time.Duration) JoinWindow { return JoinWindow{within: d} }

// Grace keeps each side's records for d longer, in stream time, for
// partners that arrive out of order, overriding the default of none.
func (w JoinWindow) Grace(d time.Duration) JoinWindow { w.grace = d; return w }

// Late sets the policy for a record older than stream time minus the
// window and the grace (ErrLate): its partners may have been dropped
// already. The default is Skip(); DeadLetter(topic) keeps it.
func (w JoinWindow) Late(p ErrorPolicy) JoinWindow { w.late = &p; return w }

// String describes the window as Describe prints it.
func (w JoinWindow) String() string {
	late := Skip()
	if w.late != nil {
		late = *w.late
	}
	return fmt.Sprintf("within %s, grace %s, late: %s", w.within, w.grace, late)
}

func (w JoinWindow) problem() string {
	switch {
	case w.within < 0 || w.within%time.Millisecond != 0:
		return fmt.Sprintf("join window %s must be whole milliseconds, not negative", w.within)
	case w.grace < 0:
		return fmt.Sprintf("grace %s must not be negative", w.grace)
	}
	return latePolicyProblem(w.late)
}

// JoinStreams joins two streams by key within a window of event time: for
// each record of either side, fn(ctx, key, l, r) runs for every record of
// the other side with the same key whose event time is at most the
// window's distance away, and its result is emitted with the key and the
// later of the two timestamps (an inner join, as Kafka Streams'
// KStream#join with JoinWindows). Each side's records wait in a store of
// engine (named "<name>-left" and "<name>-right", values encoded with lc
// and rc) until stream time passes them by twice the window plus the
// grace, when no record that is not late can join them; then they are
// dropped. A record older than stream time minus the window and the grace
// is late (see JoinWindow.Late). LeftJoinStreams and OuterJoinStreams
// emit the records that joined nothing, when they expire.
//
// The stores commit with the batch's transaction like any store, so each
// pair is joined exactly once across crashes, aborts and rebalances. The
// two input topics must be co-partitioned, as for Join; a stream whose keys
// changed must go Through a repartition topic first. ctx is cancelled on
// shutdown and when the record's partition is revoked.
func JoinStreams[L, R, Out any](left Stream[L], right Stream[R], name string, w JoinWindow, fn func(ctx context.Context, key []byte, l L, r R) (Out, error),
	engine state.Engine, lc codec.Codec[L], rc codec.Codec[R]) Stream[Out] {
	how := joinHow[L, R, Out]{op: "JoinStreams"}
	if fn != nil {
		how.apply = func(ctx context.Context, in pair[L, R]) (Out, error) { return fn(ctx, in.key, in.l, in.r) }
	}
	return joinStreams(left, right, name, w, how, engine, lc, rc)
}

// joinHow is what sets the stream joins apart: the name Describe prints,
// the user's function, and whether each side's records that found no
// partner come out when they expire (LeftJoinStreams, OuterJoinStreams).
type joinHow[L, R, Out any] struct {
	op          string
	apply       func(context.Context, pair[L, R]) (Out, error)
	left, right bool
}

// joinStreams adds a stream join node of either kind (see JoinStreams).
func joinStreams[L, R, Out any](left Stream[L], right Stream[R], name string, w JoinWindow, how joinHow[L, R, Out],
	engine state.Engine, lc codec.Codec[L], rc codec.Codec[R]) Stream[Out] {
	t := left.topology()
	if t == nil {
		t = right.topology()
	}
	if t == nil {
		return Stream[Out]{}
	}
	p := &port[Out]{}
	n := t.add(name, KindProcessor, how.op, left.n, right.n)
	span := w.within.Milliseconds() + w.grace.Milliseconds()
	within := w.within.Milliseconds()
	ls, rs := joinEnd{store: name + "-left"}, joinEnd{store: name + "-right"}
	if how.left {
		ls.unmatched = unmatched(n, "unmatched left record", lc, p, how.apply, func(key []byte, l L) pair[L, R] { return pair[L, R]{key: key, l: l, lok: true} })
	}
	if how.right {
		rs.unmatched = unmatched(n, "unmatched right record", rc, p, how.apply, func(key []byte, r R) pair[L, R] { return pair[L, R]{key: key, r: r, rok: true} })
	}
	if left.p != nil && left.n != nil && left.n.t == t {
		left.p.next = append(left.p.next, child[L]{name: name, fn: func(x graph.Exec, r Record[L]) error {
			return joinSide(x, n, r, ls, rs, within, span, lc, rc, p, func(l L, other R) pair[L, R] {
				return pair[L, R]{key: r.Key, l: l, r: other, lok: true, rok: true}
			}, how.apply)
		}})
	}
	if right.p != nil && right.n != nil && right.n.t == t {
		right.p.next = append(right.p.next, child[R]{name: name, fn: func(x graph.Exec, r Record[R]) error {
			return joinSide(x, n, r, rs, ls, within, span, rc, lc, p, func(rv R, other L) pair[L, R] {
				return pair[L, R]{key: r.Key, l: other, r: rv, lok: true, rok: true}
			}, how.apply)
		}})
	}
	t.nilFunc(n, how.apply == nil)
	streamJoinProblems(t, n, w, left.n, right.n, lc == nil || rc == nil)
	late := Skip()
	if w.late != nil {
		late = *w.late
	}
	n.late = &late
	n.windows = w.String()
	n.stores = []string{ls.store, rs.store}
	t.declareStore(ls.store, engine, n)
	t.declareStore(rs.store, engine, n)
	return Stream[Out]{n: n, p: p}
}

// streamJoinProblems reports to Validate what keeps stream join n from
// working: a missing codec, a bad window, an input whose keys changed.
func streamJoinProblems(t *Topology, n *Node, w JoinWindow, left, right *Node, noCodec bool) {
	if noCodec {
		t.problem(n.name, "%s needs a codec for each side's values, which wait in its stores; pass codec.JSON[T]() or your own", n.op)
	}
	if pr := w.problem(); pr != "" {
		t.problem(n.name, "%s", pr)
	}
	for _, s := range []*Node{left, right} {
		if by := rekeyed(s); by != "" {
			t.problem(n.name, "%s follows %s, which may change keys, so a record may sit in another partition than its partners; "+
				"send that stream Through a repartition topic first (topology.Through(s, name, topology.Repartition(codec)))", n.op, by)
			break
		}
	}
}

// joinEnd is one side of a stream join: its store, and what emits its
// records that expire without a partner (nil: they are dropped).
type joinEnd struct {
	store     string
	unmatched emitUnmatched
}

// pair is what one call of a stream join's function gets.
// lok and rok say which sides hold a record: both, but for the unmatched
// records of a left or outer join.
type pair[L, R any] struct {
	key      []byte
	l        L
	r        R
	lok, rok bool
}

// The keys of a stream join's side store: the side's records by key and
// time, an index by time, a sequence that tells records of one key and
// time apart, and the task's stream time (in both stores, the same).
//
//	k | uvarint(len(key)) | key | ts | seq   the record's value
//	t | ts | seq | key                      empty, or matchedMark once the
//	                                         record found a partner (only
//	                                         on a side that emits unmatched)
//	n                                        the next seq
//	s                                        stream time
var seqKey = []byte("n")

func sideKey(key []byte, ts, seq int64) []byte {
	b := make([]byte, 0, 1+binary.MaxVarintLen64+len(key)+16)
	b = append(b, windowPrefix)
	b = binary.AppendUvarint(b, uint64(len(key)))
	b = append(b, key...)
	b = binary.BigEndian.AppendUint64(b, uint64(ts))
	return binary.BigEndian.AppendUint64(b, uint64(seq))
}

func sideIndexKey(ts, seq int64, key []byte) []byte {
	b := make([]byte, 0, 17+len(key))
	b = append(b, indexPrefix)
	b = binary.BigEndian.AppendUint64(b, uint64(ts))
	b = binary.BigEndian.AppendUint64(b, uint64(seq))
	return append(b, key...)
}

// joinSide handles a record of one side (own) against the other: it
// advances stream time, joins the record with the other side's records of
// its key within the window, stores it for the other side's later
// records, and expires both sides' records that stream time has passed.
func joinSide[V, O, L, R, Out any](x graph.Exec, n *Node, r Record[V], own, other joinEnd, within, span int64,
	vc codec.Codec[V], oc codec.Codec[O], p *port[Out], mk func(v V, o O) pair[L, R], apply func(context.Context, pair[L, R]) (Out, error)) error {
	x.Enter(n.index)
	if r.Key == nil {
		return &NodeError{Node: n.name, Err: fmt.Errorf("%w: %s joins by key; Filter keyless records out first", ErrNoKey, n.op)}
	}
	ts := r.Timestamp.UnixMilli()
	if r.Timestamp.IsZero() || ts < 0 {
		return &NodeError{Node: n.name, Err: fmt.Errorf("%w: the record has no event time (timestamp %d); give its source a timestamp with topology.SourceTimestamp", ErrLate, ts)}
	}
	mine, err := taskStore(x, own.store)
	if err != nil {
		return storeFailed(x, n, err)
	}
	theirs, err := taskStore(x, other.store)
	if err != nil {
		return storeFailed(x, n, err)
	}
	now, err := streamTime(mine)
	if err != nil {
		return storeFailed(x, n, err)
	}
	if ts < now-span {
		return &NodeError{Node: n.name, Err: fmt.Errorf("%w: timestamp %s, stream time %s, window and grace %s",
			ErrLate, r.Timestamp.UTC().Format(time.RFC3339Nano), time.UnixMilli(now).UTC().Format(time.RFC3339Nano), time.Duration(span)*time.Millisecond)}
	}
	// Join with the other side's records of this key in [ts-within, ts+within].
	matches, err := joinMatches(x, n, theirs, r.Key, ts, within, oc)
	if err != nil {
		return err
	}
	if err := emitMatches(x, n, r, ts, matches, p, mk, apply); err != nil {
		return err
	}
	if other.unmatched != nil {
		if err := markMatched(x, n, theirs, r.Key, matches); err != nil {
			return err
		}
	}
	// Keep the record for the other side's later records.
	if err := keepSide(x, n, mine, r, ts, vc, own.unmatched != nil && len(matches) > 0); err != nil {
		return err
	}
	if ts <= now {
		return nil
	}
	// Stream time advances, in both stores, and records no partner can
	// join any more expire: the oldest record that is not late has event
	// time ts-span and joins records back to ts-span-within.
	o := origin{r.Topic, r.Partition, r.Offset, r.Timestamp}
	for _, side := range []struct {
		st  *store.Store
		end joinEnd
	}{{mine, own}, {theirs, other}} {
		if err := side.st.Put(streamTimeKey, binary.BigEndian.AppendUint64(nil, uint64(ts))); err != nil {
			return storeFailed(x, n, err)
		}
		if err := expire(x, n, side.st, side.end.unmatched, now-span-within, ts-span-within, o); err != nil {
			return err
		}
	}
	return nil
}

// emitMatches emits fn's result for r, at ts, with each of its matches,
// stamped with the later of the two timestamps.
func emitMatches[V, O, L, R, Out any](x graph.Exec, n *Node, r Record[V], ts int64, matches []joinMatch[O], p *port[Out],
	mk func(v V, o O) pair[L, R], apply func(context.Context, pair[L, R]) (Out, error)) error {
	for _, m := range matches {
		out, err := call(x, n, apply, mk(r.Value, m.v))
		if err != nil {
			return err
		}
		at := r.Timestamp
		if m.ts > ts {
			at = time.UnixMilli(m.ts)
		}
		if err := p.push(x, Record[Out]{Key: r.Key, Value: out, Headers: r.Headers, Timestamp: at,
			Topic: r.Topic, Partition: r.Partition, Offset: r.Offset}); err != nil {
			return err
		}
		x.Enter(n.index)
	}
	return nil
}

// joinMatch is a record of the other side that a record joins.
type joinMatch[O any] struct {
	v       O
	ts, seq int64
}

// joinMatches reads the other side's records of key in [ts-within,
// ts+within] from theirs, in their order.
func joinMatches[O any](x graph.Exec, n *Node, theirs *store.Store, key []byte, ts, within int64, oc codec.Codec[O]) ([]joinMatch[O], error) {
	prefix := sideKey(key, 0, 0)
	prefix = prefix[:len(prefix)-16] // the key's records, any time
	lo := binary.BigEndian.AppendUint64(append([]byte(nil), prefix...), uint64(max(ts-within, 0)))
	hi := binary.BigEndian.AppendUint64(append([]byte(nil), prefix...), uint64(ts+within+1))
	var matches []joinMatch[O]
	for e, err := range theirs.Range(lo, hi) {
		if err != nil {
			return nil, storeFailed(x, n, err)
		}
		v, err := oc.Decode(e.Value)
		if err != nil {
			return nil, &NodeError{Node: n.name, Err: codecError(theirs, "decode value", key, err)}
		}
		at := e.Key[len(e.Key)-16:]
		matches = append(matches, joinMatch[O]{v, int64(binary.BigEndian.Uint64(at)), int64(binary.BigEndian.Uint64(at[8:]))})
	}
	return matches, nil
}

// keepSide stores r, at ts, in its side's store mine, with its index
// entry (marked if the record matched), for the other side's later
// records to join.
func keepSide[V any](x graph.Exec, n *Node, mine *store.Store, r Record[V], ts int64, vc codec.Codec[V], matched bool) error {
	b, err := vc.Encode(r.Value)
	if err != nil {
		return &NodeError{Node: n.name, Err: codecError(mine, "encode value", r.Key, err)}
	}
	seq, err := nextSeq(mine)
	if err != nil {
		return storeFailed(x, n, err)
	}
	if err := mine.Put(sideKey(r.Key, ts, seq), b); err != nil {
		return storeFailed(x, n, err)
	}
	mark := []byte{}
	if matched {
		mark = matchedMark
	}
	if err := mine.Put(sideIndexKey(ts, seq, r.Key), mark); err != nil {
		return storeFailed(x, n, err)
	}
	return nil
}

// nextSeq takes the store's next sequence number.
func nextSeq(st *store.Store) (int64, error) {
	b, ok, err := st.Get(seqKey)
	if err != nil {
		return 0, err
	}
	var seq int64
	if ok && len(b) == 8 {
		seq = int64(binary.BigEndian.Uint64(b))
	}
	return seq, st.Put(seqKey, binary.BigEndian.AppendUint64(nil, uint64(seq+1)))
}

// expire deletes the records of a side store older than before, emitting
// with unmatched, if not nil, those never marked matched. Those older than
// from went when stream time was lower, and no record that old has been
// kept since (it would be late), so the scan starts at from. o is the
// record whose stream time expires them.
func expire(x graph.Exec, n *Node, st *store.Store, unmatched emitUnmatched, from, before int64, o origin) error {
	if before <= 0 {
		return nil
	}
	lo := []byte{indexPrefix}
	if from > 0 {
		lo = sideIndexKey(from, 0, nil)
	}
	var old []state.Entry[[]byte, []byte]
	for e, err := range st.Range(lo, sideIndexKey(before, 0, nil)) {
		if err != nil {
			return storeFailed(x, n, err)
		}
		old = append(old, e)
	}
	for _, e := range old {
		ik := e.Key
		ts, seq, key := int64(binary.BigEndian.Uint64(ik[1:9])), int64(binary.BigEndian.Uint64(ik[9:17])), ik[17:]
		sk := sideKey(key, ts, seq)
		if unmatched != nil && len(e.Value) == 0 {
			b, found, err := st.Get(sk)
			if err != nil {
				return storeFailed(x, n, err)
			}
			if found {
				if err := unmatched(x, st, key, ts, b, o); err != nil {
					return err
				}
			}
		}
		if err := st.Delete(sk); err != nil {
			return storeFailed(x, n, err)
		}
		if err := st.Delete(ik); err != nil {
			return storeFailed(x, n, err)
		}
	}
	return nil
}
