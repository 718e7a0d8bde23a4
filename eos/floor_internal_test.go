package eos

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/eosflow/eosflow/config"
	"github.com/twmb/franz-go/pkg/kgo"
)

// The floor is the latest offset this process committed on a partition,
// not the highest: a commit below an earlier one (the topic created again)
// is what the group holds, and must not make the next rejoin wait.
func TestOffsetFloorFollowsTheLatestCommit(t *testing.T) {
	var f offsetFloor
	if _, is := f.below("in", 0, -2); is {
		t.Fatal("a partition this process never committed has a floor")
	}
	f.raise(map[string]map[int32]kgo.EpochOffset{"in": {0: {Offset: 500}}})
	if floor, is := f.below("in", 0, -2); !is || floor != 500 {
		t.Fatalf("no offset below 500 after a commit at 500: floor %d, below %v", floor, is)
	}
	f.raise(map[string]map[int32]kgo.EpochOffset{"in": {0: {Offset: 20}}})
	if _, is := f.below("in", 0, 20); is {
		t.Fatal("the commit at 20 after one at 500 left the floor at 500")
	}
	// What the offsets mirror says only raises the floor.
	f.raiseTo(map[string]map[int32]kgo.EpochOffset{"in": {0: {Offset: 10}, 1: {Offset: 7}}})
	if floor, _ := f.below("in", 0, -2); floor != 20 {
		t.Fatalf("the mirror's 10 moved the floor from 20 to %d", floor)
	}
	if floor, is := f.below("in", 1, -2); !is || floor != 7 {
		t.Fatalf("the mirror's 7 set no floor on a new partition: floor %d, below %v", floor, is)
	}
}

// While adjustFetched waits for forgotten offsets, the stall check leaves
// that wait alone (a rebuild would only restart it) until recovery_timeout
// has passed since the wait began; then it stops Run with an
// *OffsetsBehindError.
func TestStallCheckLeavesForgottenOffsetsToTheirWait(t *testing.T) {
	r := &Runner{cfg: config.Config{AppID: "app", RecoveryTimeout: time.Minute}}
	r.stall = newStallCheck(r)
	r.floor.wait([]string{"in/0: none, committed 5"}, time.Minute)
	if err := r.stall.checkStall(context.Background(), time.Hour); err != nil {
		t.Fatalf("checkStall during the wait: %v", err)
	}
	r.floor.since = time.Now().Add(-2 * time.Minute)
	var behind *OffsetsBehindError
	if err := r.stall.checkStall(context.Background(), time.Hour); !errors.As(err, &behind) || behind.Partitions[0] != "in/0: none, committed 5" {
		t.Fatalf("checkStall past recovery_timeout: %v; want an *OffsetsBehindError naming in/0", err)
	}
	r.floor.answered()
	if behind, since, _ := r.floor.waiting(); len(behind) > 0 || !since.IsZero() {
		t.Fatal("an answer at the floor left the wait running")
	}
}

// A wait that a rebalance cut short goes on counting from its start when
// it resumes within a rebalance; one that resumes later (the partitions
// went to another member, and came back) starts over, so a pipeline is
// not stopped for an old wait that ended unseen.
func TestForgottenOffsetsWaitStartsOverAfterALongPause(t *testing.T) {
	var f offsetFloor
	first := f.wait([]string{"in/0"}, time.Minute)
	f.pause()
	if again := f.wait([]string{"in/0"}, time.Minute); !again.Equal(first) {
		t.Fatalf("a wait resumed at once started over at %v, want its start %v", again, first)
	}
	f.pause()
	f.paused = time.Now().Add(-2 * time.Minute)
	if again := f.wait([]string{"in/0"}, time.Minute); !again.After(first) {
		t.Fatalf("a wait resumed after a pause longer than a rebalance kept its start %v", first)
	}
}
