package integration

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/eosflow/eosflow/config"
	"github.com/eosflow/eosflow/eos"
	"github.com/eosflow/eosflow/tools/conformance"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kgo"
)

// promResult runs a PromQL instant query and returns its series' values
// (the sample's value as Prometheus writes it), failing t when Prometheus
// refuses the query.
func promResult(t *testing.T, base, q string) []string {
	t.Helper()
	resp, err := http.Get(base + "/api/v1/query?query=" + url.QueryEscape(q))
	if err != nil {
		t.Fatalf("querying Prometheus at %s: %v", base, err)
	}
	defer resp.Body.Close()
	var body struct {
		Status string `json:"status"`
		Error  string `json:"error"`
		Data   struct {
			Result []struct {
				Value [2]any `json:"value"`
			} `json:"result"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		t.Fatalf("Prometheus answer to %q: %v", q, err)
	}
	if body.Status != "success" {
		t.Fatalf("Prometheus refused %q: %s", q, body.Error)
	}
	values := make([]string, len(body.Data.Result))
	for i, r := range body.Data.Result {
		values[i], _ = r.Value[1].(string)
	}
	return values
}

// promQuery returns the single value of a PromQL instant query, and
// whether it had one.
func promQuery(t *testing.T, base, q string) (float64, bool) {
	t.Helper()
	values := promResult(t, base, q)
	if len(values) != 1 {
		return 0, false
	}
	v, err := strconv.ParseFloat(values[0], 64)
	return v, err == nil
}

// A real Prometheus (integration/prometheus/prom.sh) scrapes a pipeline on
// a real broker through metrics_addr and its HTTP API shows committed
// batches growing, a vetoed batch under its reason, and an open
// transaction on the input as high-watermark lag with stable lag 0.
//
//	integration/prometheus/prom.sh start 127.0.0.1:19464
//	EOS_KAFKA_BROKERS=127.0.0.1:19900 EOS_PROMETHEUS_URL=http://127.0.0.1:19090 \
//	  go test -run TestPrometheusScrapesPipeline -v ./integration/
func TestPrometheusScrapesPipeline(t *testing.T) {
	base := os.Getenv("EOS_PROMETHEUS_URL")
	if os.Getenv("EOS_KAFKA_BROKERS") == "" || base == "" {
		t.Skip("set EOS_KAFKA_BROKERS and EOS_PROMETHEUS_URL (integration/prometheus/prom.sh start) to run against a real Prometheus")
	}
	target := os.Getenv("EOS_PROMETHEUS_TARGET")
	if target == "" {
		target = "127.0.0.1:19464" // prom.sh's default target
	}
	env := realEnv(t)
	in, out := env.Name("in"), env.Name("out")
	env.CreateTopics(t, 1, in, out)
	app := env.Name("app")
	reg := prometheus.NewRegistry()
	cfg := env.Config(app, "a", config.ExactlyOnce)
	cfg.MetricsAddr = target
	x := conformance.Start(t, cfg, conformance.Upper(in, out, nil), eos.Metrics(reg))
	conformance.Seed(t, env, in, 100)
	x.WaitCommitted(t, 100, 120*time.Second)

	// A second app on the same registry whose first batch is vetoed.
	veto := errors.New("vetoed")
	vetoed := conformance.Start(t, env.Config(app+"-veto", "a", config.ExactlyOnce), conformance.Upper(in, out, nil), eos.Metrics(reg),
		eos.BeforeCommit(func(context.Context, eos.BatchInfo) error { return veto }))
	if err := vetoed.Wait(t, 120*time.Second); !errors.Is(err, veto) {
		t.Fatalf("the vetoing app: %v, want the veto", err)
	}

	committed := fmt.Sprintf(`sum(eosflow_batches_committed_total{app=%q,instance="a",guarantee="exactly-once"})`, app)
	var first float64
	conformance.Until(t, 60*time.Second, "Prometheus to see committed batches", func() bool {
		v, ok := promQuery(t, base, committed)
		first = v
		return ok && v >= 1
	})
	aborted := fmt.Sprintf(`sum(eosflow_batches_aborted_total{app=%q,reason="veto"})`, app+"-veto")
	conformance.Until(t, 60*time.Second, "Prometheus to see the vetoed batch", func() bool {
		v, ok := promQuery(t, base, aborted)
		return ok && v == 1
	})
	conformance.Seed(t, env, in, 100)
	x.WaitCommitted(t, 200, 120*time.Second)
	conformance.Until(t, 60*time.Second, "Prometheus to see more committed batches", func() bool {
		v, ok := promQuery(t, base, committed)
		return ok && v > first
	})

	holder := env.Client(t, kgo.TransactionalID(env.Name("holder")), kgo.DefaultProduceTopic(in))
	ctx := context.Background()
	if err := holder.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		if err := holder.ProduceSync(ctx, kgo.StringRecord("open-"+strconv.Itoa(i))).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	plain := env.Client(t, kgo.DefaultProduceTopic(in))
	for i := range 5 {
		if err := plain.ProduceSync(ctx, kgo.StringRecord("behind-"+strconv.Itoa(i))).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	hwQ := fmt.Sprintf(`sum(eosflow_input_lag_records{app=%q})`, app)
	lsoQ := fmt.Sprintf(`sum(eosflow_input_stable_lag_records{app=%q})`, app)
	// A reading may be up to lagMaxAge plus a scrape old: wait for one
	// taken with the transaction open and everything readable committed.
	var hw, lso float64
	for deadline := time.Now().Add(60 * time.Second); ; {
		var okHW, okLSO bool
		hw, okHW = promQuery(t, base, hwQ)
		lso, okLSO = promQuery(t, base, lsoQ)
		if okHW && okLSO && hw >= 10 && lso == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("Prometheus shows high-watermark lag %v and stable lag %v (found: %v %v), want at least 10 and 0 behind the open transaction", hw, lso, okHW, okLSO)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if err := holder.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	x.WaitCommitted(t, 210, 120*time.Second)
	t.Logf("Prometheus saw committed %v, veto 1, high-watermark lag %v and stable lag %v behind the open transaction", first, hw, lso)
}
