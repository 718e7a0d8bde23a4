package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// What `top` reads from the pipelines' /metrics endpoints: one scrape per
// endpoint and frame, turned into rates between two scrapes.

// metricsURL completes a --metrics value: "host:port" becomes
// http://host:port/metrics, and a URL without a path gets /metrics.
func metricsURL(s string) (string, error) {
	if !strings.Contains(s, "://") {
		s = "http://" + s
	}
	u, err := url.Parse(s)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return "", fmt.Errorf("--metrics %q is not a host:port or an http(s) URL", s)
	}
	if u.Path == "" || u.Path == "/" {
		u.Path = "/metrics"
	}
	return u.String(), nil
}

// readyzURL is the /readyz beside a /metrics URL, or "" when the metrics
// are served under another path, so readiness cannot be guessed.
func readyzURL(metrics string) string {
	u, err := url.Parse(metrics)
	if err != nil || !strings.HasSuffix(u.Path, "/metrics") {
		return ""
	}
	u.Path = strings.TrimSuffix(u.Path, "/metrics") + "/readyz"
	u.RawQuery = ""
	return u.String()
}

// scrape is one reading of one endpoint: its metric families, when they
// were read, and whether the instance answered /readyz with 200.
type scrape struct {
	url      string
	at       time.Time
	families map[string]*dto.MetricFamily
	ready    *bool  // nil when unknown
	notReady string // /readyz's reason when not ready
	err      error
}

// scrapeAll reads every endpoint at once.
func scrapeAll(ctx context.Context, hc *http.Client, urls []string) []scrape {
	out := make([]scrape, len(urls))
	var wg sync.WaitGroup
	for i, u := range urls {
		wg.Go(func() { out[i] = scrapeOne(ctx, hc, u) })
	}
	wg.Wait()
	return out
}

