package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/eosflow/eosflow/config"
	"github.com/eosflow/eosflow/tools/conformance"
	"github.com/eosflow/eosflow/tools/kafkatest"
)

// servedPipeline runs in → upper-case → out as app "orders", instance
// "worker-0", with metrics_addr on a free port, while records keep
// arriving, so that every interval has batches to commit. It returns the
// metrics address and the running pipeline.
func servedPipeline(t *testing.T, env *kafkatest.Env) (string, *conformance.Run) {
	t.Helper()
	env.CreateTopics(t, 2, "in", "out")
	cfg := env.Config("orders", "worker-0", config.ExactlyOnce)
	cfg.MetricsAddr = "127.0.0.1:0"
	x := conformance.Start(t, cfg, conformance.Upper("in", "out", nil))
	conformance.Until(t, 30*time.Second, "metrics served", func() bool { return x.R.MetricsAddr() != "" })
	addr := x.R.MetricsAddr()

	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	cl := env.Client(t, kgo.DefaultProduceTopic("in"))
	wg.Go(func() {
		for i := 0; ctx.Err() == nil; i++ {
			_ = cl.ProduceSync(ctx, kgo.KeyStringRecord(fmt.Sprint(i), fmt.Sprintf("record-%d", i))).FirstErr()
			time.Sleep(5 * time.Millisecond)
		}
	})
	t.Cleanup(func() { cancel(); wg.Wait() })
	x.WaitCommitted(t, 20, 60*time.Second)
	return addr, x
}

// topOnce runs `top --once -o json` and decodes its frame.
func topOnce(t *testing.T, broker, app, metrics string) topJSON {
	t.Helper()
	out, errOut, code := runCLI(t, nil, "--brokers", broker, "-o", "json", "top", app, "--metrics", metrics, "--once", "--interval", "1s")
	if code != exitOK {
		t.Fatalf("exit %d: %s\n%s", code, errOut, out)
	}
	var f topJSON
	if err := json.Unmarshal([]byte(out), &f); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, out)
	}
	return f
}

func TestTopShowsRunningPipeline(t *testing.T) {
	env := kafkatest.Fake(t)
	addr, _ := servedPipeline(t, env)

	f := topOnce(t, env.Brokers[0], "orders", addr)
	if f.App != "orders" || f.CommitsPerSec <= 0 || f.RecordsInPerSec <= 0 || f.RecordsOutPerSec <= 0 || f.CommitP99Seconds == nil || *f.CommitP99Seconds <= 0 {
		t.Errorf("rates of a pipeline committing all along: %+v", f)
	}
	if f.AbortsPerSec != 0 || len(f.Aborts) != 0 {
		t.Errorf("aborts without a fault: %v %+v", f.AbortsPerSec, f.Aborts)
	}
	if len(f.Instances) != 1 {
		t.Fatalf("instances: %+v", f.Instances)
	}
	i := f.Instances[0]
	if i.Instance != "worker-0" || i.URL != "http://"+addr+"/metrics" || !i.Running || i.Fenced || i.Ready == nil || !*i.Ready ||
		i.AssignedPartitions != 2 || i.Generation < 1 || i.CommitsPerSec != f.CommitsPerSec || i.Error != "" || i.Guarantee != "exactly-once" {
		t.Errorf("instance: %+v", i)
	}
	grp := f.Group
	if grp.State != "Stable" || len(grp.Members) != 1 || grp.Members[0].InstanceID != "worker-0" || fmt.Sprint(grp.Members[0].Tasks) != "map[in:[0 1]]" {
		t.Errorf("group: %+v", grp)
	}
	if len(grp.Inputs) != 2 {
		t.Fatalf("inputs: %+v", grp.Inputs)
	}
	// The offsets are read one request after another while records keep
	// coming, so the LSO may pass the HWM read before it.
	for p, in := range grp.Inputs {
		if in.Topic != "in" || in.Partition != int32(p) || in.Committed < 0 || in.HighWatermark < in.Committed || in.LastStableOffset < in.Committed || in.LagLSO < 0 {
			t.Errorf("input partition %d: %+v", p, in)
		}
	}

	// Without APP_ID, the app the endpoint serves.
	out, errOut, code := runCLI(t, nil, "--brokers", env.Brokers[0], "top", "--metrics", addr, "--once", "--interval", "1s")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	t.Logf("frame:\n%s", out)
	for _, want := range []*regexp.Regexp{
		regexp.MustCompile(`(?m)^app orders  `),
		regexp.MustCompile(`(?m)^commits/s [1-9][0-9]*\.[0-9]  aborts/s 0\.0  records in/s [1-9]`),
		regexp.MustCompile(`(?m)^worker-0 +yes +no +yes +2 +[1-9][0-9]* +[1-9]`),
		regexp.MustCompile(`(?m)^Aborts: none$`),
		regexp.MustCompile(`(?m)^Group orders: Stable, 1 member\(s\)$`),
		regexp.MustCompile(`(?m)^worker-0 .* in-0,in-1 `),
		regexp.MustCompile(`(?m)^in +0 +[0-9]+ +[0-9]+ +[0-9]+ +[0-9]+ +[0-9]+`),
		regexp.MustCompile(`(?m)^in +1 +[0-9]+ +[0-9]+ +[0-9]+ +[0-9]+ +[0-9]+`),
	} {
		if !want.MatchString(out) {
			t.Errorf("frame lacks %s", want)
		}
	}
	if strings.Contains(out, "\033[") {
		t.Error("frame not written to a terminal clears the screen")
	}
}

