package eos_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/eosflow/eosflow/config"
	"github.com/eosflow/eosflow/eos"
	"github.com/eosflow/eosflow/state"
	"github.com/eosflow/eosflow/state/pebble"
	"github.com/eosflow/eosflow/tools/conformance"
	"github.com/eosflow/eosflow/tools/kafkatest"
	"github.com/eosflow/eosflow/topology"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// series returns the value of the metric name whose labels include want
// (a counter's, gauge's or untyped value, or a histogram's sample count),
// and whether reg has it.
func series(t *testing.T, reg prometheus.Gatherer, name string, want map[string]string) (float64, bool) {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
	next:
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			for k, v := range want {
				if labels[k] != v {
					continue next
				}
			}
			return value(m), true
		}
	}
	return 0, false
}

func value(m *dto.Metric) float64 {
	switch {
	case m.Counter != nil:
		return m.Counter.GetValue()
	case m.Gauge != nil:
		return m.Gauge.GetValue()
	case m.Histogram != nil:
		return float64(m.Histogram.GetSampleCount())
	}
	return m.GetUntyped().GetValue()
}

// must returns series' value, failing t when reg lacks it.
func must(t *testing.T, reg prometheus.Gatherer, name string, labels map[string]string) float64 {
	t.Helper()
	v, ok := series(t, reg, name, labels)
	if !ok {
		t.Fatalf("no series %s%v", name, labels)
	}
	return v
}

// abortsByReason returns the non-zero eosflow_batches_aborted_total series.
func abortsByReason(t *testing.T, reg prometheus.Gatherer) map[string]float64 {
	t.Helper()
	out := map[string]float64{}
	for _, reason := range []string{"processing_error", "veto", "rebalance", "produce_error", "commit_error", "shutdown", "timeout", "client_error"} {
		if v := must(t, reg, "eosflow_batches_aborted_total", map[string]string{"reason": reason}); v != 0 {
			out[reason] = v
		}
	}
	return out
}

