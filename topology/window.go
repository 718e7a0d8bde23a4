package topology

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/eosflow/eosflow/internal/store"

	"github.com/eosflow/eosflow/codec"
	"github.com/eosflow/eosflow/internal/graph"
	"github.com/eosflow/eosflow/state"
)

// ErrLate matches the error of a windowed aggregation given a record whose
// windows have all closed: their end plus the grace period is at or before
// the task's stream time. The aggregation's late policy applies to it (see
// Windows.Late).
var ErrLate = errors.New("topology: record is late: its windows have closed")

// Windows says how a windowed aggregation (CountWindows, ReduceWindows,
// AggregateWindows) assigns records to windows by event time (the record's
// timestamp; see SourceTimestamp), how long a window stays open for
// records out of order, and what it emits. Build one with Tumbling,
// Hopping or Session.
type Windows struct {
	size, advance, grace time.Duration
	gap                  time.Duration // session windows: the inactivity gap
	session              bool
	final                bool
	late                 *ErrorPolicy
}

// Tumbling windows are size long, back to back, aligned to the epoch:
// each record falls into exactly one.
func Tumbling(size time.Duration) Windows { return Windows{size: size, advance: size} }

// Hopping windows are size long and start every advance, aligned to the
// epoch: a record falls into size/advance of them (rounded up).
func Hopping(size, advance time.Duration) Windows { return Windows{size: size, advance: advance} }

// Grace keeps each window open for records up to d after its end, in
// stream time, overriding the default of none: a record that arrives
// later for every window it falls into is late (see Late).
func (w Windows) Grace(d time.Duration) Windows { w.grace = d; return w }

// FinalOnly emits each window's result once, when the window closes
// (stream time passes its end plus the grace period), as Kafka Streams'
// suppress(untilWindowCloses), instead of every update. The result, the
// window's removal from the store and the input offsets commit in one
// transaction, so a final result is emitted exactly once across crashes
// and rebalances. Stream time advances only with records of the task, so
// the last windows close when later records arrive. A final result goes
// out in the batch of the record that closed its window, but as a unit of
// work of its own: if a node after the aggregation fails on it, that
// node's policy settles the result alone (Skip drops it, DeadLetter writes
// the window's key and encoded aggregate, Fail stops Run with a
// *processor.ExpiryError), the window leaves the store, and the record
// that closed it is processed as if nothing had failed.
func (w Windows) FinalOnly() Windows { w.final = true; return w }

// Late sets the policy for late records (ErrLate), overriding the
// default Skip(), which drops them and counts them in Stats.Skipped;
// DeadLetter(topic) writes them there with the reason in the headers.
// The node's own error policy (OnError) is for every other error.
func (w Windows) Late(p ErrorPolicy) Windows { w.late = &p; return w }

// String describes the windows as Describe prints them.
func (w Windows) String() string {
	kind := fmt.Sprintf("tumbling %s", w.size)
	switch {
	case w.session:
		kind = fmt.Sprintf("session, gap %s", w.gap)
	case w.advance != w.size:
		kind = fmt.Sprintf("hopping %s every %s", w.size, w.advance)
	}
	emit := "every update"
	if w.final {
		emit = "final results"
	}
	late := Skip()
	if w.late != nil {
		late = *w.late
	}
	return fmt.Sprintf("%s, grace %s, emit %s, late: %s", kind, w.grace, emit, late)
}

