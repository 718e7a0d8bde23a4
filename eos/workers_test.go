package eos_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/eosflow/eosflow/config"
	"github.com/eosflow/eosflow/eos"
	"github.com/eosflow/eosflow/internal/runcfg"
	"github.com/eosflow/eosflow/state"
	"github.com/eosflow/eosflow/state/pebble"
	"github.com/eosflow/eosflow/tools/conformance"
	"github.com/eosflow/eosflow/tools/kafkatest"
	"github.com/eosflow/eosflow/topology"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

// slowBatches makes every batch take a little longer, so that a fence
// lands while a worker has a transaction open.
var slowBatches = eos.BeforeCommit(func(context.Context, eos.BatchInfo) error {
	time.Sleep(20 * time.Millisecond)
	return nil
})

// waitWorkersAssigned waits until the group gave each of the runner's n
// workers (instance ids <instance>_0 … _n-1) some partitions.
func waitWorkersAssigned(t *testing.T, env *kafkatest.Env, cfg config.Config, n int) {
	t.Helper()
	for i := range n {
		conformance.WaitAssigned(t, env, cfg.AppID, runcfg.WorkerInstanceID(cfg, i))
	}
}

// workers: 2 runs two sessions in one process, in one group: both get
// partitions and commit records, under their own transactional ids, and
// every record comes out once. The logger given applies to both, with
// the worker's index and instance id as fields.
func TestWorkersProcessEveryRecordOnce(t *testing.T) {
	env := kafkatest.Fake(t)
	env.CreateTopics(t, 6, "in", "out")
	const n = 6000
	cfg := env.Config("app", "pod", config.ExactlyOnce)
	cfg.Workers = 2
	cfg.MaxBatchRecords = 300
	core, logs := observer.New(zapcore.InfoLevel)
	x := conformance.Start(t, cfg, conformance.Upper("in", "out", nil), eos.Logger(zap.New(core)))
	waitWorkersAssigned(t, env, cfg, 2)
	conformance.Seed(t, env, "in", n)
	x.WaitCommitted(t, n, 90*time.Second)
	conformance.ExactlyOnce(t, env, "out", n)

	per := x.R.WorkerStats()
	if len(per) != 2 || per[0].RecordsIn == 0 || per[1].RecordsIn == 0 || per[0].RecordsIn+per[1].RecordsIn != n {
		t.Fatalf("per-worker stats %+v: want both workers to commit records, %d in all", per, n)
	}
	if s := x.R.Stats(); s.RecordsIn != n || s.Committed != per[0].Committed+per[1].Committed {
		t.Fatalf("Stats %+v is not the sum of %+v", s, per)
	}

	// Each worker's transactional id is app:pod-i; none is app:pod.
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	listed, err := env.Admin(t).ListTransactions(ctx, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	ids := map[string]bool{}
	for _, tx := range listed.Sorted() {
		ids[tx.TxnID] = true
	}
	if !ids["app:pod_0"] || !ids["app:pod_1"] || ids["app:pod"] {
		t.Fatalf("transactional ids %v: want app:pod_0 and app:pod_1, not app:pod", ids)
	}

	x.Stop()
	if err := x.Wait(t, 60*time.Second); err != nil {
		t.Fatalf("Run after its context ended: %v, want nil", err)
	}
	for i := range 2 {
		started := logs.FilterMessage("starting").FilterField(zap.Int("worker", i)).
			FilterField(zap.String("instance_id", runcfg.WorkerInstanceID(cfg, i))).FilterField(zap.String("transactional_id", "app:"+runcfg.WorkerInstanceID(cfg, i)))
		if started.Len() != 1 {
			t.Errorf("worker %d: %d \"starting\" log entries with its worker, instance_id and transactional_id fields, want 1", i, started.Len())
		}
	}
	t.Logf("per worker %+v", per)
}

// A stateful count under workers: 2 is exactly once, and each worker
// keeps its stores in a directory of its own.
func TestWorkersStatefulCount(t *testing.T) {
	for _, engine := range []state.Engine{state.Memory(), pebble.New()} {
		t.Run(engine.String(), func(t *testing.T) {
			env := kafkatest.Fake(t)
			env.CreateTopics(t, 4, "in", "out")
			const n = 2000
			cfg := env.Config("count", "pod", config.ExactlyOnce)
			cfg.Workers = 2
			cfg.MaxBatchRecords = 200
			cfg.StateDir = t.TempDir()
			x := conformance.Start(t, cfg, conformance.CountTopology("in", "out", engine))
			waitWorkersAssigned(t, env, cfg, 2)
			conformance.SeedRange(t, env, "in", 0, n)
			x.WaitCommitted(t, n, 90*time.Second)
			conformance.CheckCounts(t, env, "out", topology.ChangelogTopic("count", "counts"), n)
			if per := x.R.WorkerStats(); per[0].RecordsIn == 0 || per[1].RecordsIn == 0 {
				t.Fatalf("per-worker stats %+v: want both workers to count", per)
			}
			if engine.String() == pebble.New().String() {
				for i := range 2 {
					dir := filepath.Join(cfg.StateDir, "count", runcfg.WorkerInstanceID(cfg, i))
					if entries, err := os.ReadDir(dir); err != nil || len(entries) == 0 {
						t.Fatalf("worker %d's state directory %s: %v entries, err %v", i, dir, len(entries), err)
					}
				}
			}
		})
	}
}

// A second process running worker 1's instance id fences that worker:
// Run stops the other worker and returns the fence, naming worker 1;
// the successor and, after the stopped worker's session times out, the
// group finish every record once.
func TestWorkersFencedWorkerStopsRun(t *testing.T) {
	t.Parallel()
	env := kafkatest.Fake(t)
	env.CreateTopics(t, 4, "in", "out")
	const n = 20000
	cfg := env.Config("app", "pod", config.ExactlyOnce)
	cfg.Workers = 2
	cfg.MaxBatchRecords = 200
	x := conformance.Start(t, cfg, conformance.Upper("in", "out", nil), slowBatches)
	waitWorkersAssigned(t, env, cfg, 2)
	conformance.Seed(t, env, "in", n)
	conformance.Until(t, 60*time.Second, "both workers to commit", func() bool {
		per := x.R.WorkerStats()
		return per[0].RecordsIn > 0 && per[1].RecordsIn > 0
	})

	succCfg := runcfg.ForWorker(cfg, 1) // worker 1 of a second copy of this instance
	succ, err := eos.NewWorkerForTest(succCfg, conformance.Upper("in", "out", nil), eos.Logger(zap.NewNop()))
	if err != nil {
		t.Fatal(err)
	}
	successor := conformance.StartRunner(t, succ)
	err = x.Wait(t, 90*time.Second)
	var we *eos.WorkerError
	var fe *eos.FencedError
	if !errors.As(err, &we) || we.Worker != 1 || we.InstanceID != "pod_1" {
		t.Fatalf("Run: %v; want a *WorkerError naming worker 1 (pod_1)", err)
	}
	if !errors.As(err, &fe) || !errors.Is(err, eos.ErrFenced) || fe.TransactionalID != "app:pod_1" || !strings.Contains(err.Error(), `"pod_1"`) {
		t.Fatalf("Run: %v; want the fence of app:pod_1 inside, named in the message", err)
	}
	// Run returned, so worker 0 stopped too; the successor takes over
	// its partitions once its static membership expires.
	before := x.R.Stats().RecordsIn
	conformance.Until(t, 120*time.Second, "the successor to finish", func() bool {
		return before+successor.R.Stats().RecordsIn >= n
	})
	if after := x.R.Stats().RecordsIn; after != before {
		t.Fatalf("the stopped workers committed %d more records after Run returned", after-before)
	}
	conformance.ExactlyOnce(t, env, "out", n)
	t.Logf("Run: %v", err)
}

// /readyz is 200 only once every worker is ready, /metrics serves every
// worker's series, each labelled with its own instance id.
func TestWorkersReadyzAndMetrics(t *testing.T) {
	env := kafkatest.Fake(t)
	env.CreateTopics(t, 4, "in", "out")
	cfg := env.Config("app", "pod", config.ExactlyOnce)
	cfg.Workers = 2
	cfg.MetricsAddr = "127.0.0.1:0"
	r, err := eos.New(cfg, conformance.Upper("in", "out", nil))
	if err != nil {
		t.Fatal(err)
	}
	if code, body := readyz(r); code != http.StatusServiceUnavailable || !strings.Contains(body, "worker 0 (pod_0): not running") {
		t.Fatalf("/readyz before Run: %d %q, want 503 naming worker 0", code, body)
	}
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- r.Run(ctx) }()
	t.Cleanup(func() { cancel(); r.Close() })
	conformance.Until(t, 30*time.Second, "the endpoint", func() bool { return r.MetricsAddr() != "" })
	base := "http://" + r.MetricsAddr()
	waitWorkersAssigned(t, env, cfg, 2)
	// A cooperative rebalance moves partitions in two steps: between
	// them both workers are ready with only some of them assigned.
	conformance.Until(t, 60*time.Second, "/readyz 200 with 4 partitions assigned over 2 workers", func() bool {
		code, body := get(t, base+"/readyz")
		return code == 200 && strings.Contains(body, "4 partitions assigned over 2 workers")
	})
	conformance.Seed(t, env, "in", 400)
	conformance.Until(t, 60*time.Second, "400 records", func() bool { return r.Stats().RecordsIn >= 400 })
	code, body := get(t, base+"/metrics")
	if code != 200 {
		t.Fatalf("/metrics: %d", code)
	}
	for _, want := range []string{`eosflow_running{app="app",guarantee="exactly-once",instance="pod_0"} 1`,
		`eosflow_running{app="app",guarantee="exactly-once",instance="pod_1"} 1`, "go_goroutines",
		`eosflow_kafka_connects_total{app="app",guarantee="exactly-once",instance="pod_1"`} {
		if !strings.Contains(body, want) {
			t.Fatalf("/metrics lacks %q:\n%s", want, body)
		}
	}
	// Close stops every worker and returns once Run's work ended: as it
	// returns, no worker runs any more. Run's result reaches errc when
	// its goroutine is next scheduled.
	if err := r.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	rec := httptest.NewRecorder()
	r.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	for i := range 2 {
		want := `eosflow_running{app="app",guarantee="exactly-once",instance="` + runcfg.WorkerInstanceID(cfg, i) + `"} 0`
		if !strings.Contains(rec.Body.String(), want) {
			t.Fatalf("Close returned while worker %d still ran: /metrics lacks %q:\n%s", i, want, rec.Body)
		}
	}
	if code, body := readyz(r); code != http.StatusServiceUnavailable || !strings.Contains(body, "not running") {
		t.Fatalf("/readyz after Close: %d %q, want 503 not running", code, body)
	}
	select {
	case err := <-errc:
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Run did not return within 30s after Close returned")
	}
}