func TestMetricsCountBatches(t *testing.T) {
	env := kafkatest.Fake(t)
	env.CreateTopics(t, 2, "in", "out")
	conformance.Seed(t, env, "in", 200)
	reg := prometheus.NewRegistry()
	cfg := env.Config("app", "a", config.ExactlyOnce)
	cfg.MaxBatchRecords = 50
	x := conformance.Start(t, cfg, conformance.Upper("in", "out", nil), eos.Metrics(reg))
	x.WaitCommitted(t, 200, 60*time.Second)
	labels := map[string]string{"app": "app", "instance": "a", "guarantee": "exactly-once"}
	st := x.R.Stats()
	if got := must(t, reg, "eosflow_batches_committed_total", labels); got < 4 || got != float64(st.Committed) {
		t.Fatalf("eosflow_batches_committed_total = %v, want Stats.Committed %d (at least 4 batches of 50)", got, st.Committed)
	}
	if got := must(t, reg, "eosflow_records_in_total", labels); got != 200 {
		t.Fatalf("eosflow_records_in_total = %v, want 200", got)
	}
	if got := must(t, reg, "eosflow_records_out_total", labels); got != 200 {
		t.Fatalf("eosflow_records_out_total = %v, want 200", got)
	}
	if got := must(t, reg, "eosflow_batch_records", labels); got != float64(st.Committed) {
		t.Fatalf("eosflow_batch_records counted %v batches, want %d", got, st.Committed)
	}
	if got := must(t, reg, "eosflow_commit_duration_seconds", labels); got < float64(st.Committed) {
		t.Fatalf("eosflow_commit_duration_seconds counted %v commits, want at least %d", got, st.Committed)
	}
	if got := must(t, reg, "eosflow_running", labels); got != 1 {
		t.Fatalf("eosflow_running = %v while running", got)
	}
	if got := must(t, reg, "eosflow_assigned_partitions", labels); got != 2 {
		t.Fatalf("eosflow_assigned_partitions = %v, want 2", got)
	}
	if got := must(t, reg, "eosflow_fenced", labels); got != 0 {
		t.Fatalf("eosflow_fenced = %v", got)
	}
	if got := must(t, reg, "eosflow_group_generation", labels); got < 1 {
		t.Fatalf("eosflow_group_generation = %v in the group, want the generation joined (>= 1)", got)
	}
	if got := abortsByReason(t, reg); len(got) != 0 {
		t.Fatalf("aborts %v, want none", got)
	}
	if _, ok := series(t, reg, "eosflow_kafka_connects_total", labels); !ok {
		t.Fatal("no franz-go client metrics (eosflow_kafka_connects_total)")
	}
	before := must(t, reg, "eosflow_batches_committed_total", labels)
	conformance.Seed(t, env, "in", 100)
	x.WaitCommitted(t, 300, 60*time.Second)
	if got := must(t, reg, "eosflow_batches_committed_total", labels); got <= before {
		t.Fatalf("eosflow_batches_committed_total stayed at %v after more records committed", got)
	}
	x.Stop()
	if err := x.Wait(t, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	if got := must(t, reg, "eosflow_running", labels); got != 0 {
		t.Fatalf("eosflow_running = %v after Run returned", got)
	}
	if got := must(t, reg, "eosflow_group_generation", labels); got != -1 {
		t.Fatalf("eosflow_group_generation = %v after Run returned, want -1", got)
	}
}

func TestMetricsAbortReasons(t *testing.T) {
	t.Run("veto", func(t *testing.T) {
		env := kafkatest.Fake(t)
		env.CreateTopics(t, 1, "in", "out")
		conformance.Seed(t, env, "in", 20)
		reg := prometheus.NewRegistry()
		veto := errors.New("vetoed")
		x := conformance.Start(t, env.Config("app", "a", config.ExactlyOnce), conformance.Upper("in", "out", nil), eos.Metrics(reg),
			eos.BeforeCommit(func(context.Context, eos.BatchInfo) error { return veto }))
		if err := x.Wait(t, 60*time.Second); !errors.Is(err, veto) {
			t.Fatalf("Run: %v, want the veto", err)
		}
		if got := abortsByReason(t, reg); len(got) != 1 || got["veto"] != 1 {
			t.Fatalf("aborts by reason %v, want veto 1", got)
		}
	})
	t.Run("processing error", func(t *testing.T) {
		env := kafkatest.Fake(t)
		env.CreateTopics(t, 1, "in", "out")
		conformance.Seed(t, env, "in", 20)
		reg := prometheus.NewRegistry()
		x := conformance.Start(t, env.Config("app", "a", config.ExactlyOnce), conformance.Upper("in", "out", func(id int) bool { return id == 10 }), eos.Metrics(reg))
		if err := x.Wait(t, 60*time.Second); err == nil || !strings.Contains(err.Error(), "injected failure") {
			t.Fatalf("Run: %v, want the injected failure", err)
		}
		if got := abortsByReason(t, reg); len(got) != 1 || got["processing_error"] != 1 {
			t.Fatalf("aborts by reason %v, want processing_error 1", got)
		}
		if got := must(t, reg, "eosflow_batches_committed_total", nil); got != 0 {
			t.Fatalf("eosflow_batches_committed_total = %v, want 0", got)
		}
	})
}

// get returns the status and body of an HTTP GET of url.
func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(body)
}

