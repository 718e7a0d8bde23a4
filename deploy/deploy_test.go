// Package deploy_test checks the files under deploy/ and the observability
// profile of docker-compose.yml against what eosflow really exposes: every
// metric and label the Grafana dashboard queries must be served by a
// running pipeline, and every file the compose services mount must exist.
package deploy_test

import (
	"encoding/json"
	"io"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/VictoriaMetrics/metricsql"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"go.yaml.in/yaml/v3"

	"github.com/eosflow/eosflow/config"
	"github.com/eosflow/eosflow/tools/conformance"
	"github.com/eosflow/eosflow/tools/kafkatest"
)

const (
	dashboardFile = "grafana/dashboards/eosflow.json"
	composeFile   = "../docker-compose.yml"
	promFile      = "prometheus/prometheus.yml"
	// demoMetricsAddr is the address docker-compose.yml tells the demo to
	// serve on, which the Prometheus config must scrape.
	demoMetricsAddr = "127.0.0.1:9464"
)

// query is one PromQL expression of the dashboard and where it is.
type query struct {
	where string // panel title
	expr  string
}

// dashboard reads the dashboard's queries (panels in rows included) and
// its label_values variable queries.
func dashboard(t *testing.T) (queries []query, variables []query) {
	t.Helper()
	b, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		UID        string  `json:"uid"`
		Panels     []panel `json:"panels"`
		Templating struct {
			List []struct {
				Name       string `json:"name"`
				Type       string `json:"type"`
				Definition string `json:"definition"`
			} `json:"list"`
		} `json:"templating"`
	}
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("%s: %v", dashboardFile, err)
	}
	var walk func(ps []panel)
	walk = func(ps []panel) {
		for _, p := range ps {
			for _, tg := range p.Targets {
				queries = append(queries, query{p.Title, tg.Expr})
			}
			walk(p.Panels)
		}
	}
	walk(d.Panels)
	for _, v := range d.Templating.List {
		if v.Type == "query" {
			variables = append(variables, query{"variable " + v.Name, v.Definition})
		}
	}
	return queries, variables
}

// panel is what the test reads of a dashboard panel.
type panel struct {
	Title   string `json:"title"`
	Targets []struct {
		Expr string `json:"expr"`
	} `json:"targets"`
	Panels []panel `json:"panels"` // a collapsed row's
}

// grafanaVars are the dashboard's template variables, replaced by values
// so the expressions parse as PromQL.
var grafanaVars = strings.NewReplacer("$__rate_interval", "1m", "$__interval", "15s", "$__range", "1h")

// selectors parses expr and returns the metric name of every selector in
// it, with the label names it filters on, and the labels of every `by`
// grouping with the metrics grouped.
func selectors(t *testing.T, q query) (metrics map[string][]string, groupings map[string][]string) {
	t.Helper()
	e, err := metricsql.Parse(grafanaVars.Replace(q.expr))
	if err != nil {
		t.Fatalf("panel %q: %q does not parse: %v", q.where, q.expr, err)
	}
	metrics, groupings = map[string][]string{}, map[string][]string{}
	metricsql.VisitAll(e, func(x metricsql.Expr) {
		switch x := x.(type) {
		case *metricsql.MetricExpr:
			for _, group := range x.LabelFilterss {
				var name string
				var labels []string
				for _, f := range group {
					if f.Label == "__name__" {
						name = f.Value
					} else {
						labels = append(labels, f.Label)
					}
				}
				if name == "" {
					t.Errorf("panel %q: a selector without a metric name in %q", q.where, q.expr)
					continue
				}
				metrics[name] = append(metrics[name], labels...)
			}
		case *metricsql.AggrFuncExpr:
			if x.Modifier.Op != "by" {
				return
			}
			for _, arg := range x.Args {
				metricsql.VisitAll(arg, func(y metricsql.Expr) {
					if m, ok := y.(*metricsql.MetricExpr); ok {
						for _, group := range m.LabelFilterss {
							for _, f := range group {
								if f.Label == "__name__" {
									groupings[f.Value] = append(groupings[f.Value], x.Modifier.Args...)
								}
							}
						}
					}
				})
			}
		}
	})
	return metrics, groupings
}

// exposed scrapes url and returns every series name it serves (a
// histogram as its _bucket, _sum and _count series) with the label names
// its series carry.
func exposed(t *testing.T, url string) map[string]map[string]bool {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(strings.NewReader(string(body)))
	if err != nil {
		t.Fatalf("%s: %v", url, err)
	}
	out := map[string]map[string]bool{}
	add := func(name string, m *dto.Metric, extra ...string) {
		if out[name] == nil {
			out[name] = map[string]bool{}
		}
		for _, l := range m.GetLabel() {
			out[name][l.GetName()] = true
		}
		for _, l := range extra {
			out[name][l] = true
		}
	}
	for name, f := range fams {
		for _, m := range f.GetMetric() {
			switch f.GetType() {
			case dto.MetricType_HISTOGRAM:
				add(name+"_bucket", m, "le")
				add(name+"_sum", m)
				add(name+"_count", m)
			case dto.MetricType_SUMMARY:
				add(name, m, "quantile")
				add(name+"_sum", m)
				add(name+"_count", m)
			default:
				add(name, m)
			}
		}
	}
	return out
}

