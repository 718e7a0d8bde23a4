package engine

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"runtime/debug"
	"time"

	"github.com/eosflow/eosflow/internal/store"

	"github.com/eosflow/eosflow/internal/graph"
	"github.com/eosflow/eosflow/processor"
	"github.com/eosflow/eosflow/state"
	"github.com/eosflow/eosflow/topology"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"
)

// The keys of a timer store (topology.TimerStore), each value 8 bytes of
// big-endian milliseconds:
//
//	s              the task's stream time
//	w | uint32(i)  the last firing of the node's timer i, a wall-clock one
var streamTimeKey = []byte("s")

func wallKey(i int) []byte { return binary.BigEndian.AppendUint32([]byte{'w'}, uint32(i)) }

// timerNode is a node that scheduled timers, and where its state lives.
type timerNode struct {
	node   int
	store  string
	source string // the topic whose partitions are the store's tasks
	timers []graph.Timer
	stream bool // has stream-time timers
	wall   bool // has wall-clock timers
}

// timerNodes are the nodes with timers, found once after Start.
type timerNodes struct {
	found bool
	nodes []timerNode
}

// timerNodes lists the nodes whose Init scheduled timers, in topology
// order.
func (e *Engine) timerNodes() []timerNode {
	if e.timers.found || !e.started {
		return e.timers.nodes
	}
	e.timers.found = true
	for i, slot := range e.slots {
		td, ok := slot.(graph.Timed)
		if !ok {
			continue
		}
		store, timers := td.Timers()
		if len(timers) == 0 {
			continue
		}
		tn := timerNode{node: i, store: store, timers: timers}
		for _, s := range e.g.Stores {
			if s.Name == store {
				tn.source = s.Source
			}
		}
		for _, t := range timers {
			tn.stream = tn.stream || !t.WallClock
			tn.wall = tn.wall || t.WallClock
		}
		e.timers.nodes = append(e.timers.nodes, tn)
	}
	return e.timers.nodes
}

// WallClockSources lists the topics whose tasks have wall-clock timers:
// the runtime fires them for the partitions of these it owns.
func (e *Engine) WallClockSources() []string {
	var out []string
	for _, tn := range e.timerNodes() {
		if tn.wall {
			out = append(out, tn.source)
		}
	}
	return out
}

// HasStreamTimers reports whether any node scheduled a stream-time timer.
func (e *Engine) HasStreamTimers() bool {
	for _, tn := range e.timerNodes() {
		if tn.stream {
			return true
		}
	}
	return false
}

// StreamTime advances the stream time of r's task, for each node with
// stream-time timers fed by r's topic, to r's timestamp if that is later,
// and fires each of those timers whose interval's multiple the stream
// time passed (once, however many it passed). The runtime calls it after
// r was processed, dead-lettered or skipped, so that its batch commits
// the new stream time; a record without a timestamp leaves it be. Each
// step runs as a record does, with begin, out and done as in Flush: the
// stream time's write is one step, each firing another, so a firing the
// node's policy skips leaves stream time advanced. Failed and Interrupted
// mean the batch must abort (a firing's outcome is part of the batch).
func (e *Engine) StreamTime(r *kgo.Record, begin func(in *kgo.Record) context.Context, out func(*kgo.Record), done func(Outcome)) (Outcome, error) {
	if r.Timestamp.IsZero() || r.Timestamp.UnixMilli() < 0 {
		return Processed, nil
	}
	ts := r.Timestamp.UnixMilli()
	nodes := e.timerNodes()
	for i := range nodes {
		tn := &nodes[i]
		if !tn.stream || tn.source != r.Topic {
			continue
		}
		e.timerTask(begin(r), r)
		st, err := e.Store(tn.store)
		var old int64
		var found bool
		if err == nil {
			old, found, err = readMillis(st, streamTimeKey)
		}
		if err == nil && (!found || ts > old) {
			err = st.Put(streamTimeKey, binary.BigEndian.AppendUint64(nil, uint64(ts)))
		}
		if err != nil {
			done(Failed)
			return Failed, e.timerError(tn, tn.timers[0], r.Topic, r.Partition, &topology.NodeError{Node: e.g.Nodes[tn.node].Name, Err: err})
		}
		done(Processed)
		if !found || ts <= old {
			continue // a task's first record sets stream time without firing
		}
		for j, t := range tn.timers {
			iv := t.Interval.Milliseconds()
			if t.WallClock || old/iv == ts/iv {
				continue
			}
			tick := graph.Tick{Now: time.UnixMilli(ts), Topic: r.Topic, Partition: r.Partition, Offset: r.Offset}
			if outcome, err := e.fire(tn, j, tick, r, begin, out, done); outcome == Failed || outcome == Interrupted {
				return outcome, err
			}
		}
	}
	return Processed, nil
}

// NextWallClock is when the first wall-clock timer of task is due: a
// timer that never fired for the task is due at once, others an interval
// after their last firing. store gives the task's store of a name, as the
// batch sees it (or, between batches, as committed). ok is false when no
// node has wall-clock timers for task's topic.
func (e *Engine) NextWallClock(task state.Task, store func(name string) (*store.Store, error)) (next time.Time, ok bool, err error) {
	for _, tn := range e.timerNodes() {
		if !tn.wall || tn.source != task.Topic {
			continue
		}
		st, err := store(tn.store)
		if err != nil {
			return time.Time{}, false, err
		}
		for j, t := range tn.timers {
			if !t.WallClock {
				continue
			}
			last, found, err := readMillis(st, wallKey(j))
			if err != nil {
				return time.Time{}, false, err
			}
			due := time.Time{} // at once
			if found {
				due = time.UnixMilli(last).Add(t.Interval)
			}
			if !ok || due.Before(next) {
				next, ok = due, true
			}
		}
	}
	return next, ok, nil
}