func TestMetricsAddrServesEndpoints(t *testing.T) {
	env := kafkatest.Fake(t)
	env.CreateTopics(t, 1, "in", "out")
	cfg := env.Config("app", "a", config.ExactlyOnce)
	cfg.MetricsAddr = "127.0.0.1:0"
	r, err := eos.New(cfg, conformance.Upper("in", "out", nil))
	if err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	r.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/readyz", nil))
	if rec.Code != http.StatusServiceUnavailable || !strings.Contains(rec.Body.String(), "not running") {
		t.Fatalf("/readyz before Run: %d %q, want 503 not running", rec.Code, rec.Body.String())
	}
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- r.Run(ctx) }()
	t.Cleanup(func() { cancel(); r.Close() })
	conformance.Until(t, 30*time.Second, "the endpoint", func() bool { return r.MetricsAddr() != "" })
	base := "http://" + r.MetricsAddr()
	if code, body := get(t, base+"/healthz"); code != 200 || strings.TrimSpace(body) != "ok" {
		t.Fatalf("/healthz: %d %q", code, body)
	}
	conformance.Until(t, 60*time.Second, "/readyz 200", func() bool {
		code, _ := get(t, base+"/readyz")
		return code == 200
	})
	if code, body := get(t, base+"/readyz"); !strings.Contains(body, "1 partitions assigned") {
		t.Fatalf("/readyz: %d %q, want the assignment", code, body)
	}
	conformance.Seed(t, env, "in", 50)
	conformance.Until(t, 60*time.Second, "50 records", func() bool { return r.Stats().RecordsIn >= 50 })
	code, body := get(t, base+"/metrics")
	if code != 200 {
		t.Fatalf("/metrics: %d", code)
	}
	committed := fmt.Sprintf(`eosflow_batches_committed_total{app="app",guarantee="exactly-once",instance="a"} %d`, r.Stats().Committed)
	for _, want := range []string{committed, `eosflow_records_in_total{app="app",guarantee="exactly-once",instance="a"} 50`,
		`eosflow_batches_aborted_total{app="app",guarantee="exactly-once",instance="a",reason="veto"} 0`,
		"eosflow_kafka_connects_total", "go_goroutines", "eosflow_batch_duration_seconds_bucket"} {
		if !strings.Contains(body, want) {
			t.Fatalf("/metrics lacks %q:\n%s", want, body)
		}
	}
	for _, line := range strings.Split(body, "\n") {
		if strings.HasPrefix(line, "eosflow_") && !strings.HasPrefix(line, "eosflow_kafka_") {
			t.Log(line)
		}
	}
	cancel()
	if err := <-errc; err != nil {
		t.Fatalf("Run: %v", err)
	}
	if _, err := http.Get(base + "/healthz"); err == nil {
		t.Fatal("the endpoint still answers after Run returned")
	}
	rec = httptest.NewRecorder()
	r.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/readyz", nil))
	if rec.Code != http.StatusServiceUnavailable || !strings.Contains(rec.Body.String(), "not running") {
		t.Fatalf("/readyz after Run: %d %q, want 503 not running", rec.Code, rec.Body.String())
	}
}

func TestMetricsAddrInUse(t *testing.T) {
	env := kafkatest.Fake(t)
	env.CreateTopics(t, 1, "in", "out")
	taken := httptest.NewServer(http.NotFoundHandler())
	defer taken.Close()
	cfg := env.Config("app", "a", config.ExactlyOnce)
	cfg.MetricsAddr = strings.TrimPrefix(taken.URL, "http://")
	r, err := eos.New(cfg, conformance.Upper("in", "out", nil))
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Run(context.Background()); err == nil || !strings.Contains(err.Error(), "metrics_addr") {
		t.Fatalf("Run on a port in use: %v, want an error naming metrics_addr", err)
	}
}

func TestMetricsNeedReadableRegistry(t *testing.T) {
	cfg := config.Default()
	cfg.Brokers, cfg.AppID, cfg.MetricsAddr = []string{"127.0.0.1:9092"}, "app", "127.0.0.1:0"
	onlyRegisters := prometheus.WrapRegistererWith(prometheus.Labels{"x": "y"}, prometheus.NewRegistry())
	if _, err := eos.New(cfg, conformance.Upper("in", "out", nil), eos.Metrics(onlyRegisters)); err == nil || !strings.Contains(err.Error(), "Gatherer") {
		t.Fatalf("New: %v, want an error asking for a registry it can read", err)
	}
	cfg.MetricsAddr = ""
	reg := prometheus.NewRegistry()
	if _, err := eos.New(cfg, conformance.Upper("in", "out", nil), eos.Metrics(reg)); err != nil {
		t.Fatal(err)
	}
	if _, err := eos.New(cfg, conformance.Upper("in", "out", nil), eos.Metrics(reg)); err == nil || !strings.Contains(err.Error(), "registering metrics") {
		t.Fatalf("a second Runner of the same app and instance on one registry: %v, want a registration error", err)
	}
}

