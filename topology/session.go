package topology

import (
	"context"
	"encoding/binary"
	"fmt"
	"time"

	"github.com/eosflow/eosflow/internal/store"

	"github.com/eosflow/eosflow/codec"
	"github.com/eosflow/eosflow/internal/graph"
)

// Session windows group the records of a key that follow one another
// within gap of event time: a session spans from its first record to its
// last, and a record within gap of two sessions merges them. A session
// closes when stream time passes its last record by gap plus the grace;
// a record older than stream time minus the grace is late. Use them with
// CountWindows or ReduceWindows; each result's Window runs from the
// session's first record to its last (End included). With every update
// emitted, a record that merges sessions or extends one first retracts
// each window it replaces with a tombstone (see sessionretract.go), then
// emits the merged session, as Kafka Streams does; FinalOnly emits each
// session once, closed, and retracts nothing.
func Session(gap time.Duration) Windows {
	return Windows{gap: gap, size: gap, advance: gap, session: true}
}

// A session store's keys (stream time as for other windows):
//
//	k | uvarint(len(key)) | key | start    end (8 bytes) | aggregate
//	t | end | start | key                  empty: sessions by end
func sessionKey(key []byte, start int64) []byte { return windowKey(key, start) }

func sessionIndexKey(end, start int64, key []byte) []byte {
	b := make([]byte, 0, 17+len(key))
	b = append(b, indexPrefix)
	b = binary.BigEndian.AppendUint64(b, uint64(end))
	b = binary.BigEndian.AppendUint64(b, uint64(start))
	return append(b, key...)
}

// session folds r (event time ts, stream time now before it) into its
// key's session: a new one, or the sessions within gap of ts merged into
// one, then emits the update, after a tombstone through del for each
// window it replaced, or, with FinalOnly, the sessions that closed.
func session[T, A any](x graph.Exec, n *Node, st *store.Store, r Record[T], ts, now int64, w Windows, c codec.Codec[A],
	step func(context.Context, aggIn[T, A]) (A, error), merge func(context.Context, A, A) (A, error), p *port[Windowed[A]], del *deletes) error {
	gap, grace := w.gap.Milliseconds(), w.grace.Milliseconds()
	advanced, before := ts > now, now
	now = max(now, ts)
	if ts+grace < now {
		return &NodeError{Node: n.name, Err: fmt.Errorf("%w: timestamp %s, stream time %s, grace %s",
			ErrLate, r.Timestamp.UTC().Format(time.RFC3339Nano), time.UnixMilli(now).UTC().Format(time.RFC3339Nano), w.grace)}
	}
	if advanced {
		if err := st.Put(streamTimeKey, binary.BigEndian.AppendUint64(nil, uint64(now))); err != nil {
			return storeFailed(x, n, err)
		}
	}
	// The key's sessions within gap of ts merge with the record.
	merged, err := sessionsNear(x, n, st, r.Key, ts, gap, c)
	if err != nil {
		return err
	}
	start, end := ts, ts
	in := aggIn[T, A]{key: r.Key, v: r.Value}
	for i, f := range merged {
		start, end = min(start, f.start), max(end, f.end)
		if i == 0 {
			in.acc, in.found = f.agg, true
			continue
		}
		acc, err := call(x, n, func(ctx context.Context, ab [2]A) (A, error) { return merge(ctx, ab[0], ab[1]) }, [2]A{in.acc, f.agg})
		if err != nil {
			return err
		}
		in.acc = acc
	}
	acc, err := call(x, n, step, in)
	if err != nil {
		return err
	}
	x.Enter(n.index)
	if err := replaceSessions(x, n, st, r.Key, merged, start, end, acc, c); err != nil {
		return err
	}
	if !w.final {
		if err := retractSessions(x, n, del, r, merged, start, end); err != nil {
			return err
		}
		out := Windowed[A]{Window: Window{Start: time.UnixMilli(start).UTC(), End: time.UnixMilli(end).UTC()}, Value: acc}
		if err := p.push(x, Record[Windowed[A]]{Key: r.Key, Value: out, Headers: r.Headers, Timestamp: r.Timestamp,
			Topic: r.Topic, Partition: r.Partition, Offset: r.Offset}); err != nil {
			return err
		}
	}
	if !advanced {
		return nil
	}
	x.Enter(n.index)
	return closeSessions(x, n, st, before-gap-grace, now-gap-grace, c, w.final, p, origin{r.Topic, r.Partition, r.Offset, r.Timestamp})
}