// scrapeOne reads an endpoint's text exposition and its /readyz.
func scrapeOne(ctx context.Context, hc *http.Client, u string) scrape {
	s := scrape{url: u, at: time.Now()}
	body, status, err := get(ctx, hc, u, "text/plain;version=0.0.4")
	switch {
	case err != nil:
		s.err = fmt.Errorf("cannot scrape metrics URL %s: %w — check --metrics and that the pipeline sets metrics_addr", u, err)
		return s
	case status != http.StatusOK:
		s.err = fmt.Errorf("metrics URL %s answered %d: %s", u, status, firstLine(body))
		return s
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	s.families, err = p.TextToMetricFamilies(strings.NewReader(body))
	if err != nil {
		s.err = fmt.Errorf("metrics URL %s does not serve the Prometheus text format: %v", u, err)
		return s
	}
	if rz := readyzURL(u); rz != "" {
		if body, status, err := get(ctx, hc, rz, ""); err == nil {
			ok := status == http.StatusOK
			s.ready = &ok
			if !ok {
				s.notReady = firstLine(body)
			}
		}
	}
	return s
}

// get fetches u, returning its body and status; the error of a request
// that got no answer leaves the URL out, since callers name it.
func get(ctx context.Context, hc *http.Client, u, accept string) (string, int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return "", 0, err
	}
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	resp, err := hc.Do(req)
	if err != nil {
		if ue, ok := errors.AsType[*url.Error](err); ok {
			err = ue.Err
		}
		return "", 0, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	return string(b), resp.StatusCode, err
}

// firstLine is s up to its first line break, trimmed.
func firstLine(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	return s
}

// reading is one instance's series in one scrape.
type reading struct {
	guarantee                             string
	committed, in, out                    float64
	aborted                               map[string]float64
	running, fenced, assigned, generation float64
	commit                                buckets
}

// buckets is a histogram's cumulative counts by upper bound, the +Inf
// bucket being count.
type buckets struct {
	bounds []float64
	counts []float64
	count  float64
}

// readings are the instances of app in a scrape, by their instance label.
func (s scrape) readings(app string) map[string]*reading {
	out := map[string]*reading{}
	for name, f := range s.families {
		if !strings.HasPrefix(name, "eosflow_") {
			continue
		}
		for _, m := range f.GetMetric() {
			l := labelsOf(m)
			if l["app"] != app {
				continue
			}
			r := out[l["instance"]]
			if r == nil {
				r = &reading{guarantee: l["guarantee"], aborted: map[string]float64{}}
				out[l["instance"]] = r
			}
			v := m.GetCounter().GetValue() + m.GetGauge().GetValue() + m.GetUntyped().GetValue()
			switch name {
			case "eosflow_batches_committed_total":
				r.committed = v
			case "eosflow_batches_aborted_total":
				r.aborted[l["reason"]] = v
			case "eosflow_records_in_total":
				r.in = v
			case "eosflow_records_out_total":
				r.out = v
			case "eosflow_running":
				r.running = v
			case "eosflow_fenced":
				r.fenced = v
			case "eosflow_assigned_partitions":
				r.assigned = v
			case "eosflow_group_generation":
				r.generation = v
			case "eosflow_commit_duration_seconds":
				h := m.GetHistogram()
				r.commit = buckets{count: float64(h.GetSampleCount()) + h.GetSampleCountFloat()}
				for _, b := range h.GetBucket() {
					r.commit.bounds = append(r.commit.bounds, b.GetUpperBound())
					r.commit.counts = append(r.commit.counts, float64(b.GetCumulativeCount())+b.GetCumulativeCountFloat())
				}
			}
		}
	}
	return out
}

// apps lists the app labels of the eosflow series in a scrape, for the
// note on an endpoint that serves other apps than the one asked for.
func (s scrape) apps() []string {
	var out []string
	for name, f := range s.families {
		if !strings.HasPrefix(name, "eosflow_") {
			continue // a program's own metrics may carry an app label too
		}
		for _, m := range f.GetMetric() {
			if a, ok := labelsOf(m)["app"]; ok && !slices.Contains(out, a) {
				out = append(out, a)
			}
		}
	}
	slices.Sort(out)
	return out
}

// labelsOf is a metric's labels as a map.
func labelsOf(m *dto.Metric) map[string]string {
	l := make(map[string]string, len(m.GetLabel()))
	for _, p := range m.GetLabel() {
		l[p.GetName()] = p.GetValue()
	}
	return l
}

// increase is how much a counter grew from prev to cur; a counter that
// went down was reset (the instance restarted), so all of cur is new.
func increase(prev, cur float64) float64 {
	if cur < prev {
		return cur
	}
	return cur - prev
}

// since is the histogram of the observations made between prev and cur
// (all of cur after a reset).
func (cur buckets) since(prev buckets) buckets {
	if cur.count < prev.count || !slices.Equal(cur.bounds, prev.bounds) {
		return cur
	}
	d := buckets{bounds: cur.bounds, count: cur.count - prev.count, counts: make([]float64, len(cur.counts))}
	for i := range cur.counts {
		d.counts[i] = cur.counts[i] - prev.counts[i]
	}
	return d
}

// add merges o into b, bucket by bucket, for a quantile over instances.
func (b buckets) add(o buckets) buckets {
	if len(b.bounds) == 0 {
		return buckets{bounds: o.bounds, counts: slices.Clone(o.counts), count: o.count}
	}
	if !slices.Equal(b.bounds, o.bounds) {
		return b // instances of different versions; keep the first's
	}
	for i := range b.counts {
		b.counts[i] += o.counts[i]
	}
	b.count += o.count
	return b
}

// quantile estimates the q-quantile as Prometheus' histogram_quantile
// does: linear within the bucket the rank falls in, the highest finite
// bound when it falls in +Inf. ok is false with no observations.
func (b buckets) quantile(q float64) (v float64, ok bool) {
	if b.count <= 0 {
		return 0, false
	}
	rank := q * b.count
	lower, below := 0.0, 0.0
	for i, upper := range b.bounds {
		if b.counts[i] >= rank {
			if math.IsInf(upper, 1) {
				return lower, true
			}
			if b.counts[i] == below {
				return upper, true
			}
			return lower + (upper-lower)*(rank-below)/(b.counts[i]-below), true
		}
		lower, below = upper, b.counts[i]
	}
	return lower, true
}