func TestReadyzWhenFenced(t *testing.T) {
	t.Parallel()
	env := kafkatest.Fake(t)
	env.CreateTopics(t, 1, "in", "out")
	conformance.Seed(t, env, "in", 20)
	cfg := env.Config("app", "same", config.ExactlyOnce)
	reg := prometheus.NewRegistry()
	zombie := conformance.Start(t, cfg, conformance.Upper("in", "out", nil), eos.Metrics(reg))
	ready := func(r *eos.Runner) (int, string) {
		rec := httptest.NewRecorder()
		r.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/readyz", nil))
		return rec.Code, rec.Body.String()
	}
	conformance.Until(t, 60*time.Second, "the first instance ready", func() bool { code, _ := ready(zombie.R); return code == 200 })
	zombie.WaitCommitted(t, 20, 60*time.Second)
	successor := conformance.Start(t, cfg, conformance.Upper("in", "out", nil), eos.Metrics(prometheus.NewRegistry()))
	err := zombie.Wait(t, 90*time.Second)
	if !errors.Is(err, eos.ErrFenced) {
		t.Fatalf("the first instance: %v, want fenced", err)
	}
	if code, body := ready(zombie.R); code != http.StatusServiceUnavailable || !strings.HasPrefix(body, "fenced") {
		t.Fatalf("/readyz of the fenced instance: %d %q, want 503 fenced", code, body)
	}
	if got := must(t, reg, "eosflow_fenced", nil); got != 1 {
		t.Fatalf("eosflow_fenced = %v, want 1", got)
	}
	conformance.Until(t, 60*time.Second, "the successor ready", func() bool { code, _ := ready(successor.R); return code == 200 })
}