// problem says what is wrong with w, or "".
func (w Windows) problem() string {
	switch {
	case w.session && w.gap <= 0:
		return fmt.Sprintf("session gap %s must be positive; pass topology.Session(time.Minute) or similar", w.gap)
	case w.gap%time.Millisecond != 0:
		return fmt.Sprintf("session gap %s must be whole milliseconds, the resolution of Kafka timestamps", w.gap)
	case w.session && w.grace < 0:
		return fmt.Sprintf("grace %s must not be negative", w.grace)
	case w.session:
	case w.size <= 0:
		return fmt.Sprintf("window size %s must be positive; pass topology.Tumbling(time.Minute) or similar", w.size)
	case w.size%time.Millisecond != 0 || w.advance%time.Millisecond != 0:
		return fmt.Sprintf("window size %s and advance %s must be whole milliseconds, the resolution of Kafka timestamps", w.size, w.advance)
	case w.advance <= 0 || w.advance > w.size:
		return fmt.Sprintf("window advance %s must be positive and at most the size %s", w.advance, w.size)
	case w.grace < 0:
		return fmt.Sprintf("grace %s must not be negative", w.grace)
	}
	return latePolicyProblem(w.late)
}

// latePolicyProblem says what is wrong with a policy for late records,
// or "": it must be valid, and retrying a late record cannot help.
func latePolicyProblem(p *ErrorPolicy) string {
	if p == nil {
		return ""
	}
	if pr := p.check(); pr != "" {
		return "late policy: " + pr
	}
	if p.p.Kind == graph.PolicyRetry {
		return "late policy: a late record stays late, so Retry cannot help; use Skip() or DeadLetter(topic)"
	}
	return ""
}

// Window is the span of event time a windowed result covers: [Start, End)
// for tumbling and hopping windows; for sessions, from the first record to
// the last, End included. Its times are whole milliseconds in UTC.
//
// As JSON it is {"start":"2026-01-02T15:04:00.000Z","end":"2026-01-02T15:05:00.000Z"}:
// RFC 3339 in UTC with exactly three fractional digits (WindowTimeFormat).
// Milliseconds are the resolution of Kafka timestamps, so windows round-trip
// exactly; a fixed width makes the strings sort as the times do; and any
// language parses RFC 3339, where epoch numbers leave the unit to guess.
// Decoding accepts any RFC 3339 time, returned in UTC.
type Window struct {
	Start time.Time
	End   time.Time
}

// WindowTimeFormat is the layout of a Window's times in JSON.
const WindowTimeFormat = "2006-01-02T15:04:05.000Z07:00"

// windowJSON is Window's JSON shape; Go's json matches the names
// case-insensitively, so the untagged form of older releases still decodes.
type windowJSON struct {
	Start string `json:"start"`
	End   string `json:"end"`
}

// MarshalJSON encodes w as {"start":…,"end":…} in WindowTimeFormat.
// Sub-millisecond digits are dropped; windows have none.
func (w Window) MarshalJSON() ([]byte, error) {
	start, err := windowTime(w.Start)
	if err != nil {
		return nil, err
	}
	end, err := windowTime(w.End)
	if err != nil {
		return nil, err
	}
	return json.Marshal(windowJSON{Start: start, End: end})
}

// windowTime formats t in UTC, refusing years RFC 3339 cannot hold, as
// time.Time's own MarshalJSON does.
func windowTime(t time.Time) (string, error) {
	t = t.UTC()
	if y := t.Year(); y < 0 || y > 9999 {
		return "", fmt.Errorf("topology: window time %s: year outside [0,9999]", t)
	}
	return t.Format(WindowTimeFormat), nil
}

// UnmarshalJSON decodes what MarshalJSON encodes, and any RFC 3339 times.
func (w *Window) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		return nil // as encoding/json leaves a value on null
	}
	var j windowJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	start, err := time.Parse(time.RFC3339, j.Start)
	if err != nil {
		return fmt.Errorf("topology: window start: %w", err)
	}
	end, err := time.Parse(time.RFC3339, j.End)
	if err != nil {
		return fmt.Errorf("topology: window end: %w", err)
	}
	*w = Window{Start: start.UTC(), End: end.UTC()}
	return nil
}

// Windowed is a windowed aggregation's result: the aggregate of the
// record key's records that fell into Window. It is the record's value;
// the record's key stays the grouping key, unchanged, so the window is
// only in the value and a key's windows share one Kafka key: on a
// compacted topic, compaction would keep only each key's latest window.
// As JSON, with codec.JSON:
//
//	{"window":{"start":"2026-01-02T15:04:00.000Z","end":"2026-01-02T15:05:00.000Z"},"value":5}
//
// with Value encoded as its type encodes (see Window for the times).
type Windowed[V any] struct {
	Window Window `json:"window"`
	Value  V      `json:"value"`
}

