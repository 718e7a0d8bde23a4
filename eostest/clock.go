package eostest

import (
	"cmp"
	"slices"
	"strings"
	"time"

	"github.com/eosflow/eosflow/internal/store"

	"github.com/eosflow/eosflow/state"
)

// AdvanceWallClock moves the wall clock on by by, firing the wall-clock
// timers (processor.WallClock) due on the way, each at the time it is
// due, in time order (tasks in topic and partition order at equal times),
// as a runtime that never falls behind would. Each task's firings are a
// batch of their own, and the records they feed back are taken before
// the next firing. A task's timers fire only once it has taken a record
// (under exactly-once a task fires once its partition has a committed
// offset), and a timer that never fired for a task is due at once, so
// AdvanceWallClock(0) fires those. A firing that fails under the Fail
// policy aborts its batch and ends the advance with its
// *processor.TimerError; the clock still moves on by by, and the timer,
// still due, fires at the next advance.
func (d *Driver) AdvanceWallClock(by time.Duration) error {
	d.helper()
	d.usable("AdvanceWallClock")
	if by < 0 {
		d.failf("AdvanceWallClock(%s): the wall clock does not go back", by)
	}
	if d.inBatch {
		d.failf("AdvanceWallClock inside a Batch: timers fire in batches of their own here")
	}
	target := d.now.Add(by)
	defer func() { d.now = target }()
	for {
		task, due, ok, err := d.nextDue(target)
		if err != nil || !ok {
			return err
		}
		d.now = due
		_, outcome, err := d.eng.WallClock(task, due, d.beginFn, d.emitFn, d.doneFn)
		if err := join(d.finish(settled(outcome, err)), d.drain()); err != nil {
			return err
		}
	}
}

// nextDue finds the task whose wall-clock timers are due first, at or
// before until: due is when, never before now.
func (d *Driver) nextDue(until time.Time) (task state.Task, due time.Time, ok bool, err error) {
	for _, t := range d.timerTasks() {
		next, has, err := d.eng.NextWallClock(t, func(name string) (*store.Store, error) { return d.st.get(name, t) })
		if err != nil {
			return task, due, false, err
		}
		if !has {
			continue
		}
		next = later(next, d.now)
		if next.After(until) || ok && !next.Before(due) {
			continue
		}
		task, due, ok = t, next, true
	}
	return task, due, ok, nil
}

// timerTasks lists, in order, the tasks with wall-clock timers that have
// taken a record.
func (d *Driver) timerTasks() []state.Task {
	var out []state.Task
	for t := range d.consumed {
		if d.wallSources[t.Topic] {
			out = append(out, t)
		}
	}
	slices.SortFunc(out, func(a, b state.Task) int {
		return cmp.Or(strings.Compare(a.Topic, b.Topic), cmp.Compare(a.Partition, b.Partition))
	})
	return out
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