// An open transaction on an input holds read_committed consumers at the
// last stable offset: the lag against the high watermark shows the
// records behind it, the lag against the last stable offset does not, and
// only both together tell a stuck transaction from a slow pipeline.
func TestLagAgainstStableOffset(t *testing.T) {
	t.Parallel()
	env := kafkatest.Fake(t)
	env.CreateTopics(t, 1, "in", "out")
	conformance.Seed(t, env, "in", 10)
	reg := prometheus.NewRegistry()
	x := conformance.Start(t, env.Config("app", "a", config.ExactlyOnce), conformance.Upper("in", "out", nil), eos.Metrics(reg))
	x.WaitCommitted(t, 10, 60*time.Second)
	part := map[string]string{"topic": "in", "partition": "0"}
	lag := func() (hw, lso float64, ok bool) {
		hw, okHW := series(t, reg, "eosflow_input_lag_records", part)
		lso, okLSO := series(t, reg, "eosflow_input_stable_lag_records", part)
		return hw, lso, okHW && okLSO
	}
	conformance.Until(t, 30*time.Second, "no lag after the seed", func() bool {
		hw, lso, ok := lag()
		return ok && hw == 0 && lso == 0
	})

	holder := env.Client(t, kgo.TransactionalID("holder"), kgo.DefaultProduceTopic("in"))
	ctx := context.Background()
	if err := holder.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		if err := holder.ProduceSync(ctx, kgo.StringRecord("open-"+strconv.Itoa(i))).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	plain := env.Client(t, kgo.DefaultProduceTopic("in"))
	for i := range 5 {
		if err := plain.ProduceSync(ctx, kgo.StringRecord("behind-"+strconv.Itoa(i))).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	var hw, lso float64
	conformance.Until(t, 30*time.Second, "high-watermark lag of the 10 records behind the open transaction", func() bool {
		var ok bool
		hw, lso, ok = lag()
		return ok && hw >= 10
	})
	if lso != 0 {
		t.Fatalf("stable lag %v while everything readable was committed, want 0 (high-watermark lag %v)", lso, hw)
	}
	if in := x.R.Stats().RecordsIn; in != 10 {
		t.Fatalf("%d records committed: the records behind the open transaction were readable, so the test proves nothing", in)
	}

	if err := holder.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	x.WaitCommitted(t, 20, 60*time.Second)
	conformance.Until(t, 30*time.Second, "the lag gone once the transaction committed", func() bool {
		hw, lso, ok := lag()
		return ok && hw <= 1 && lso <= 1 // at most the commit marker
	})
}

// A fault that breaks one step of a transaction shows under its reason
// alone, and after a rebuild the new client's metrics are registered again.
func TestMetricsAbortReasonsFromFaults(t *testing.T) {
	cases := []struct {
		name     string
		fault    kfake.Fault
		reason   string
		rebuilds int // the client redoes an unconfirmed EndTxn itself; a failed produce needs a new one
	}{
		{"EndTxn fails", kfake.Fault{Keys: []kmsg.Key{kmsg.EndTxn}, Err: kerr.UnknownServerError, Count: 1}, "commit_error", 0},
		{"Produce fails", kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Topic: "out", Err: kerr.UnknownServerError, Count: 1}, "produce_error", 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			env := kafkatest.Fake(t)
			env.CreateTopics(t, 1, "in", "out")
			const n = 200
			conformance.Seed(t, env, "in", n)
			h := env.Fake.Fault(tc.fault)
			reg := prometheus.NewRegistry()
			x := conformance.Start(t, env.Config("app", "a", config.ExactlyOnce), conformance.Upper("in", "out", nil), eos.Metrics(reg))
			x.WaitCommitted(t, n, 60*time.Second)
			conformance.ExactlyOnce(t, env, "out", n)
			if h.Hits() == 0 {
				t.Fatal("fault never hit; the test proves nothing")
			}
			if got := abortsByReason(t, reg); len(got) != 1 || got[tc.reason] != 1 {
				t.Fatalf("aborts by reason %v, want %s 1", got, tc.reason)
			}
			if rebuilds := must(t, reg, "eosflow_client_rebuilds_total", nil); rebuilds != float64(tc.rebuilds) {
				t.Fatalf("eosflow_client_rebuilds_total = %v, want %d", rebuilds, tc.rebuilds)
			}
			if _, ok := series(t, reg, "eosflow_kafka_connects_total", nil); !ok {
				t.Fatal("no client metrics")
			}
		})
	}
}

// An instance that joined its group but got no partition (more instances
// than partitions) is ready too: it takes over when another leaves.
func TestReadyzIdleButJoined(t *testing.T) {
	env := kafkatest.Fake(t)
	env.CreateTopics(t, 1, "in", "out")
	ready := func(r *eos.Runner) (int, string) {
		rec := httptest.NewRecorder()
		r.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/readyz", nil))
		return rec.Code, rec.Body.String()
	}
	a := conformance.Start(t, env.Config("app", "a", config.ExactlyOnce), conformance.Upper("in", "out", nil))
	conformance.Until(t, 60*time.Second, "a ready", func() bool { code, _ := ready(a.R); return code == 200 })
	b := conformance.Start(t, env.Config("app", "b", config.ExactlyOnce), conformance.Upper("in", "out", nil))
	var bodyA, bodyB string
	conformance.Until(t, 60*time.Second, "both ready, one partition between them", func() bool {
		codeA, ba := ready(a.R)
		codeB, bb := ready(b.R)
		bodyA, bodyB = ba, bb
		return codeA == 200 && codeB == 200 &&
			strings.Contains(ba+bb, "ready: 1 partitions assigned") && strings.Contains(ba+bb, "ready: 0 partitions assigned")
	})
	t.Logf("a: %q, b: %q", strings.TrimSpace(bodyA), strings.TrimSpace(bodyB))
}