// CountWindows counts the records of each key in each window, in a store
// of engine named after the node, and emits the key with the window and
// its count: at every update, or once per window with FinalOnly.
func CountWindows[T any](g Grouped[T], name string, w Windows, engine state.Engine) Table[Windowed[int64]] {
	add := func(_ context.Context, in aggIn[T, int64]) (int64, error) { return in.acc + 1, nil }
	sum := func(_ context.Context, a, b int64) (int64, error) { return a + b, nil }
	return windowed(g, name, "CountWindows", w, engine, codec.Int64(), add, sum)
}

// ReduceWindows combines the values of each key in each window with fn,
// as Reduce does per key.
func ReduceWindows[V any](g Grouped[V], name string, w Windows, fn func(ctx context.Context, acc, v V) (V, error), engine state.Engine, valueCodec codec.Codec[V]) Table[Windowed[V]] {
	var step func(context.Context, aggIn[V, V]) (V, error)
	if fn != nil {
		step = func(ctx context.Context, in aggIn[V, V]) (V, error) {
			if !in.found {
				return in.v, nil
			}
			return fn(ctx, in.acc, in.v)
		}
	}
	return windowed(g, name, "ReduceWindows", w, engine, valueCodec, step, fn)
}

// AggregateWindows folds the values of each key in each window into an
// aggregate of another type, starting each window from init(), as
// Aggregate does per key.
func AggregateWindows[T, A any](g Grouped[T], name string, w Windows, init func() A, fn func(ctx context.Context, key []byte, v T, acc A) (A, error), engine state.Engine, aggCodec codec.Codec[A]) Table[Windowed[A]] {
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
	return windowed(g, name, "AggregateWindows", w, engine, aggCodec, step, nil)
}

// The window store's keys. Every write goes to the changelog in the
// batch's transaction like any store's, so stream time, windows and their
// index commit and abort together:
//
//	s                                   stream time: 8 bytes, ms
//	k | uvarint(len(key)) | key | start  the window's aggregate
//	t | start | key                      empty: windows in time order
//
// Keys first serve a lookup, or a range over one key's windows; the time
// index finds the windows that closed without scanning every key.
var (
	streamTimeKey = []byte("s")
	windowPrefix  = byte('k')
	indexPrefix   = byte('t')
)

func windowKey(key []byte, start int64) []byte {
	b := make([]byte, 0, 1+binary.MaxVarintLen64+len(key)+8)
	b = append(b, windowPrefix)
	b = binary.AppendUvarint(b, uint64(len(key)))
	b = append(b, key...)
	return binary.BigEndian.AppendUint64(b, uint64(start))
}

func indexKey(start int64, key []byte) []byte {
	b := make([]byte, 0, 9+len(key))
	b = append(b, indexPrefix)
	b = binary.BigEndian.AppendUint64(b, uint64(start))
	return append(b, key...)
}

// windowsOf lists the starts (ms) of the windows of w that contain ts.
func (w Windows) windowsOf(ts int64) []int64 {
	size, adv := w.size.Milliseconds(), w.advance.Milliseconds()
	first := ts - size + 1
	if first < 0 {
		first = 0
	}
	start := first + (adv-first%adv)%adv // the first multiple of adv >= first
	var out []int64
	for s := start; s <= ts; s += adv {
		out = append(out, s)
	}
	return out
}