// labelValues matches a variable's label_values(metric, label) query.
var labelValues = regexp.MustCompile(`^label_values\(\s*([a-zA-Z_:][a-zA-Z0-9_:]*)(\{.*\})?\s*,\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*\)$`)

// A running pipeline on the embedded broker serves every metric the
// dashboard queries, with every label it filters or groups on.
func TestDashboardQueriesWhatPipelinesExpose(t *testing.T) {
	queries, variables := dashboard(t)
	if len(queries) < 10 {
		t.Fatalf("only %d queries in %s", len(queries), dashboardFile)
	}
	// metric → labels the dashboard needs on it, and where.
	want := map[string]map[string]string{}
	need := func(metric, label, where string) {
		if want[metric] == nil {
			want[metric] = map[string]string{}
		}
		want[metric][label] = where
	}
	for _, q := range queries {
		metrics, groupings := selectors(t, q)
		for m, labels := range metrics {
			need(m, "", q.where)
			for _, l := range labels {
				need(m, l, q.where)
			}
		}
		for m, labels := range groupings {
			for _, l := range labels {
				need(m, l, q.where)
			}
		}
	}
	for _, v := range variables {
		m := labelValues.FindStringSubmatch(v.expr)
		if m == nil {
			t.Errorf("%s: %q is not label_values(metric, label)", v.where, v.expr)
			continue
		}
		need(m[1], m[3], v.where)
		if m[2] != "" {
			metrics, _ := selectors(t, query{v.where, m[1] + m[2]})
			for _, l := range metrics[m[1]] {
				need(m[1], l, v.where)
			}
		}
	}
	// The runtime's metrics the dashboard must show at least.
	for _, m := range []string{
		"eosflow_records_in_total", "eosflow_records_out_total", "eosflow_batches_committed_total", "eosflow_batches_aborted_total",
		"eosflow_batch_duration_seconds_bucket", "eosflow_commit_duration_seconds_bucket", "eosflow_input_lag_records",
		"eosflow_input_stable_lag_records", "eosflow_restore_remaining_offsets", "eosflow_restore_records_total", "eosflow_fenced",
		"eosflow_running", "eosflow_assigned_partitions", "eosflow_group_generation", "eosflow_client_rebuilds_total",
	} {
		if want[m] == nil {
			t.Errorf("the dashboard has no panel on %s", m)
		}
	}
	if want["eosflow_batches_aborted_total"]["reason"] == "" {
		t.Error("the dashboard does not break aborts down by reason")
	}

	env := kafkatest.Fake(t)
	env.CreateTopics(t, 2, "in", "out")
	conformance.Seed(t, env, "in", 200)
	cfg := env.Config("orders", "worker-0", config.ExactlyOnce)
	cfg.MetricsAddr = "127.0.0.1:0"
	cfg.MaxBatchRecords = 50
	x := conformance.Start(t, cfg, conformance.Upper("in", "out", nil))
	x.WaitCommitted(t, 200, 60*time.Second)
	url := "http://" + x.R.MetricsAddr() + "/metrics"

	// Lag is read from the brokers when scraped: scrape until every metric
	// the dashboard needs is there, or report what is missing.
	var missing []string
	deadline := time.Now().Add(30 * time.Second)
	for {
		got := exposed(t, url)
		missing = missing[:0]
		for _, m := range slices.Sorted(maps.Keys(want)) {
			for _, l := range slices.Sorted(maps.Keys(want[m])) {
				switch {
				case got[m] == nil && l == "":
					missing = append(missing, m+" (panel "+want[m][l]+")")
				case got[m] != nil && l != "" && !got[m][l]:
					missing = append(missing, m+" label "+l+" (panel "+want[m][l]+")")
				}
			}
		}
		if len(missing) == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(500 * time.Millisecond)
	}
	for _, m := range missing {
		t.Errorf("the dashboard queries %s, which a running pipeline does not expose", m)
	}
}

// compose is what the test reads of docker-compose.yml.
type compose struct {
	Services map[string]struct {
		Image       string            `yaml:"image"`
		Profiles    []string          `yaml:"profiles"`
		NetworkMode string            `yaml:"network_mode"`
		Command     []string          `yaml:"command"`
		Environment map[string]string `yaml:"environment"`
		Volumes     []string          `yaml:"volumes"`
	} `yaml:"services"`
}