// Every other commit fails on the broker: top shows the aborts under
// commit_error, while the batches redone keep committing.
func TestTopShowsAbortsByReason(t *testing.T) {
	env := kafkatest.Fake(t)
	var commits atomic.Int64
	env.Fake.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.EndTxn}, Err: kerr.UnknownServerError, Count: -1, When: func(req kmsg.Request) bool {
		end, ok := req.(*kmsg.EndTxnRequest)
		return ok && end.Commit && commits.Add(1)%2 == 1
	}})
	addr, _ := servedPipeline(t, env)

	f := topOnce(t, env.Brokers[0], "orders", addr)
	if len(f.Aborts) != 1 || f.Aborts[0].Reason != "commit_error" || f.Aborts[0].PerSec <= 0 || f.Aborts[0].Total < 1 {
		t.Fatalf("aborts %+v, want commit_error only, during the interval too", f.Aborts)
	}
	if f.AbortsPerSec != f.Aborts[0].PerSec || f.Instances[0].AbortsPerSec != f.AbortsPerSec || f.CommitsPerSec <= 0 {
		t.Errorf("rates: %+v", f)
	}

	out, errOut, code := runCLI(t, nil, "--brokers", env.Brokers[0], "top", "orders", "--metrics", addr, "--once", "--interval", "1s")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if !regexp.MustCompile(`(?m)^Aborts by reason:\nREASON +PER SEC +TOTAL\ncommit_error +[0-9]+\.[0-9] +[1-9][0-9]*$`).MatchString(out) {
		t.Errorf("frame does not list the aborts under commit_error:\n%s", out)
	}
}

// An endpoint that serves other apps' metrics is named in the frame with
// the apps it serves, rather than shown as an idle instance.
func TestTopOtherAppsEndpoint(t *testing.T) {
	env := kafkatest.Fake(t)
	addr, _ := servedPipeline(t, env)
	f := topOnce(t, env.Brokers[0], "payments", addr)
	if len(f.Instances) != 1 || !strings.Contains(f.Instances[0].Error, `no eosflow series of app "payments" (this endpoint serves "orders")`) {
		t.Errorf("instances: %+v", f.Instances)
	}
	if f.Group.State != "Dead" || len(f.Group.Members) != 0 {
		t.Errorf("group of an app that never ran: %+v", f.Group)
	}
}

func TestTopUnreachable(t *testing.T) {
	_, addr := newCluster(t, kfake.SeedTopics(1, "in"))
	dead := freeAddr(t)
	_, errOut, code := runCLI(t, nil, "--brokers", addr, "top", "orders", "--metrics", dead, "--once")
	if code != exitFailure || !strings.Contains(errOut, "cannot scrape metrics URL http://"+dead+"/metrics: ") || strings.Count(errOut, "\n") != 1 {
		t.Errorf("unreachable metrics URL: exit %d, stderr %q", code, errOut)
	}

	_, errOut, code = runCLI(t, nil, "--brokers", dead, "--timeout", "2s", "top", "orders", "--metrics", "127.0.0.1:1", "--once")
	if code != exitFailure || !strings.Contains(errOut, "cannot reach broker(s) "+dead) {
		t.Errorf("unreachable broker: exit %d, stderr %q", code, errOut)
	}
}

func TestTopUsage(t *testing.T) {
	for _, args := range [][]string{
		{"top", "orders"},
		{"top", "orders", "--metrics", "127.0.0.1:9464", "--interval", "0s"},
		{"top", "orders", "--metrics", "ftp://host/metrics"},
		{"top", "a", "b", "--metrics", "127.0.0.1:9464"},
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			t.Setenv("EOS_APP_ID", "")
			if _, errOut, code := runCLI(t, nil, args...); code != exitUsage {
				t.Errorf("exit %d, want %d; stderr %s", code, exitUsage, errOut)
			}
		})
	}
}