// windowed adds a windowed aggregation node owning a store of its name.
// For each record it advances the task's stream time, folds the record
// into each of its windows that is still open (end + grace after stream
// time), writes them and emits the updates (or, with FinalOnly, emits and
// removes the windows that closed), all within the record's processing,
// so that they commit or abort with its batch.
func windowed[T, A any](g Grouped[T], name, op string, w Windows, engine state.Engine, c codec.Codec[A], step func(context.Context, aggIn[T, A]) (A, error),
	merge func(context.Context, A, A) (A, error)) Table[Windowed[A]] {
	p := &port[Windowed[A]]{}
	var del *deletes // retracted sessions, under every-update output
	if w.session && !w.final {
		del = &deletes{}
	}
	n := attach(g.s, name, KindProcessor, op, func(n *Node) func(graph.Exec, Record[T]) error {
		return func(x graph.Exec, r Record[T]) error {
			x.Enter(n.index)
			if r.Key == nil {
				return &NodeError{Node: n.name, Err: fmt.Errorf("%w: %s aggregates by key, and a record without one has no aggregate; "+
					"set a key before grouping, or Filter keyless records out", ErrNoKey, op)}
			}
			ts := r.Timestamp.UnixMilli()
			if r.Timestamp.IsZero() || ts < 0 {
				return &NodeError{Node: n.name, Err: fmt.Errorf("%w: the record has no event time (timestamp %d); give its source a timestamp with topology.SourceTimestamp", ErrLate, ts)}
			}
			st, err := taskStore(x, name)
			if err != nil {
				return storeFailed(x, n, err)
			}
			now, err := streamTime(st)
			if err != nil {
				return storeFailed(x, n, err)
			}
			if w.session {
				return session(x, n, st, r, ts, now, w, c, step, merge, p, del)
			}
			return hopping(x, n, st, r, ts, now, w, c, step, p)
		}
	})
	if n == nil {
		return Table[Windowed[A]]{}
	}
	t := n.t
	t.nilFunc(n, step == nil)
	if c == nil {
		t.problem(name, "%s has no codec for its store's values; pass codec.JSON[T]() or your own", op)
	}
	if pr := w.problem(); pr != "" {
		t.problem(name, "%s", pr)
	}
	if w.session && merge == nil && step != nil {
		t.problem(name, "%s cannot merge two sessions' aggregates, which session windows need when a record joins them; use CountWindows or ReduceWindows", op)
	}
	late := Skip()
	if w.late != nil {
		late = *w.late
	}
	n.late = &late
	n.windows = w.String()
	n.stores = []string{name}
	t.declareStore(name, engine, n)
	return Table[Windowed[A]]{s: Stream[Windowed[A]]{n: n, p: p}, del: del}
}

// hopping adds a record at ts to each window it falls in that is still
// open at stream time now (advanced to ts), and closes the windows that
// stream time passed: hopping and tumbling windows, by start.
func hopping[T, A any](x graph.Exec, n *Node, st *store.Store, r Record[T], ts, now int64, w Windows, c codec.Codec[A],
	step func(context.Context, aggIn[T, A]) (A, error), p *port[Windowed[A]]) error {
	size, grace := w.size.Milliseconds(), w.grace.Milliseconds()
	advanced, before := ts > now, now
	now = max(now, ts)
	var open []int64
	for _, start := range w.windowsOf(ts) {
		if start+size+grace > now {
			open = append(open, start)
		}
	}
	if len(open) == 0 {
		// Nothing written yet: a late record leaves no trace.
		return &NodeError{Node: n.name, Err: fmt.Errorf("%w: timestamp %s, stream time %s, window %s, grace %s",
			ErrLate, r.Timestamp.UTC().Format(time.RFC3339Nano), time.UnixMilli(now).UTC().Format(time.RFC3339Nano), w.size, w.grace)}
	}
	if advanced {
		if err := st.Put(streamTimeKey, binary.BigEndian.AppendUint64(nil, uint64(now))); err != nil {
			return storeFailed(x, n, err)
		}
	}
	for _, start := range open {
		acc, found, err := fold(x, n, st, windowKey(r.Key, start), r.Key, r.Value, c, step)
		if err != nil {
			return err
		}
		if !found {
			if err := st.Put(indexKey(start, r.Key), []byte{}); err != nil {
				return storeFailed(x, n, err)
			}
		}
		if !w.final {
			out := Windowed[A]{Window: window(start, size), Value: acc}
			if err := p.push(x, Record[Windowed[A]]{Key: r.Key, Value: out, Headers: r.Headers, Timestamp: r.Timestamp,
				Topic: r.Topic, Partition: r.Partition, Offset: r.Offset}); err != nil {
				return err
			}
		}
	}
	// Windows that start at or before last have closed; those up
	// to the last stream time's bound closed then, so only starts
	// in between are looked for, and only if one can be there.
	from, last := before-size-grace, now-size-grace
	if !advanced || last < 0 || nextStart(from, w.advance.Milliseconds()) > last {
		return nil
	}
	x.Enter(n.index)
	return closeWindows(x, n, st, from, last, size, c, w.final, p, origin{r.Topic, r.Partition, r.Offset, r.Timestamp})
}

