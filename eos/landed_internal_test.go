package eos

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Settling a commit whose answer was lost asks the group's offsets until
// they say, up to its timeout; Close must not wait that out. With offsets
// below what this process committed (a commit reported committed that
// ended aborted) the group never says, and Close waited 14 s for Run.
func TestSettlingALostCommitEndsWithRun(t *testing.T) {
	fake, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "in"))
	if err != nil {
		t.Fatal(err)
	}
	defer fake.Close()
	r := upperRunner(t)
	if r.admin, err = kgo.NewClient(kgo.SeedBrokers(fake.ListenAddrs()...)); err != nil {
		t.Fatal(err)
	}
	defer r.admin.Close()
	at := make(kadm.Offsets)
	at.Add(kadm.Offset{Topic: "in", Partition: 0, At: 10, LeaderEpoch: -1})
	if err := kadm.NewClient(r.admin).CommitAllOffsets(context.Background(), "app", at); err != nil {
		t.Fatal(err)
	}
	offsets := map[string]map[int32]kgo.EpochOffset{"in": {0: {Offset: 50}}}
	r.floor.raise(offsets) // the group answers 10, below the floor: no answer
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	start := time.Now()
	landed, err := r.loop.landed(ctx, offsets, time.Minute)
	if landed || !errors.Is(err, errBelowFloor) && !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("landed %v, %v; want no answer (offsets below the floor)", landed, err)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Fatalf("landed returned %v after its context ended at 500ms; its timeout is a minute", took)
	}
}
