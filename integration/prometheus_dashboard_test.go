package integration

import (
	"context"
	"encoding/json"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/eosflow/eosflow/config"
	"github.com/eosflow/eosflow/tools/conformance"
	"github.com/twmb/franz-go/pkg/kgo"
)

// dashboardExprs returns every PromQL expression of the Grafana dashboard,
// with the title of its panel.
func dashboardExprs(t *testing.T) map[string]string {
	t.Helper()
	b, err := os.ReadFile("../deploy/grafana/dashboards/eosflow.json")
	if err != nil {
		t.Fatal(err)
	}
	type panel struct {
		Title   string `json:"title"`
		Targets []struct {
			Expr string `json:"expr"`
		} `json:"targets"`
		Panels []json.RawMessage `json:"panels"`
	}
	var d struct {
		Panels []json.RawMessage `json:"panels"`
	}
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	var walk func(raw []json.RawMessage)
	walk = func(raw []json.RawMessage) {
		for _, r := range raw {
			var p panel
			if err := json.Unmarshal(r, &p); err != nil {
				t.Fatal(err)
			}
			for _, tg := range p.Targets {
				out[tg.Expr] = p.Title
			}
			walk(p.Panels)
		}
	}
	walk(d.Panels)
	return out
}

// promSeries returns how many series an instant query answers, failing t
// when Prometheus refuses the query.
func promSeries(t *testing.T, base, q string) int {
	t.Helper()
	return len(promResult(t, base, q))
}

// Every query of deploy/grafana/dashboards/eosflow.json, with the
// dashboard's variables set to a running pipeline, is valid PromQL for a
// real Prometheus and answers with that pipeline's series (the aborts
// query only once a batch aborted, so it only has to be accepted).
//
//	integration/prometheus/prom.sh start 127.0.0.1:19464
//	EOS_KAFKA_BROKERS=127.0.0.1:19900 EOS_PROMETHEUS_URL=http://127.0.0.1:19090 \
//	  go test -run TestPrometheusAnswersDashboard -v ./integration/
func TestPrometheusAnswersDashboard(t *testing.T) {
	base := os.Getenv("EOS_PROMETHEUS_URL")
	if os.Getenv("EOS_KAFKA_BROKERS") == "" || base == "" {
		t.Skip("set EOS_KAFKA_BROKERS and EOS_PROMETHEUS_URL (integration/prometheus/prom.sh start) to run against a real Prometheus")
	}
	target := os.Getenv("EOS_PROMETHEUS_TARGET")
	if target == "" {
		target = "127.0.0.1:19464" // prom.sh's default target
	}
	exprs := dashboardExprs(t)
	if len(exprs) < 10 {
		t.Fatalf("only %d queries in the dashboard", len(exprs))
	}
	env := realEnv(t)
	in, out := env.Name("in"), env.Name("out")
	env.CreateTopics(t, 2, in, out)
	app := env.Name("app")
	cfg := env.Config(app, "a", config.ExactlyOnce)
	cfg.MetricsAddr = target
	x := conformance.Start(t, cfg, conformance.Upper(in, out, nil))
	conformance.Seed(t, env, in, 100)
	x.WaitCommitted(t, 100, 120*time.Second)

	// Records keep coming, so that rates and latency quantiles over the
	// last minute have batches to show.
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	cl := env.Client(t, kgo.DefaultProduceTopic(in))
	wg.Go(func() {
		for i := 0; ctx.Err() == nil; i++ {
			_ = cl.ProduceSync(ctx, kgo.KeyStringRecord(strconv.Itoa(i), "record-"+strconv.Itoa(i))).FirstErr()
			time.Sleep(20 * time.Millisecond)
		}
	})
	defer func() { cancel(); wg.Wait() }()

	vars := strings.NewReplacer("$__rate_interval", "1m", "$app", regexp.QuoteMeta(app), "$instance", "a")
	for expr, panel := range exprs {
		q := vars.Replace(expr)
		if strings.HasSuffix(strings.TrimSpace(q), "> 0") {
			promSeries(t, base, q) // accepted; empty until something aborts
			continue
		}
		var n int
		conformance.Until(t, 90*time.Second, "Prometheus to answer panel "+strconv.Quote(panel)+": "+q, func() bool {
			n = promSeries(t, base, q)
			return n > 0
		})
		t.Logf("%-50s %d series", panel, n)
	}
}