func window(start, size int64) Window {
	return Window{Start: time.UnixMilli(start).UTC(), End: time.UnixMilli(start + size).UTC()}
}

// streamTime reads the task's stream time, -1 before its first record.
func streamTime(st *store.Store) (int64, error) {
	b, ok, err := st.Get(streamTimeKey)
	if err != nil || !ok {
		return -1, err
	}
	if len(b) != 8 {
		return -1, fmt.Errorf("state: store %q holds a stream time of %d bytes, want 8", st.Name(), len(b))
	}
	return int64(binary.BigEndian.Uint64(b)), nil
}

// origin is where the record that closed a window came from.
type origin struct {
	topic     string
	partition int32
	offset    int64
	at        time.Time
}

// nextStart is the first window start (a multiple of adv) after from.
func nextStart(from, adv int64) int64 {
	if from < 0 {
		return 0
	}
	return (from/adv + 1) * adv
}

// closeWindows removes the windows that start after from and at or
// before last (their end plus grace is at or before stream time) and, for
// final results, emits each first, in time order, as outputs of the
// record from o. Windows up to from closed before, so the scan starts
// after them rather than over their deleted keys.
func closeWindows[A any](x graph.Exec, n *Node, st *store.Store, from, last, size int64, c codec.Codec[A], final bool, p *port[Windowed[A]], o origin) error {
	lo := []byte{indexPrefix}
	if from >= 0 {
		lo = indexKey(from+1, nil)
	}
	var closed [][]byte
	for e, err := range st.Range(lo, indexKey(last+1, nil)) {
		if err != nil {
			return storeFailed(x, n, err)
		}
		closed = append(closed, e.Key)
	}
	for _, ik := range closed {
		start := int64(binary.BigEndian.Uint64(ik[1:9]))
		key := ik[9:]
		wk := windowKey(key, start)
		if final {
			b, found, err := st.Get(wk)
			if err != nil {
				return storeFailed(x, n, err)
			}
			if found {
				w := window(start, size)
				if err := expireWindow(x, n, o, w, key, b, start+size-1, func() error {
					return emitFinal(x, n, st, key, b, w, start+size-1, c, p, o)
				}); err != nil {
					return err
				}
			}
		}
		if err := st.Delete(wk); err != nil {
			return storeFailed(x, n, err)
		}
		if err := st.Delete(ik); err != nil {
			return storeFailed(x, n, err)
		}
	}
	return nil
}

// emitFinal emits the final result of window w of key, encoded as b in
// st, at ts, as an output of the record from o.
func emitFinal[A any](x graph.Exec, n *Node, st *store.Store, key, b []byte, w Window, ts int64, c codec.Codec[A], p *port[Windowed[A]], o origin) error {
	v, err := c.Decode(b)
	if err != nil {
		return &NodeError{Node: n.name, Err: codecError(st, "decode value", key, err)}
	}
	return p.push(x, Record[Windowed[A]]{Key: key, Value: Windowed[A]{Window: w, Value: v},
		Timestamp: time.UnixMilli(ts), Topic: o.topic, Partition: o.partition, Offset: o.offset})
}