// A new instance with an empty memory store restores it from the
// changelog: the restore counter shows the records applied, and once the
// restore is over the restoring gauges are back at 0 and it is ready.
func TestMetricsRestore(t *testing.T) {
	env := kafkatest.Fake(t)
	env.CreateTopics(t, 1, "in", "out")
	conformance.SeedRange(t, env, "in", 0, 300)
	cfg := env.Config("count", "a", config.ExactlyOnce)
	cfg.StateDir = t.TempDir()
	x := conformance.Start(t, cfg, conformance.CountTopology("in", "out", state.Memory()), eos.CreateTopics(1, -1))
	x.WaitCommitted(t, 300, 60*time.Second)
	x.Stop()
	if err := x.Wait(t, 60*time.Second); err != nil {
		t.Fatal(err)
	}
	conformance.SeedRange(t, env, "in", 300, 310)
	reg := prometheus.NewRegistry()
	y := conformance.Start(t, cfg, conformance.CountTopology("in", "out", state.Memory()), eos.Metrics(reg))
	y.WaitCommitted(t, 10, 60*time.Second)
	restored := y.R.Stats().Restored
	if restored == 0 {
		t.Fatal("nothing restored: the test proves nothing")
	}
	if got := must(t, reg, "eosflow_restore_records_total", nil); got != float64(restored) {
		t.Fatalf("eosflow_restore_records_total = %v, want Stats.Restored %d", got, restored)
	}
	for _, name := range []string{"eosflow_restoring", "eosflow_restore_remaining_offsets"} {
		if got := must(t, reg, name, nil); got != 0 {
			t.Fatalf("%s = %v after the restore", name, got)
		}
	}
	rec := httptest.NewRecorder()
	y.R.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/readyz", nil))
	if rec.Code != 200 {
		t.Fatalf("/readyz after the restore: %d %q", rec.Code, rec.Body.String())
	}
}

// readyz answers /readyz of r's handler.
func readyz(r *eos.Runner) (int, string) {
	rec := httptest.NewRecorder()
	r.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/readyz", nil))
	return rec.Code, rec.Body.String()
}

// /readyz answers 503 "restoring" while an instance's stores catch up
// with their changelogs (held here by the broker sleeping the restore's
// fetches), and 200 once they did.
func TestReadyzWhileRestoring(t *testing.T) {
	env := kafkatest.Fake(t)
	env.CreateTopics(t, 1, "in", "out")
	conformance.SeedRange(t, env, "in", 0, 200)
	cfg := env.Config("app", "a", config.ExactlyOnce)
	x := conformance.Start(t, cfg, conformance.CountTopology("in", "out", state.Memory()))
	x.WaitCommitted(t, 200, 60*time.Second)
	x.Stop()
	if err := x.Wait(t, 30*time.Second); err != nil {
		t.Fatal(err)
	}

	changelog := topology.ChangelogTopic("app", "counts")
	details, err := kadm.NewClient(env.Client(t)).ListTopics(context.Background(), changelog)
	if err != nil {
		t.Fatal(err)
	}
	id := details[changelog].ID
	release := make(chan struct{})
	var held atomic.Int32
	env.Fake.ControlKey(int16(kmsg.Fetch), func(req kmsg.Request) (kmsg.Response, error, bool) {
		env.Fake.KeepControl()
		for _, tp := range req.(*kmsg.FetchRequest).Topics {
			if tp.Topic == changelog || tp.TopicID == id {
				held.Add(1)
				env.Fake.SleepControl(func() { <-release })
				break
			}
		}
		return nil, nil, false
	})
	y := conformance.Start(t, cfg, conformance.CountTopology("in", "out", state.Memory()))
	conformance.SeedRange(t, env, "in", 200, 210) // a task restores before its first record
	// The gauge goes up before the restore's first fetch reaches the
	// broker: wait for both, then it must still say restoring.
	conformance.Until(t, 60*time.Second, "a held changelog fetch", func() bool { return held.Load() > 0 })
	if code, body := readyz(y.R); code != http.StatusServiceUnavailable || !strings.Contains(body, "restoring state stores") {
		t.Fatalf("/readyz while the restore's fetch is held: %d %q, want 503 restoring", code, body)
	}
	close(release)
	conformance.Until(t, 60*time.Second, "/readyz 200 after the restore", func() bool {
		code, _ := readyz(y.R)
		return code == http.StatusOK
	})
	if s := y.R.Stats(); s.Restored == 0 {
		t.Fatalf("stats %+v: nothing restored", s)
	}
}