// The observability profile parses, runs Prometheus and Grafana with the
// files of this directory, and they point at each other and at the demo.
func TestComposeObservabilityProfile(t *testing.T) {
	b, err := os.ReadFile(composeFile)
	if err != nil {
		t.Fatal(err)
	}
	var c compose
	if err := yaml.Unmarshal(b, &c); err != nil {
		t.Fatalf("%s: %v", composeFile, err)
	}
	if !strings.Contains(string(b), "--metrics-addr "+demoMetricsAddr) {
		t.Errorf("%s does not say how to run the demo with metrics on %s", composeFile, demoMetricsAddr)
	}
	mounts := map[string]string{} // container path → host path
	for name, image := range map[string]string{"prometheus": "prom/prometheus:", "grafana": "grafana/grafana:"} {
		s, ok := c.Services[name]
		if !ok {
			t.Errorf("no service %s", name)
			continue
		}
		if !slices.Equal(s.Profiles, []string{"observability"}) || !strings.Contains(s.Image, image) || s.NetworkMode != "host" {
			t.Errorf("service %s: profiles %v, image %q, network_mode %q", name, s.Profiles, s.Image, s.NetworkMode)
		}
		for _, v := range s.Volumes {
			parts := strings.Split(v, ":")
			if len(parts) < 2 || !strings.HasPrefix(parts[0], "./") {
				t.Errorf("service %s: volume %q is not a file of the repository", name, v)
				continue
			}
			host := filepath.Join("..", parts[0])
			if _, err := os.Stat(host); err != nil {
				t.Errorf("service %s mounts %s: %v", name, parts[0], err)
			}
			mounts[parts[1]] = host
		}
	}
	prom := c.Services["prometheus"]
	if !slices.Contains(prom.Command, "--config.file=/etc/prometheus/prometheus.yml") || mounts["/etc/prometheus/prometheus.yml"] != filepath.Join("..", "deploy", promFile) {
		t.Errorf("prometheus does not run with %s: command %v, mounts %v", promFile, prom.Command, mounts)
	}
	graf := c.Services["grafana"].Environment
	if graf["GF_AUTH_ANONYMOUS_ENABLED"] != "true" || graf["GF_AUTH_ANONYMOUS_ORG_ROLE"] != "Viewer" || graf["EOS_PROMETHEUS_PORT"] == "" {
		t.Errorf("grafana environment: %v", graf)
	}
	if home := graf["GF_DASHBOARDS_DEFAULT_HOME_DASHBOARD_PATH"]; home != "/var/lib/grafana/dashboards/eosflow.json" {
		t.Errorf("home dashboard %q", home)
	}
	if mounts["/etc/grafana/provisioning"] != filepath.Join("..", "deploy", "grafana", "provisioning") ||
		mounts["/var/lib/grafana/dashboards"] != filepath.Join("..", "deploy", "grafana", "dashboards") {
		t.Errorf("grafana mounts %v", mounts)
	}

	var provider struct {
		Providers []struct {
			Type    string `yaml:"type"`
			Options struct {
				Path string `yaml:"path"`
			} `yaml:"options"`
		} `yaml:"providers"`
	}
	readYAML(t, "grafana/provisioning/dashboards/eosflow.yml", &provider)
	if len(provider.Providers) != 1 || provider.Providers[0].Type != "file" || provider.Providers[0].Options.Path != "/var/lib/grafana/dashboards" {
		t.Errorf("dashboard provider: %+v", provider)
	}
	var ds struct {
		Datasources []struct {
			Type string `yaml:"type"`
			URL  string `yaml:"url"`
		} `yaml:"datasources"`
	}
	readYAML(t, "grafana/provisioning/datasources/prometheus.yml", &ds)
	if len(ds.Datasources) != 1 || ds.Datasources[0].Type != "prometheus" || ds.Datasources[0].URL != "http://127.0.0.1:${EOS_PROMETHEUS_PORT}" {
		t.Errorf("datasources: %+v", ds)
	}
	if !slices.Contains(prom.Command, "--web.listen-address=127.0.0.1:${EOS_PROMETHEUS_PORT:-9090}") {
		t.Errorf("prometheus does not listen where the datasource points: %v", prom.Command)
	}

	var pc struct {
		ScrapeConfigs []struct {
			HonorLabels   bool `yaml:"honor_labels"`
			StaticConfigs []struct {
				Targets []string `yaml:"targets"`
			} `yaml:"static_configs"`
		} `yaml:"scrape_configs"`
	}
	readYAML(t, promFile, &pc)
	if len(pc.ScrapeConfigs) != 1 || !pc.ScrapeConfigs[0].HonorLabels || len(pc.ScrapeConfigs[0].StaticConfigs) != 1 ||
		!slices.Contains(pc.ScrapeConfigs[0].StaticConfigs[0].Targets, demoMetricsAddr) {
		t.Errorf("scrape configs: %+v; want honor_labels (the dashboard selects by the pipeline's instance label) and the demo's %s", pc, demoMetricsAddr)
	}
}

// readYAML decodes a file of deploy/, failing t when it does not parse.
func readYAML(t *testing.T, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}
