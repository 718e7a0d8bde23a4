package eos

import (
	"slices"
	"testing"

	"github.com/eosflow/eosflow/state"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Under exactly-once, wall-clock timers fire only for the tasks whose
// partition the client holds a committed offset for. franz-go's transact
// session passes on only the first revoke of a transaction: a task
// revoked by a second one stays among the runtime's own, and its firings,
// in transactions the group's generation check does not fence, repeated
// those of its new owner (seed 729 of the timer pipeline, 3 of 48
// replays).
func TestWallClockTimersFireOnlyForTasksTheClientHolds(t *testing.T) {
	// The runtime's view: tasks 0, 1 and 2 its own, caught up. The client
	// lost partition 1 in a revoke the session swallowed; partition 2 has
	// no commit yet.
	ready := []state.Task{{Topic: "in", Partition: 0}, {Topic: "in", Partition: 1}, {Topic: "in", Partition: 2}}
	held := map[string]map[int32]kgo.EpochOffset{"in": {0: {Epoch: -1, Offset: 7}}, "other": {1: {Epoch: -1, Offset: 3}}}
	tasks, offsets := heldTasks(ready, held)
	if want := []state.Task{{Topic: "in", Partition: 0}}; !slices.Equal(tasks, want) {
		t.Fatalf("timers fire for %v; want only %v, the task the client holds", tasks, want)
	}
	if o := offsets["in"][0]; o.Offset != 7 || len(offsets) != 1 || len(offsets["in"]) != 1 {
		t.Fatalf("fencing offsets %v; want partition 0's committed 7 alone", offsets)
	}
}
