package eos_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/eosflow/eosflow/config"
	"github.com/eosflow/eosflow/state"
	"github.com/eosflow/eosflow/tools/conformance"
	"github.com/eosflow/eosflow/tools/kafkatest"
	"github.com/twmb/franz-go/pkg/kgo"
)

const idleUsers, idleClicks = 10, 200

// idleJoin starts a stream-table join of clicks with profiles (one
// partition each) under maxTaskIdle, after producing every click, each
// later (by its timestamp) than every profile, which are not produced yet.
func idleJoin(t *testing.T, maxTaskIdle time.Duration) (*kafkatest.Env, *conformance.Run) {
	env := kafkatest.Fake(t)
	env.CreateTopics(t, 1, "clicks", "profiles", "out")
	base := time.Now().Add(-time.Hour)
	var recs []*kgo.Record
	for i := range idleClicks {
		recs = append(recs, &kgo.Record{Topic: "clicks", Key: fmt.Appendf(nil, "u%d", i%idleUsers),
			Value: fmt.Appendf(nil, "c%d", i), Timestamp: base.Add(time.Minute + time.Duration(i)*time.Millisecond)})
	}
	produceAll(t, env, recs)
	cfg := env.Config("app", "a", config.ExactlyOnce)
	cfg.StateDir = t.TempDir()
	cfg.MaxTaskIdle = maxTaskIdle
	return env, conformance.Start(t, cfg, conformance.JoinTopology("clicks", "profiles", "out", state.Memory()))
}

// produceProfiles writes every user's profile, timestamped before every click.
func produceProfiles(t *testing.T, env *kafkatest.Env) {
	base := time.Now().Add(-time.Hour)
	var recs []*kgo.Record
	for u := range idleUsers {
		recs = append(recs, &kgo.Record{Topic: "profiles", Key: fmt.Appendf(nil, "u%d", u), Value: fmt.Appendf(nil, "p%d", u), Timestamp: base})
	}
	produceAll(t, env, recs)
}

func produceAll(t *testing.T, env *kafkatest.Env, recs []*kgo.Record) {
	t.Helper()
	if err := env.Client(t).ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

// readOut reads topic read_committed for d, or until it has want records.
func readOut(t *testing.T, env *kafkatest.Env, topic string, want int, d time.Duration) []string {
	t.Helper()
	cl := env.Client(t, kgo.ConsumeTopics(topic), kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	var got []string
	for len(got) < want && ctx.Err() == nil {
		cl.PollFetches(ctx).EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
	}
	return got
}

// A join's task whose table partition has nothing fetched yet holds its
// clicks back, up to max_task_idle: the profiles produced meanwhile, older
// than every click, are processed first, and every click is joined.
// Without the wait the clicks find no profile, and the inner join drops
// them all.
func TestTaskIdleWaitsForTheEmptyPartition(t *testing.T) {
	env, x := idleJoin(t, 15*time.Second)
	conformance.Until(t, 10*time.Second, "the task waits for profiles", func() bool { return x.R.Stats().TaskIdleWaits > 0 })
	time.Sleep(300 * time.Millisecond) // several batches wait
	if s := x.R.Stats(); s.RecordsIn != 0 {
		t.Fatalf("clicks processed while the task waited: %+v", s)
	}
	produceProfiles(t, env)
	x.WaitCommitted(t, idleClicks+idleUsers, 10*time.Second)
	got := readOut(t, env, "out", idleClicks, 5*time.Second)
	if len(got) != idleClicks {
		t.Fatalf("%d clicks joined, want all %d: %v", len(got), idleClicks, got)
	}
	seen := map[string]bool{}
	for _, v := range got {
		if !strings.Contains(v, " by p") {
			t.Fatalf("output %q not joined with a profile", v)
		}
		if seen[v] {
			t.Fatalf("output %q twice", v)
		}
		seen[v] = true
	}
	if s := x.R.Stats(); s.TaskIdleEnforced != 0 {
		t.Fatalf("the wait ran out: %+v", s)
	}
}

// With a negative max_task_idle the task never waits: the clicks are
// processed at once, find no profile, and are dropped.
func TestTaskIdleNegativeNeverWaits(t *testing.T) {
	env, x := idleJoin(t, -time.Millisecond)
	x.WaitCommitted(t, idleClicks, 10*time.Second)
	produceProfiles(t, env)
	x.WaitCommitted(t, idleClicks+idleUsers, 10*time.Second)
	if got := readOut(t, env, "out", 1, time.Second); len(got) != 0 {
		t.Fatalf("%d clicks joined, want none: %v", len(got), got)
	}
	if s := x.R.Stats(); s.TaskIdleWaits != 0 || s.TaskIdleEnforced != 0 {
		t.Fatalf("the task waited: %+v", s)
	}
}

// A wait is bounded by max_task_idle: past it the task processes what it
// has, and counts that.
func TestTaskIdleWaitRunsOut(t *testing.T) {
	_, x := idleJoin(t, 500*time.Millisecond)
	start := time.Now()
	x.WaitCommitted(t, idleClicks, 10*time.Second)
	s := x.R.Stats()
	if s.TaskIdleWaits == 0 || s.TaskIdleEnforced == 0 {
		t.Fatalf("no wait ran out: %+v", s)
	}
	t.Logf("clicks processed %s after start; %+v", time.Since(start).Round(time.Millisecond), s)
}

// A batch that holds every record back commits nothing. It ends without
// franz-go's 500 ms hold after a commit without offsets, which delayed the
// next batch's end: the task's held batches follow each other at about
// commit_interval. Under adaptive_commit such a batch still waits out the
// interval, rather than fetching the held records again at once.
func TestHeldBatchesFollowAtTheCommitInterval(t *testing.T) {
	for _, adaptive := range []bool{false, true} {
		t.Run(fmt.Sprintf("adaptive=%v", adaptive), func(t *testing.T) {
			t.Parallel()
			env := kafkatest.Fake(t)
			env.CreateTopics(t, 1, "clicks", "profiles", "out")
			produceAll(t, env, []*kgo.Record{{Topic: "clicks", Key: []byte("u0"), Value: []byte("c0")}})
			cfg := env.Config("app", "a", config.ExactlyOnce)
			cfg.StateDir = t.TempDir()
			cfg.MaxTaskIdle = time.Minute
			cfg.AdaptiveCommit = adaptive
			x := conformance.Start(t, cfg, conformance.JoinTopology("clicks", "profiles", "out", state.Memory()))
			conformance.Until(t, 10*time.Second, "the task holds its click", func() bool { return x.R.Stats().TaskIdleWaits > 0 })
			before, start := x.R.Stats().Committed, time.Now()
			time.Sleep(3 * time.Second)
			st := x.R.Stats()
			held := st.Committed - before
			if st.RecordsIn != 0 {
				t.Fatalf("the click was processed while its task waited: %+v", st)
			}
			// 3 s of 100 ms intervals: about 27 batches; with a 500 ms hold
			// after each, at most 6; with none, hundreds.
			if held < 7 || held > 45 {
				t.Fatalf("%d held batches in %s at a commit interval of %s; want about one per interval", held, time.Since(start).Round(time.Millisecond), cfg.CommitInterval)
			}
			t.Logf("%d held batches in %s", held, time.Since(start).Round(time.Millisecond))
		})
	}
}
