package eos

import (
	"context"
	"errors"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/eosflow/eosflow/codec"
	"github.com/eosflow/eosflow/config"
	"github.com/eosflow/eosflow/internal/engine"
	"github.com/eosflow/eosflow/topology"
	"github.com/twmb/franz-go/pkg/kgo"
)

// franz-go's transact session passes on only the first revoke or loss
// after an End, and swallows the rest until the next End. A batch begun
// after such a callback (one that came between batches) would run user
// code through revokes it never hears of: it is doomed from its start,
// and the updates it would begin do not run.
func TestARevokeSinceTheLastEndDoomsTheBatch(t *testing.T) {
	r := upperRunner(t)
	ctx := context.Background()
	ended := func() {
		r.loop.revokesAtEnd, r.loop.flaggedAtEnd = r.contexts.callbacks.Load(), r.contexts.revokes.Load()
	}
	begun := func() *batch {
		b := r.loop.newBatch(ctx, &rewindSession{})
		t.Cleanup(b.stop)
		return b
	}
	cases := []struct {
		name     string
		callback func()
		doomed   bool
	}{
		{"nothing since the last End", func() {}, false},
		{"a revoke between batches", func() { r.onRevoked(ctx, nil, map[string][]int32{"in": {0}}) }, true},
		{"a loss of nothing (the session flags every loss)", func() { r.onLost(ctx, nil, map[string][]int32{}) }, true},
		{"an empty cooperative revoke (the session lets it pass)", func() { r.onRevoked(ctx, nil, map[string][]int32{}) }, false},
	}
	for _, c := range cases {
		ended()
		c.callback()
		b := begun()
		if b.revokedSince() != c.doomed {
			t.Fatalf("%s: doomed %v, want %v", c.name, b.revokedSince(), c.doomed)
		}
		uctx := b.beginUpdate(&kgo.Record{Topic: "in", Partition: 1})
		b.endUpdate(engine.Processed)
		if got := context.Cause(uctx) == engine.ErrDoomed; got != c.doomed {
			t.Fatalf("%s: an update begun in the batch is doomed: %v, want %v", c.name, got, c.doomed)
		}
	}
}

// Under exactly-once a revoke waits for the record in flight even when
// its partition stays (a later revoke of it would be swallowed), and
// cancels that record's context half way, as a revoked one's.
func TestARevokeWaitsForTheRecordInFlightOfAPartitionThatStays(t *testing.T) {
	var c recordContexts
	rec := &kgo.Record{Topic: "a", Partition: 1}
	uctx := c.start(rec)
	gone := map[string][]int32{"a": {0}}
	c.revoke(context.Background(), nil, gone)
	wait := c.withInFlight(gone)
	returned := make(chan struct{})
	go func() {
		c.await(wait, 400*time.Millisecond, "g", zap.NewNop())
		close(returned)
	}()
	select {
	case <-uctx.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("the record in flight was never cancelled")
	}
	select {
	case <-returned:
		t.Fatal("the revoke returned while the record of the partition that stays was in flight")
	default:
	}
	c.done()
	<-returned
	c.release()
	if next := c.of(&kgo.Record{Topic: "a", Partition: 1}); next.Err() != nil {
		t.Fatal("the partition stays assigned, but its next record got an ended context")
	}
}

// upperRunner is a Runner of the upper pipeline under exactly-once, never
// started: for the tests of its batch logic.
func upperRunner(t *testing.T) *Runner {
	t.Helper()
	cfg := config.Default()
	cfg.Brokers, cfg.AppID = []string{"127.0.0.1:9092"}, "app"
	top := topology.New()
	topology.To(topology.Source(top, "in", codec.Bytes()), "out", codec.Bytes())
	r, err := New(cfg, top)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// A batch a revoke doomed aborts as such: user code it interrupted (a
// timer, a held-back update) does not fail it into a new client, and
// BeforeCommit does not run for it; without the revoke, an interruption
// (a shutdown) rebuilds the client, and BeforeCommit runs.
func TestADoomedBatchAbortsWithoutARebuildOrBeforeCommit(t *testing.T) {
	r := upperRunner(t)
	var vetoes int
	r.loop.beforeEnd = func(context.Context, BatchInfo) error { vetoes++; return nil }
	ctx := context.Background()
	for _, revoke := range []bool{true, false} {
		r.loop.revokesAtEnd, r.loop.flaggedAtEnd = r.contexts.callbacks.Load(), r.contexts.revokes.Load()
		if revoke {
			r.onRevoked(ctx, nil, map[string][]int32{"in": {0}})
		}
		b := r.loop.newBatch(ctx, &rewindSession{})
		t.Cleanup(b.stop)
		vetoes = 0
		if commit := b.decide(); commit == revoke || vetoes != 1-boolInt(revoke) {
			t.Fatalf("revoke %v: decide %v with BeforeCommit run %d times", revoke, commit, vetoes)
		}
		if b.timerOutcome(engine.Interrupted, nil) {
			t.Fatalf("revoke %v: the batch goes on after an interrupted timer", revoke)
		}
		var rebuild *rebuildError
		if errors.As(b.failed, &rebuild) == revoke || b.revoked != revoke {
			t.Fatalf("revoke %v: failed %v, revoked %v after an interrupted timer", revoke, b.failed, b.revoked)
		}
	}
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}