// /readyz answers 503 "stopping" from the moment Run's context ends until
// Run returns (the open batch still commits), then "not running".
func TestReadyzWhileStopping(t *testing.T) {
	env := kafkatest.Fake(t)
	env.CreateTopics(t, 1, "in", "out")
	conformance.Seed(t, env, "in", 20)
	inCommit, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	cfg := env.Config("app", "a", config.ExactlyOnce)
	x := conformance.Start(t, cfg, conformance.Upper("in", "out", nil), eos.BeforeCommit(func(context.Context, eos.BatchInfo) error {
		once.Do(func() { close(inCommit) })
		<-release
		return nil
	}))
	select {
	case <-inCommit:
	case <-time.After(60 * time.Second):
		t.Fatal("no batch reached its commit")
	}
	if code, body := readyz(x.R); code != http.StatusOK {
		t.Fatalf("/readyz while a batch commits: %d %q, want 200", code, body)
	}
	x.Stop()
	conformance.Until(t, 10*time.Second, "/readyz stopping", func() bool {
		code, body := readyz(x.R)
		return code == http.StatusServiceUnavailable && strings.Contains(body, "stopping")
	})
	close(release)
	if err := x.Wait(t, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	if code, body := readyz(x.R); code != http.StatusServiceUnavailable || !strings.Contains(body, "not running") {
		t.Fatalf("/readyz after Run returned: %d %q, want 503 not running", code, body)
	}
	if s := x.R.Stats(); s.Committed == 0 {
		t.Fatalf("stats %+v: the batch open at the stop did not commit", s)
	}
}

// eosflow_store_bytes reports what a store's open tasks hold: for memory,
// exactly the keys and values of the latest changelog record per key; for
// pebble, its files and memtables (more than nothing). It is gone once Run
// returned and closed the stores.
func TestMetricsStoreBytes(t *testing.T) {
	for _, e := range []state.Engine{state.Memory(), pebble.New()} {
		t.Run(e.String(), func(t *testing.T) {
			env := kafkatest.Fake(t)
			env.CreateTopics(t, 3, "in", "out")
			conformance.SeedRange(t, env, "in", 0, 500)
			cfg := env.Config("count", "a", config.ExactlyOnce)
			cfg.StateDir = t.TempDir()
			reg := prometheus.NewRegistry()
			x := conformance.Start(t, cfg, conformance.CountTopology("in", "out", e), eos.Metrics(reg))
			x.WaitCommitted(t, 500, 60*time.Second)

			latest := map[string]int{}
			for _, r := range conformance.Drain(t, env, topology.ChangelogTopic("count", "counts"), 1) {
				latest[string(r.Key)] = len(r.Key) + len(r.Value)
			}
			want := 0
			for _, n := range latest {
				want += n
			}
			got := must(t, reg, "eosflow_store_bytes", map[string]string{"store": "counts"})
			switch e.String() {
			case "memory":
				if got != float64(want) {
					t.Fatalf("eosflow_store_bytes = %v, want %d: the %d keys and latest values of the changelog", got, want, len(latest))
				}
			default:
				if got <= 0 {
					t.Fatalf("eosflow_store_bytes = %v for a store of %d keys", got, len(latest))
				}
			}
			x.Stop()
			if err := x.Wait(t, 30*time.Second); err != nil {
				t.Fatal(err)
			}
			if v, ok := series(t, reg, "eosflow_store_bytes", nil); ok {
				t.Fatalf("eosflow_store_bytes = %v after Run closed the stores", v)
			}
			t.Logf("%s: %v bytes for %d keys (%d bytes of keys and values)", e, got, len(latest), want)
		})
	}
}
