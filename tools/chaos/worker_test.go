package chaos

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/eosflow/eosflow/config"
	"github.com/eosflow/eosflow/tools/kafkatest"
	"github.com/eosflow/eosflow/tools/verdict"
	"github.com/eosflow/eosflow/topology"
	"github.com/twmb/franz-go/pkg/kgo"
)

func TestRunWorkerUpperCases(t *testing.T) {
	env := kafkatest.Fake(t)
	in, out := env.Name("in"), env.Name("out")
	env.CreateTopics(t, 3, in, out)
	const n = 2000
	if err := verdict.Seed(context.Background(), env.Client(t), in, n, 50, 16); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	var rep WorkerReport
	firstCommit := make(chan time.Duration, 2)
	started := time.Now().Add(-time.Second) // as if the process started a second ago
	go func() {
		var err error
		rep, err = RunWorker(ctx, WorkerOptions{Config: env.Config(env.Name("app"), "worker-0", config.ExactlyOnce), In: in, Out: out,
			Started: started, FirstCommit: func(d time.Duration) { firstCommit <- d }})
		done <- err
	}()
	dctx, dcancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer dcancel()
	recs, err := verdict.Drain(dctx, []kgo.Opt{kgo.SeedBrokers(env.Brokers...)}, out, n, 500*time.Millisecond)
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("worker stopped with %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	if v := verdict.Judge(n, recs); !v.OK() {
		t.Fatalf("verdict %s", v)
	}
	if string(recs[0].Value[:3]) != "ID=" {
		t.Fatalf("value %q was not upper-cased", recs[0].Value)
	}
	if rep.RecordsIn != n || rep.Committed == 0 || rep.Instance != "worker-0" || rep.Stopped != StopCancelled {
		t.Fatalf("report %+v", rep)
	}
	if len(firstCommit) != 1 {
		t.Fatalf("FirstCommit called %d times, want once", len(firstCommit))
	}
	d := <-firstCommit
	if d < time.Second || d > time.Since(started) || rep.FirstCommitMs != d.Milliseconds() {
		t.Fatalf("first commit after %s (report %dms): want it measured from Started, a second before RunWorker", d, rep.FirstCommitMs)
	}
}

