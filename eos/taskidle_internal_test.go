package eos

import (
	"testing"
	"time"

	"github.com/eosflow/eosflow/state"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
)

// At max_task_idle 0 a task waits only for a partition the broker is
// known to hold records of past those polled, and at most
// commit_interval; one offset past the last record (a transaction
// marker) is not taken for records.
func TestTaskIdleWaitsOnlyForKnownRecordsAtZero(t *testing.T) {
	for _, tc := range []struct {
		name          string
		polled, lso   int64
		wait, enforce bool
	}{
		{"caught up", 10, 10, false, false},
		{"a marker past the last record", 10, 11, false, false},
		{"records on the broker", 10, 50, true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var c counters
			ti := makeTaskIdle(0, 50*time.Millisecond, [][]string{{"clicks", "profiles"}}, zap.NewNop(), &c)
			last := &kgo.Record{Topic: "profiles", Offset: tc.polled - 1}
			ti.observe(kgo.FetchTopicPartition{Topic: "profiles", FetchPartition: kgo.FetchPartition{LastStableOffset: tc.lso, HighWatermark: tc.lso, Records: []*kgo.Record{last}}})
			click := &kgo.Record{Topic: "clicks"}
			task, now := state.Task{Topic: "clicks"}, time.Now()
			if got := ti.hold(task, [][]*kgo.Record{{click}}, now); got != tc.wait {
				t.Fatalf("hold = %v, want %v", got, tc.wait)
			}
			if ti.hold(task, [][]*kgo.Record{{click}}, now.Add(60*time.Millisecond)) {
				t.Fatal("still held past commit_interval")
			}
			if got := c.idleEnforced.Load() == 1; got != tc.enforce {
				t.Fatalf("enforced %d, want it counted: %v", c.idleEnforced.Load(), tc.enforce)
			}
			// Records of both partitions end the wait.
			if ti.hold(task, [][]*kgo.Record{{click}, {last}}, now.Add(time.Second)) || len(ti.since) != 0 {
				t.Fatal("a task with records on every partition waits")
			}
		})
	}
}

// A wait that lasts a second is logged at info, naming the partition, and
// so is its end when it runs out.
func TestTaskIdleLogsALongWait(t *testing.T) {
	core, logs := observer.New(zap.DebugLevel)
	var c counters
	ti := makeTaskIdle(3*time.Second, 0, [][]string{{"clicks", "profiles"}}, zap.New(core), &c)
	task, now := state.Task{Topic: "clicks"}, time.Now()
	runs := [][]*kgo.Record{{{Topic: "clicks"}}}
	for _, at := range []time.Duration{0, 1500 * time.Millisecond, 2 * time.Second} {
		if !ti.hold(task, runs, now.Add(at)) {
			t.Fatalf("not held %s into the wait", at)
		}
	}
	if ti.hold(task, runs, now.Add(3*time.Second)) {
		t.Fatal("held past max_task_idle")
	}
	info := logs.FilterLevelExact(zap.InfoLevel).FilterField(zap.String("topic", "profiles")).All()
	if len(info) != 2 || logs.FilterLevelExact(zap.DebugLevel).Len() != 1 {
		t.Fatalf("logged %v, want one debug line, then info at a second and at the end", logs.All())
	}
}

// A wait starts afresh after a rebalance or an aborted batch: what was
// known of the partitions is stale then. A wait that runs on keeps its
// start, whether or not the partition is known to lag.
func TestTaskIdleWaitsStartAfreshAfterARebalanceOrAnAbort(t *testing.T) {
	var c counters
	ti := makeTaskIdle(time.Second, 50*time.Millisecond, [][]string{{"clicks", "profiles"}}, zap.NewNop(), &c)
	task, click := state.Task{Topic: "clicks"}, &kgo.Record{Topic: "clicks"}
	start := time.Now()
	ti.newBatch(1, false)
	if !ti.hold(task, [][]*kgo.Record{{click}}, start) {
		t.Fatal("no wait for the empty partition")
	}
	ti.newBatch(1, false)
	if ti.hold(task, [][]*kgo.Record{{click}}, start.Add(2*time.Second)) || c.idleEnforced.Load() != 1 {
		t.Fatalf("a wait in the same generation did not keep its start: enforced %d", c.idleEnforced.Load())
	}
	for _, tc := range []struct {
		name    string
		gen     int32
		aborted bool
	}{{"a new generation", 2, false}, {"an aborted batch", 2, true}} {
		ti.newBatch(tc.gen, tc.aborted)
		if !ti.hold(task, [][]*kgo.Record{{click}}, start.Add(3*time.Second)) {
			t.Fatalf("%s: the wait did not start afresh", tc.name)
		}
	}
}

// Held records are rewound and come back in a later poll, so the
// partitions of a task can have records in turn: clicks alone, then
// profiles alone, and so on. The task's wait keeps its start through that
// and runs out at its bound; a wait per partition started afresh each
// time, and the task held its records for ever (a seeded fault schedule of
// the join pipeline found it).
func TestTaskIdleWaitRunsOutWhenPartitionsHaveRecordsInTurn(t *testing.T) {
	var c counters
	ti := makeTaskIdle(0, 50*time.Millisecond, [][]string{{"clicks", "profiles"}}, zap.NewNop(), &c)
	ti.newBatch(1, false)
	for _, topic := range []string{"clicks", "profiles"} {
		last := &kgo.Record{Topic: topic, Offset: 9}
		ti.observe(kgo.FetchTopicPartition{Topic: topic, FetchPartition: kgo.FetchPartition{LastStableOffset: 50, HighWatermark: 50, Records: []*kgo.Record{last}}})
	}
	task, start := state.Task{Topic: "clicks"}, time.Now()
	turns := [][]*kgo.Record{{{Topic: "clicks"}}, {{Topic: "profiles"}}}
	held := 0
	for i := range 20 {
		ti.newBatch(1, false)
		if !ti.hold(task, [][]*kgo.Record{turns[i%2]}, start.Add(time.Duration(i)*10*time.Millisecond)) {
			break
		}
		held++
	}
	if held != 5 || c.idleWaits.Load() != 1 || c.idleEnforced.Load() != 1 {
		t.Fatalf("held %d batches (want 5: the bound is 50ms, a batch 10ms), waits %d, enforced %d (want 1 each)",
			held, c.idleWaits.Load(), c.idleEnforced.Load())
	}
}

// Records held for a waiting task count against the batch's record and
// byte caps: the batch polls no more once they reach either.
func TestHeldRecordsCountAgainstTheCaps(t *testing.T) {
	rec := &kgo.Record{Topic: "clicks", Value: make([]byte, 100)}
	for _, tc := range []struct {
		name            string
		in, limit, held int
		bytes, maxBytes int64
		cut             bool
	}{
		{"room left", 2, 10, 3, 0, 0, false},
		{"the record cap", 5, 10, 5, 0, 0, true},
		{"the byte cap", 0, 1000, 3, 0, 300, true},
		{"room in bytes", 0, 1000, 2, 0, 300, false},
	} {
		b := &batch{in: tc.in, bytes: tc.bytes, maxBytes: tc.maxBytes, held: map[state.Task][][]*kgo.Record{}}
		run := make([]*kgo.Record, tc.held)
		for i := range run {
			run[i] = rec
		}
		b.held[state.Task{Topic: "clicks"}] = [][]*kgo.Record{run}
		b.capHeld(tc.limit)
		if b.cut.Load() != tc.cut {
			t.Errorf("%s: cut %v, want %v", tc.name, b.cut.Load(), tc.cut)
		}
	}
}