// sessionFound is a stored session of a key: its first and last
// record's times, and its aggregate.
type sessionFound[A any] struct {
	start, end int64
	agg        A
}

// sessionsNear lists key's sessions within gap of ts, which a record at
// ts merges with.
func sessionsNear[A any](x graph.Exec, n *Node, st *store.Store, key []byte, ts, gap int64, c codec.Codec[A]) ([]sessionFound[A], error) {
	var near []sessionFound[A]
	prefix := sessionKey(key, 0)
	prefix = prefix[:len(prefix)-8]
	for e, err := range st.Prefix(prefix) {
		if err != nil {
			return nil, storeFailed(x, n, err)
		}
		start := int64(binary.BigEndian.Uint64(e.Key[len(e.Key)-8:]))
		if len(e.Value) < 8 {
			return nil, storeFailed(x, n, fmt.Errorf("state: store %q holds a session of %d bytes", st.Name(), len(e.Value)))
		}
		end := int64(binary.BigEndian.Uint64(e.Value[:8]))
		if start > ts+gap || end < ts-gap {
			continue
		}
		agg, err := c.Decode(e.Value[8:])
		if err != nil {
			return nil, &NodeError{Node: n.name, Err: codecError(st, "decode value", key, err)}
		}
		near = append(near, sessionFound[A]{start, end, agg})
	}
	return near, nil
}

// replaceSessions stores key's session from start to end with aggregate
// acc in place of the sessions merged into it, with its index entry.
func replaceSessions[A any](x graph.Exec, n *Node, st *store.Store, key []byte, merged []sessionFound[A], start, end int64, acc A, c codec.Codec[A]) error {
	for _, f := range merged {
		if err := st.Delete(sessionKey(key, f.start)); err != nil {
			return storeFailed(x, n, err)
		}
		if err := st.Delete(sessionIndexKey(f.end, f.start, key)); err != nil {
			return storeFailed(x, n, err)
		}
	}
	b, err := c.Encode(acc)
	if err != nil {
		return &NodeError{Node: n.name, Err: codecError(st, "encode value", key, err)}
	}
	if err := st.Put(sessionKey(key, start), append(binary.BigEndian.AppendUint64(nil, uint64(end)), b...)); err != nil {
		return storeFailed(x, n, err)
	}
	if err := st.Put(sessionIndexKey(end, start, key), []byte{}); err != nil {
		return storeFailed(x, n, err)
	}
	return nil
}

// closeSessions removes the sessions whose last record is before last
// (stream time has passed it by gap plus grace) and, for final results,
// emits each first, in order of their ends. Those before from closed
// earlier, and no session can end there since, so the scan starts at from.
func closeSessions[A any](x graph.Exec, n *Node, st *store.Store, from, last int64, c codec.Codec[A], final bool, p *port[Windowed[A]], o origin) error {
	if last <= 0 {
		return nil
	}
	lo := []byte{indexPrefix}
	if from > 0 {
		lo = sessionIndexKey(from, 0, nil)
	}
	var closed [][]byte
	for e, err := range st.Range(lo, sessionIndexKey(last, 0, nil)) {
		if err != nil {
			return storeFailed(x, n, err)
		}
		closed = append(closed, e.Key)
	}
	for _, ik := range closed {
		end, start := int64(binary.BigEndian.Uint64(ik[1:9])), int64(binary.BigEndian.Uint64(ik[9:17]))
		key := ik[17:]
		sk := sessionKey(key, start)
		if final {
			b, found, err := st.Get(sk)
			if err != nil {
				return storeFailed(x, n, err)
			}
			if found && len(b) >= 8 {
				w := Window{Start: time.UnixMilli(start).UTC(), End: time.UnixMilli(end).UTC()}
				if err := expireWindow(x, n, o, w, key, b[8:], end, func() error {
					return emitFinal(x, n, st, key, b[8:], w, end, c, p, o)
				}); err != nil {
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