// A worker that comes back to partitions already processed to the end
// has nothing to commit; it reports its wait over once it is in the group
// and caught up, so a restart late in a run is not measured as slow.
func TestRunWorkerCaughtUpEndsTheWait(t *testing.T) {
	env := kafkatest.Fake(t)
	in, out, app := env.Name("in"), env.Name("out"), env.Name("app")
	env.CreateTopics(t, 2, in, out)
	const n = 200
	if err := verdict.Seed(context.Background(), env.Client(t), in, n, 10, 16); err != nil {
		t.Fatal(err)
	}
	run := func(ctx context.Context, firstCommit chan time.Duration) (WorkerReport, error) {
		cfg := env.Config(app, "worker-0", config.ExactlyOnce)
		cfg.LeaveGroupOnClose = true
		return RunWorker(ctx, WorkerOptions{Config: cfg, In: in, Out: out,
			FirstCommit: func(d time.Duration) { firstCommit <- d }})
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { _, err := run(ctx, make(chan time.Duration, 1)); done <- err }()
	dctx, dcancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer dcancel()
	if _, err := verdict.Drain(dctx, []kgo.Opt{kgo.SeedBrokers(env.Brokers...)}, out, n, 500*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("first worker stopped with %v", err)
	}

	ctx, cancel = context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	firstCommit := make(chan time.Duration, 1)
	var rep WorkerReport
	go func() {
		var err error
		rep, err = run(ctx, firstCommit)
		done <- err
	}()
	select {
	case d := <-firstCommit:
		t.Logf("caught up %s after its start", d)
	case <-ctx.Done():
		t.Fatal("a worker with nothing left to process never said its wait was over")
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("second worker stopped with %v", err)
	}
	if rep.Committed != 0 || rep.RecordsIn != 0 || rep.FirstCommitMs == 0 {
		t.Fatalf("report %+v: want no batch, and the wait's end in first_commit_ms", rep)
	}
}

func TestRunWorkerInjectsAborts(t *testing.T) {
	env := kafkatest.Fake(t)
	in, out := env.Name("in"), env.Name("out")
	env.CreateTopics(t, 1, in, out)
	if err := verdict.Seed(context.Background(), env.Client(t), in, 100, 10, 16); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rep, err := RunWorker(ctx, WorkerOptions{
		Config: env.Config(env.Name("app"), "worker-0", config.ExactlyOnce), In: in, Out: out, AbortRate: 1,
	})
	if !errors.Is(err, ErrInjected) {
		t.Fatalf("error %v, want ErrInjected", err)
	}
	if rep.Aborted != 1 || rep.Committed != 0 || rep.Error == "" || rep.Stopped != StopInjected || rep.FirstCommitMs != 0 {
		t.Fatalf("report %+v, want one aborted batch, the error, stopped=injected and no first commit", rep)
	}
}

func TestRunWorkerRejectsBadAbortRate(t *testing.T) {
	rep, err := RunWorker(context.Background(), WorkerOptions{AbortRate: 2})
	if err == nil {
		t.Fatal("abort rate 2 accepted")
	}
	if rep.Stopped != StopError || rep.Error == "" {
		t.Fatalf("report %+v, want stopped=error and the error", rep)
	}
}

func TestStopReason(t *testing.T) {
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	live := context.Background()
	for _, tc := range []struct {
		name string
		ctx  context.Context
		err  error
		want StopReason
	}{
		{"cancelled", cancelled, nil, StopCancelled},
		{"injected", live, fmt.Errorf("batch: %w", ErrInjected), StopInjected},
		{"injected while stopping", cancelled, ErrInjected, StopInjected},
		{"real error", live, errors.New("eos: giving up"), StopError},
		{"real error while stopping", cancelled, errors.New("eos: fenced"), StopError},
		{"nil though not cancelled", live, errUnasked, StopError},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := stopReason(tc.ctx, tc.err); got != tc.want {
				t.Fatalf("stopReason = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestRunWorkerCounts(t *testing.T) {
	for _, st := range []StateKind{StateMemory, StatePebble} {
		for _, g := range []Grouping{GroupingKey, GroupingValue} {
			t.Run(string(st)+"/by-"+string(g), func(t *testing.T) {
				env := kafkatest.Fake(t)
				in, out := env.Name("in"), env.Name("out")
				env.CreateTopics(t, 3, in, out)
				const n, keys = 1500, 40
				seed := func() error { return verdict.Seed(context.Background(), env.Client(t), in, n, keys, 16) }
				if g == GroupingValue {
					seed = func() error { return verdict.SeedByValue(context.Background(), env.Client(t), in, n, keys) }
				}
				if err := seed(); err != nil {
					t.Fatal(err)
				}
				app := env.Name("app")
				cfg := env.Config(app, "worker-0", config.ExactlyOnce)
				cfg.StateDir = t.TempDir()
				ctx, cancel := context.WithCancel(context.Background())
				done := make(chan error, 1)
				var rep WorkerReport
				go func() {
					var err error
					rep, err = RunWorker(ctx, WorkerOptions{Config: cfg, In: in, Out: out, Pipeline: PipelineCount, State: st, GroupBy: g})
					done <- err
				}()
				base := []kgo.Opt{kgo.SeedBrokers(env.Brokers...)}
				dctx, dcancel := context.WithTimeout(context.Background(), 30*time.Second)
				defer dcancel()
				recs, err := verdict.Drain(dctx, base, out, n, 500*time.Millisecond)
				cancel()
				if werr := <-done; werr != nil {
					t.Fatalf("worker stopped with %v", werr)
				}
				if err != nil {
					t.Fatal(err)
				}
				changelog, err := verdict.Drain(dctx, base, topology.ChangelogTopic(app, CountStore), keys, 500*time.Millisecond)
				if err != nil {
					t.Fatal(err)
				}
				v, c := verdict.JudgeCounts(n, keys, recs, changelog)
				if v.RecordsOut != n || v.Unknown != 0 || !c.OK() || c.CountKeys != keys {
					t.Fatalf("verdict %s; %s", v, c)
				}
				// Counting by value reads every record twice: from the
				// input, then re-keyed from the repartition topic.
				want := uint64(n)
				if g == GroupingValue {
					want = 2 * n
					if left, why := repartitionLeft(dctx, env.Admin(t), base, app, topology.RepartitionTopic(app, GroupByNode)); left != 0 || why != "" {
						t.Errorf("repartition topic after the run: %d records left, waiting for %q", left, why)
					}
				}
				if rep.RecordsIn != want {
					t.Errorf("worker read %d records, want %d", rep.RecordsIn, want)
				}
			})
		}
	}
}

func TestWorkerOptionsValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		o    WorkerOptions
		ok   bool
	}{
		{"upper by default", WorkerOptions{}, true},
		{"count, memory by default", WorkerOptions{Pipeline: PipelineCount}, true},
		{"count on pebble", WorkerOptions{Pipeline: PipelineCount, State: StatePebble}, true},
		{"unknown pipeline", WorkerOptions{Pipeline: "sum"}, false},
		{"unknown state", WorkerOptions{Pipeline: PipelineCount, State: "rocks"}, false},
		{"state without count", WorkerOptions{State: StatePebble}, false},
		{"abort rate", WorkerOptions{AbortRate: -1}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.o.Validate(); (err == nil) != tc.ok {
				t.Fatalf("Validate() = %v, want ok=%v", err, tc.ok)
			}
		})
	}
}
