package eos_test

import (
	"context"
	"errors"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/eosflow/eosflow/codec"
	"github.com/eosflow/eosflow/config"
	"github.com/eosflow/eosflow/state"
	"github.com/eosflow/eosflow/tools/conformance"
	"github.com/eosflow/eosflow/tools/kafkatest"
	"github.com/eosflow/eosflow/topology"
)

// ordersJoin outer-joins orders with payments into "matched" under
// policy, calling fn for an order that expires unmatched.
func ordersJoin(policy topology.ErrorPolicy, fn func(ctx context.Context, o string) (string, error)) *topology.Topology {
	top := topology.New()
	orders := topology.Source(top, "orders", codec.String())
	payments := topology.Source(top, "payments", codec.String())
	matched := topology.OuterJoinStreams(orders, payments, "match", topology.Within(10*time.Second).Grace(5*time.Second),
		func(ctx context.Context, _ []byte, o, p string, hasO, hasP bool) (string, error) {
			if hasO && !hasP {
				return fn(ctx, o)
			}
			return o + "+" + p, nil
		}, state.Memory(), codec.String(), codec.String())
	topology.To(matched, "matched", codec.String(), topology.Named("out"))
	top.OnError("match", policy)
	return top
}

// matchedPairs drains n records of "matched" as sorted key=value.
func matchedPairs(t *testing.T, env *kafkatest.Env, n int) []string {
	t.Helper()
	var got []string
	for _, r := range conformance.Drain(t, env, "matched", n) {
		got = append(got, string(r.Key)+"="+string(r.Value))
	}
	slices.Sort(got)
	return got
}

// In the runtime, an outer join's unmatched record whose function fails
// under Skip is dropped alone, counted once as a skipped expiry; the
// record that expired it and those after it join as usual.
func TestUnmatchedRecordSkippedByTheRuntime(t *testing.T) {
	env := kafkatest.Fake(t)
	env.CreateTopics(t, 1, "orders", "payments", "matched")
	top := ordersJoin(topology.Skip(), func(context.Context, string) (string, error) {
		return "", errors.New("no payment")
	})
	x := conformance.Start(t, env.Config("app", "a", config.ExactlyOnce), top)
	cl := env.Client(t)
	produceAt(t, cl, "orders", 10, "o1", "bad")
	produceAt(t, cl, "payments", 12, "o2", "pay2")
	produceAt(t, cl, "orders", 13, "o2", "order2")
	x.WaitCommitted(t, 3, 60*time.Second)
	produceAt(t, cl, "orders", 40, "t1", "tick")
	produceAt(t, cl, "orders", 41, "o3", "order3")
	produceAt(t, cl, "payments", 42, "o3", "pay3")
	x.WaitCommitted(t, 6, 60*time.Second)

	if got, want := matchedPairs(t, env, 2), []string{"o2=order2+pay2", "o3=order3+pay3"}; !slices.Equal(got, want) {
		t.Fatalf("matched %v, want %v", got, want)
	}
	if s := x.R.Stats(); s.ExpiriesSkipped != 1 || s.Skipped != 0 || s.DeadLettered != 0 || s.RecordsIn != 6 {
		t.Fatalf("Stats %+v: want one expiry skipped and no input record skipped", s)
	}
}

// A shutdown while an unmatched record is being emitted interrupts the
// record that expired it: no policy applies (nothing is dead-lettered),
// the batch is not committed, and the unmatched record stays in the
// join's store, emitted once by the next run.
func TestUnmatchedEmissionInterruptedByShutdown(t *testing.T) {
	env := kafkatest.Fake(t)
	env.CreateTopics(t, 1, "orders", "payments", "matched", "match-dlq")
	var blocking atomic.Bool
	blocking.Store(true)
	entered := make(chan struct{}, 1)
	top := ordersJoin(topology.DeadLetter("match-dlq"), func(ctx context.Context, o string) (string, error) {
		if !blocking.Load() {
			return o + "+", nil
		}
		select {
		case entered <- struct{}{}:
		default:
		}
		<-ctx.Done()
		return "", ctx.Err()
	})
	cfg := env.Config("app", "a", config.ExactlyOnce)
	x := conformance.Start(t, cfg, top)
	cl := env.Client(t)
	produceAt(t, cl, "orders", 10, "o1", "lonely")
	x.WaitCommitted(t, 1, 60*time.Second)
	produceAt(t, cl, "orders", 40, "t1", "tick")
	select {
	case <-entered:
	case <-time.After(60 * time.Second):
		t.Fatal("the unmatched record's emission never began")
	}
	x.Stop()
	if err := x.Wait(t, 60*time.Second); err != nil {
		t.Fatalf("Run: %v, want a clean stop", err)
	}
	if s := x.R.Stats(); s.RecordsIn != 1 || s.ExpiriesSkipped+s.ExpiriesDeadLettered != 0 || s.DeadLettered+s.Skipped != 0 {
		t.Fatalf("Stats %+v: want only o1 committed and nothing settled", s)
	}

	blocking.Store(false)
	y := conformance.Start(t, cfg, top)
	y.WaitCommitted(t, 1, 60*time.Second)
	if got, want := matchedPairs(t, env, 1), []string{"o1=lonely+"}; !slices.Equal(got, want) {
		t.Fatalf("matched %v, want %v: the unmatched record once, from the second run", got, want)
	}
	if dls := conformance.Drain(t, env, "match-dlq", 0); len(dls) != 0 {
		t.Fatalf("dead letters %v, want none: an interrupted emission goes through no policy", dls)
	}
}