func TestMetricsURL(t *testing.T) {
	for in, want := range map[string]string{
		"127.0.0.1:9464":                "http://127.0.0.1:9464/metrics",
		"http://host:9464":              "http://host:9464/metrics",
		"https://host/":                 "https://host/metrics",
		"http://host:1/app/metrics?x=1": "http://host:1/app/metrics?x=1",
	} {
		if got, err := metricsURL(in); err != nil || got != want {
			t.Errorf("metricsURL(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	if got := readyzURL("http://host:1/app/metrics?x=1"); got != "http://host:1/app/readyz" {
		t.Errorf("readyzURL: %q", got)
	}
	if got := readyzURL("http://host:1/prom"); got != "" {
		t.Errorf("readyzURL of a path not ending in /metrics: %q", got)
	}
}

func TestQuantile(t *testing.T) {
	inf := math.Inf(1)
	b := func(bounds []float64, counts ...float64) buckets {
		return buckets{bounds: bounds, counts: counts, count: counts[len(counts)-1]}
	}
	bounds := []float64{0.001, 0.002, 0.004, inf}
	cases := []struct {
		name string
		b    buckets
		q    float64
		want float64
		ok   bool
	}{
		{"empty", b(bounds, 0, 0, 0, 0), 0.99, 0, false},
		{"all in the first bucket interpolate from 0", b(bounds, 100, 100, 100, 100), 0.5, 0.0005, true},
		{"in the third bucket", b(bounds, 0, 50, 100, 100), 0.99, 0.002 + 0.002*(99-50)/50, true},
		{"in +Inf: the highest finite bound", b(bounds, 0, 0, 1, 100), 0.99, 0.004, true},
		{"without an explicit +Inf bucket", buckets{bounds: bounds[:3], counts: []float64{0, 0, 1}, count: 100}, 0.99, 0.004, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := tc.b.quantile(tc.q)
			if ok != tc.ok || math.Abs(got-tc.want) > 1e-12 {
				t.Errorf("quantile(%v) = %v, %v; want %v, %v", tc.q, got, ok, tc.want, tc.ok)
			}
		})
	}
	prev := b(bounds, 10, 10, 10, 10)
	cur := b(bounds, 10, 60, 110, 110)
	if d := cur.since(prev); d.count != 100 || fmt.Sprint(d.counts) != "[0 50 100 100]" {
		t.Errorf("since: %+v", d)
	}
	if d := prev.since(cur); d.count != 10 {
		t.Errorf("since across a reset: %+v, want all of the new reading", d)
	}
}

// Without APP_ID, endpoints that serve several apps (or none) leave top
// not knowing which to watch: a usage error that names them.
func TestTopNeedsApp(t *testing.T) {
	_, broker := newCluster(t)
	for body, want := range map[string]string{
		"eosflow_running{app=\"a\",instance=\"x\"} 1\neosflow_running{app=\"b\",instance=\"y\"} 1\n": `the --metrics endpoints serve "a", "b"`,
		"go_goroutines 7\nhttp_requests_total{app=\"shop\"} 3\n":                                     "serve no eosflow series",
	} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, body) }))
		t.Cleanup(srv.Close)
		t.Setenv("EOS_APP_ID", "")
		_, errOut, code := runCLI(t, nil, "--brokers", broker, "top", "--metrics", srv.URL, "--once")
		if code != exitUsage || !strings.Contains(errOut, want) {
			t.Errorf("exit %d, stderr %q; want %d and %q", code, errOut, exitUsage, want)
		}
	}
}

// Frames clear the screen only on a terminal: not in a file, a pipe or
// /dev/null (a character device, but no terminal).
func TestIsTerminal(t *testing.T) {
	devNull, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer devNull.Close()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	for name, out := range map[string]io.Writer{"/dev/null": devNull, "pipe": w, "buffer": &strings.Builder{}} {
		if isTerminal(out) {
			t.Errorf("%s taken for a terminal", name)
		}
	}
}

// Without --once top prints a frame every interval until stopped; an
// instance that stops serving shows in the next frame instead of ending
// top, since a dead instance is what an operator watches for.
func TestTopLiveFrames(t *testing.T) {
	env := kafkatest.Fake(t)
	addr, x := servedPipeline(t, env)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out, errOut syncBuffer
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{"--brokers", env.Brokers[0], "top", "orders", "--metrics", addr, "--interval", "300ms"}, strings.NewReader(""), &out, &errOut)
	}()
	frames := func() int { return strings.Count(out.String(), "app orders  ") }
	conformance.Until(t, 30*time.Second, "two frames", func() bool { return frames() >= 2 })
	x.Stop()
	if err := x.Wait(t, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	gone := "cannot scrape metrics URL http://" + addr + "/metrics"
	conformance.Until(t, 30*time.Second, "a frame naming the stopped instance", func() bool { return strings.Contains(out.String(), gone) })
	n := frames()
	conformance.Until(t, 30*time.Second, "frames after the instance stopped", func() bool { return frames() > n })
	cancel()
	select {
	case code := <-done:
		if code != exitOK {
			t.Errorf("exit %d after being stopped; stderr %s", code, errOut.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatal("top did not stop with its context")
	}
	got := out.String()
	if strings.Contains(got, "\033[") || !strings.Contains(got, "\n\napp orders  ") {
		t.Errorf("frames not to a terminal should follow each other after a blank line, without screen clears:\n%s", got)
	}
	if errOut.String() != "" {
		t.Errorf("stderr: %s", errOut.String())
	}
}