// WallClock fires the wall-clock timers of task that are due at now (see
// NextWallClock), node by node in topology order, each in the order its
// node scheduled them. Each firing first records now as the timer's last
// firing, as a step of its own, so that a firing the node's policy skips
// is not due again at once; begin, out and done are as in Flush, and in
// is what begin gets: a record of the task at offset -1. It returns how
// many timers fired; Failed and Interrupted mean the batch must abort.
func (e *Engine) WallClock(task state.Task, now time.Time, begin func(in *kgo.Record) context.Context, out func(*kgo.Record), done func(Outcome)) (int, Outcome, error) {
	in := &kgo.Record{Topic: task.Topic, Partition: task.Partition, Offset: -1, Timestamp: now}
	fired := 0
	nodes := e.timerNodes()
	for i := range nodes {
		tn := &nodes[i]
		if !tn.wall || tn.source != task.Topic {
			continue
		}
		for j, t := range tn.timers {
			if !t.WallClock {
				continue
			}
			e.timerTask(begin(in), in)
			st, err := e.Store(tn.store)
			var last int64
			var found bool
			if err == nil {
				last, found, err = readMillis(st, wallKey(j))
			}
			due := !found || !now.Before(time.UnixMilli(last).Add(t.Interval))
			if err == nil && due {
				err = st.Put(wallKey(j), binary.BigEndian.AppendUint64(nil, uint64(now.UnixMilli())))
			}
			if err != nil {
				done(Failed)
				return fired, Failed, e.timerError(tn, t, task.Topic, task.Partition, &topology.NodeError{Node: e.g.Nodes[tn.node].Name, Err: err})
			}
			done(Processed)
			if !due {
				continue
			}
			fired++
			tick := graph.Tick{Now: now, Topic: task.Topic, Partition: task.Partition, Offset: -1}
			if outcome, err := e.fire(tn, j, tick, in, begin, out, done); outcome == Failed || outcome == Interrupted {
				return fired, outcome, err
			}
		}
	}
	return fired, Processed, nil
}

// timerTask makes the task of in the current one, with ctx as the
// context user code sees, and starts a step: nothing is pending.
func (e *Engine) timerTask(ctx context.Context, in *kgo.Record) {
	e.setTask(ctx, in)
	e.dropOutputs()
	e.hold.begin()
}

// fire runs timer j of tn for one task as a step of its own, and settles
// a failure by the failing node's final policy.
func (e *Engine) fire(tn *timerNode, j int, tick graph.Tick, in *kgo.Record, begin func(*kgo.Record) context.Context, out func(*kgo.Record), done func(Outcome)) (Outcome, error) {
	ctx := begin(in)
	if context.Cause(ctx) == ErrDoomed {
		done(Interrupted)
		return Interrupted, nil
	}
	e.timerTask(ctx, in)
	t := tn.timers[j]
	err := e.runTimer(t, tick)
	e.tally.TimerFirings++ // taken with the batch, which counts it only if it commits
	if err == nil {
		e.passOutputs(out)
		e.hold.keep(len(e.g.Nodes))
		done(Processed)
		return Processed, nil
	}
	e.hold.begin()
	var ne *topology.NodeError
	if expiryFailed(err) || !errors.As(err, &ne) {
		done(Failed)
		return Failed, e.timerError(tn, t, tick.Topic, tick.Partition, err)
	}
	fields := []zap.Field{zap.String("node", ne.Node), zap.Error(ne.Err), zap.String("timer_node", e.g.Nodes[tn.node].Name),
		zap.Stringer("kind", kindOf(t)), zap.Duration("interval", t.Interval), zap.String("topic", tick.Topic), zap.Int32("partition", tick.Partition)}
	if ctx.Err() != nil && ne.Stack == nil {
		e.log.Debug("timer firing interrupted: its context ended", fields...)
		done(Interrupted)
		return Interrupted, nil
	}
	policy := e.g.Default
	if i := e.nodeIndex(ne.Node); i >= 0 {
		policy = e.g.Nodes[i].Policy
	}
	switch policy.Final().Kind {
	case graph.PolicySkip, graph.PolicyDeadLetter:
		// A timer has no input record to dead-letter.
		e.log.Warn("timer firing skipped", fields...)
		done(Skipped)
		return Skipped, nil
	}
	done(Failed)
	return Failed, e.timerError(tn, t, tick.Topic, tick.Partition, ne)
}

// runTimer turns a panic in user code into a NodeError carrying the stack.
func (e *Engine) runTimer(t graph.Timer, tick graph.Tick) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = &topology.NodeError{Node: e.currentName(), Err: fmt.Errorf("panic: %v", v), Stack: debug.Stack()}
		}
	}()
	return t.Fire(e, tick)
}

func kindOf(t graph.Timer) processor.TimerKind {
	if t.WallClock {
		return processor.WallClock
	}
	return processor.StreamTime
}

func (e *Engine) timerError(tn *timerNode, t graph.Timer, topic string, partition int32, err error) error {
	return &processor.TimerError{Node: e.g.Nodes[tn.node].Name, Kind: kindOf(t), Interval: t.Interval, Topic: topic, Partition: partition, Err: err}
}

// readMillis reads an 8-byte millisecond value of a timer store.
func readMillis(st *store.Store, key []byte) (int64, bool, error) {
	b, ok, err := st.Get(key)
	if err != nil || !ok {
		return 0, false, err
	}
	if len(b) != 8 {
		return 0, false, fmt.Errorf("timer store %q holds %d bytes under key %q, want 8; it was written by something other than the runtime", st.Name(), len(b), key)
	}
	return int64(binary.BigEndian.Uint64(b)), true, nil
}
