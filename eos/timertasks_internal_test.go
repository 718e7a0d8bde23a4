package eos

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/eosflow/eosflow/codec"
	"github.com/eosflow/eosflow/config"
	"github.com/eosflow/eosflow/processor"
	"github.com/eosflow/eosflow/state"
	"github.com/eosflow/eosflow/topology"
	"github.com/twmb/franz-go/pkg/kgo"
)

// wallTicker schedules a wall-clock timer that does nothing.
type wallTicker struct{}

func (wallTicker) Init(ctx processor.InitContext) error {
	return processor.Schedule(ctx, processor.WallClock, time.Second, func(processor.Context[[]byte], time.Time) error { return nil })
}
func (wallTicker) Process(processor.Context[[]byte], processor.Record[[]byte]) error { return nil }
func (wallTicker) Close() error                                                      { return nil }

// Wall-clock timers fire only for the tasks whose partition the client
// holds a committed offset for. franz-go's transact session passes on only
// the first revoke of a transaction: a task revoked by a second one stays
// among the runtime's own, and its firings, in transactions the group's
// generation check does not fence, repeated those of its new owner
// (seed 729 of the timer pipeline, 3 of 48 replays).
func TestWallClockTimersFireOnlyForTasksTheClientHolds(t *testing.T) {
	cfg := config.Default()
	cfg.Brokers, cfg.AppID, cfg.StateDir = []string{"127.0.0.1:9092"}, "app", t.TempDir()
	top := topology.New("ticks")
	ticks := topology.ProcessWith(topology.Source(top, "in", "in", codec.Bytes()), "tick",
		func() processor.Processor[[]byte, []byte] { return wallTicker{} }, topology.Timers())
	topology.To(ticks, "out", "out", codec.Bytes())
	r, err := New(cfg, top)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.proc.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.proc.Close() })
	// The runtime's view: both tasks its own, caught up. The client has
	// lost partition 1 in a revoke the session swallowed.
	r.state.assign(map[string][]int32{"in": {0, 1}})
	r.state.sync()
	for p := range int32(2) {
		r.state.ready[state.Task{Topic: "in", Partition: p}] = true
	}
	held := map[string]map[int32]kgo.EpochOffset{"in": {0: {Epoch: -1, Offset: 7}}}
	tasks, offsets := r.timerTasks(held)
	if want := []state.Task{{Topic: "in", Partition: 0}}; !slices.Equal(tasks, want) {
		t.Fatalf("timers fire for %v; want only %v, the task the client holds", tasks, want)
	}
	if o := offsets["in"][0]; o.Offset != 7 || len(offsets["in"]) != 1 {
		t.Fatalf("fencing offsets %v; want partition 0's committed 7 alone", offsets)
	}
}
