package graph

import "time"

// Timer is one timer a node scheduled in its Init (processor.Schedule).
type Timer struct {
	WallClock bool // else stream time
	Interval  time.Duration
	// Fire runs the callback for one task and passes what it emitted
	// on, as a node call does for a record.
	Fire func(x Exec, t Tick) error
}

// Tick is one firing of a timer for one task.
type Tick struct {
	Now       time.Time // stream time, or wall-clock time
	Topic     string    // the task
	Partition int32
	Offset    int64 // the record that moved stream time; -1 for wall clock
}

// Timed is implemented by the slot (what Init returned) of a node that
// scheduled timers: store is the node's timer store, which keeps per task
// the stream time and the wall-clock timers' last firings.
type Timed interface {
	Timers() (store string, timers []Timer)
}