// Workers share one registry given with Metrics; a registry that already
// holds one of the workers' instances is refused, and the workers built
// before the clash leave nothing registered.
func TestWorkersShareARegistry(t *testing.T) {
	cfg := config.Default()
	cfg.Brokers, cfg.AppID, cfg.InstanceID, cfg.Workers = []string{"127.0.0.1:9092"}, "app", "pod", 3
	reg := prometheus.NewRegistry()
	if _, err := eos.New(cfg, conformance.Upper("in", "out", nil), eos.Metrics(reg)); err != nil {
		t.Fatal(err)
	}
	other := prometheus.NewRegistry()
	single := runcfg.ForWorker(cfg, 2) // worker 2, built on its own
	if _, err := eos.NewWorkerForTest(single, conformance.Upper("in", "out", nil), eos.Metrics(other)); err != nil {
		t.Fatal(err)
	}
	if _, err := eos.New(cfg, conformance.Upper("in", "out", nil), eos.Metrics(other)); err == nil || !strings.Contains(err.Error(), `worker 2 (instance_id "pod_2")`) {
		t.Fatalf("New on a registry holding pod_2: %v, want an error naming worker 2", err)
	}
	families, err := other.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "instance" && l.GetValue() != "pod_2" {
					t.Fatalf("%s{instance=%q} left registered by a Runner that was never made", f.GetName(), l.GetValue())
				}
			}
		}
	}
}

func TestWorkersInvalid(t *testing.T) {
	cfg := config.Default()
	cfg.Brokers, cfg.AppID, cfg.InstanceID, cfg.Workers = []string{"127.0.0.1:9092"}, "app", "pod", -5
	if _, err := eos.New(cfg, conformance.Upper("in", "out", nil)); err == nil || !strings.Contains(err.Error(), "workers") || !strings.Contains(err.Error(), "auto") {
		t.Fatalf("New with workers -5: %v, want an error naming workers and auto", err)
	}
}
