package processor

import (
	"fmt"
	"time"
)

// TimerKind says which clock drives a timer, as Kafka Streams'
// PunctuationType does.
type TimerKind int

// The timer kinds. The zero value is none, so that a forgotten kind is an
// error rather than a guess.
const (
	// StreamTime timers follow event time: the task's stream time (the
	// highest timestamp among the task's records so far) passing a
	// multiple of the interval fires the timer, right after the record
	// that moved it there. Without records, stream time stands still.
	StreamTime TimerKind = iota + 1
	// WallClock timers follow the system clock: they fire every interval
	// while the instance owns the task, records or not.
	WallClock
)

// String names the kind as Describe and errors print it.
func (k TimerKind) String() string {
	switch k {
	case StreamTime:
		return "stream-time"
	case WallClock:
		return "wall-clock"
	}
	return fmt.Sprintf("TimerKind(%d)", int(k))
}

// TimerFunc is a timer's callback, Kafka Streams' Punctuator. It runs once
// per task (input partition) of its node each time the timer fires, with
// a Context like Process gets: ctx.Store is the task's store, and Emit and
// EmitTo feed the node's children. Records it emits carry the task's topic
// and partition; their Offset is the offset of the record that moved
// stream time (StreamTime) or -1 (WallClock), and a zero Timestamp becomes
// now. now is the task's stream time (StreamTime) or the wall-clock time
// (WallClock). An error goes to the node's error policy; see Schedule.
type TimerFunc[Out any] func(ctx Context[Out], now time.Time) error

// Schedule makes fn fire for every task of the node, every interval of
// the kind's clock, for as long as the pipeline runs; call it from Init,
// with the InitContext Init got. The node needs topology.Timers() among
// its options: that store keeps, per task, what the timers need to fire
// exactly once (the task's stream time, each wall-clock timer's last
// firing), committed in the same transactions as the node's outputs.
//
// A firing's emits and store writes belong to a batch's transaction: they
// commit with the batch's input offsets, or are undone with it, and a
// batch redone after an abort fires the timer again. So, relative to what
// committed, no firing is lost or repeated across crashes, aborts and
// rebalances:
//
//   - StreamTime: a timer fires once each time the task's stream time
//     moves from one multiple of interval past the next (a record that
//     jumps several multiples fires it once, as in Kafka Streams), right
//     after that record is processed, in that record's batch. Stream time
//     is kept in the timer store, so it advances only with committed
//     records; a task's first record sets it without firing.
//   - WallClock: a timer fires when interval has passed since its last
//     committed firing for the task (at once for a task that never fired),
//     at the end of a batch; an instance with no input begins a
//     transaction to fire it. Under exactly-once a task fires once its
//     partition has a committed offset (its first records committed):
//     that offset fences the transaction by the group's generation, and
//     shows the client still holds the task. Intervals missed while the
//     task was down or elsewhere fire once.
//
// Timers are per node, not per task: the runtime fires them for each task
// the instance owns; a revoked task's timers stop, and its next owner
// carries on from the committed state. There is no cancel: whether a task's
// timer fired is committed state, and a cancel outside a transaction
// would depend on which instance ran the task; keep a flag in a store and
// return early instead.
//
// A failing callback, or a node it feeds that fails, is settled by the
// failing node's final policy after retries: Fail aborts the batch and
// stops Run with a *TimerError; Skip drops the firing (its emits and store
// writes) and goes on. A timer has no input record to dead-letter, so
// DeadLetter drops it as Skip does, logged.
//
// interval must be a positive whole number of milliseconds (the resolution
// of Kafka timestamps). The callback's type must match the node's output
// type; Schedule reports a mismatch.
func Schedule[Out any](ctx InitContext, kind TimerKind, interval time.Duration, fn TimerFunc[Out]) error {
	s, ok := ctx.(scheduler)
	if !ok {
		return fmt.Errorf("processor: Schedule needs the InitContext the runtime passes to Init (got %T); call it from your Processor's Init", ctx)
	}
	switch {
	case kind != StreamTime && kind != WallClock:
		return fmt.Errorf("processor: Schedule on node %q: unknown timer kind %v; pass processor.StreamTime or processor.WallClock", ctx.Node(), kind)
	case interval < time.Millisecond || interval%time.Millisecond != 0:
		return fmt.Errorf("processor: Schedule on node %q: interval %s must be a positive whole number of milliseconds, the resolution of Kafka timestamps", ctx.Node(), interval)
	case fn == nil:
		return fmt.Errorf("processor: Schedule on node %q: nil callback", ctx.Node())
	}
	return s.ScheduleTimer(kind, interval, fn)
}

// scheduler is implemented by the InitContext the runtime passes, so that
// Schedule can register timers without the runtime's types in this
// package. fn is a TimerFunc of the node's output type.
type scheduler interface {
	ScheduleTimer(kind TimerKind, interval time.Duration, fn any) error
}

// TimerError is a timer firing that failed under the Fail policy. It names
// the node that scheduled the timer and the task it fired for, so an
// operator can find them; the runtime aborts the open transaction and
// stops.
type TimerError struct {
	Node      string // the node that scheduled the timer
	Kind      TimerKind
	Interval  time.Duration
	Topic     string // the task: its input topic and partition
	Partition int32
	Err       error // usually a *topology.NodeError naming the node that failed
}

// Error names the timer and its task.
func (e *TimerError) Error() string {
	return fmt.Sprintf("%s timer every %s of node %q, task %s/%d: %v", e.Kind, e.Interval, e.Node, e.Topic, e.Partition, e.Err)
}

// Unwrap exposes the node's error.
func (e *TimerError) Unwrap() error { return e.Err }
