package bench

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/eosflow/eosflow/config"

	"github.com/eosflow/eosflow/internal/kafkautil"
	"github.com/eosflow/eosflow/internal/runcfg"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

func TestCPUValueAndCrunch(t *testing.T) {
	sent := time.Unix(0, 1_790_000_000_123_456_789)
	for _, tc := range []struct {
		id   int
		sent time.Time
		size int
	}{{0, time.Time{}, 100}, {123456, time.Time{}, 100}, {7, sent, 100}, {42, sent, 40}} {
		in := cpuValue(tc.id, tc.sent, tc.size)
		if bytes.Contains(in, []byte(`"pad"`)) != (tc.size == 100) || bytes.Contains(in, []byte(`"pad"`)) && len(in) != tc.size {
			t.Errorf("cpuValue(%d) has %d bytes, want %d: %s", tc.id, len(in), tc.size, in)
		}
		var rec CPURecord
		if err := json.Unmarshal(in, &rec); err != nil || rec.ID != int64(tc.id) {
			t.Fatalf("input %s is not JSON with its id: %v", in, err)
		}
		out, err := Crunch(in, CPURounds)
		if err != nil {
			t.Fatal(err)
		}
		again, _ := Crunch(in, CPURounds)
		if !bytes.Equal(out, again) {
			t.Errorf("Crunch is not deterministic: %s, then %s", out, again)
		}
		want := int64(0)
		if !tc.sent.IsZero() {
			want = tc.sent.UnixNano()
		}
		for _, v := range [][]byte{in, out} {
			id, got, ok := parseCPUValue(v)
			if !ok || id != tc.id || got != want {
				t.Errorf("parseCPUValue(%s) = %d, %d, %v; want %d, %d", v, id, got, ok, tc.id, want)
			}
		}
		if !checkCPUOutput(tc.id, out, tc.size, CPURounds) {
			t.Errorf("the right output %s fails the check", out)
		}
		d := Digest(int64(tc.id), rec.Pad, CPURounds)
		wrong := bytes.Replace(out, []byte(hex.EncodeToString(d[:1])), []byte("zz"), 1)
		if checkCPUOutput(tc.id, out, tc.size, CPURounds+1) {
			t.Errorf("an output of %d rounds passes the check for %d", CPURounds, CPURounds+1)
		}
		if checkCPUOutput(tc.id, wrong, tc.size, CPURounds) || checkCPUOutput(tc.id+1, out, tc.size, CPURounds) || tc.size == 100 && checkCPUOutput(tc.id, out, tc.size+1, CPURounds) {
			t.Errorf("a wrong digest, id or size passes the check: %s", wrong)
		}
	}
	if a, b := Digest(1, "x", CPURounds), Digest(2, "x", CPURounds); a == b {
		t.Error("records with the same pad get the same digest")
	}
	if _, err := Crunch([]byte("id=1;xxxx"), CPURounds); !errors.Is(err, errNotCPURecord) {
		t.Errorf("a value of the upper pipeline: %v", err)
	}
	for _, bad := range []string{"", `{"id":`, `{"t":1,"id":2}`, `{"id":1}`, `{"id":x,"t":1}`} {
		if _, _, ok := parseCPUValue([]byte(bad)); ok {
			t.Errorf("parseCPUValue(%q) accepted", bad)
		}
	}
}

// workRounds is the rounds the worker tests run, other than CPURounds so
// that outputs computed at the default fail the check.
const workRounds = 7

// BenchmarkCrunch measures the cpu pipeline's transform on a 100-byte
// value; CPURounds is set so that it takes about 50 µs.
func BenchmarkCrunch(b *testing.B) {
	v := cpuValue(12345, time.Time{}, 100)
	for b.Loop() {
		if _, err := Crunch(v, CPURounds); err != nil {
			b.Fatal(err)
		}
	}
}

func TestCPUOptionsAndPlan(t *testing.T) {
	o := Options{Pipeline: PipelineCPU}
	o.defaults()
	if err := o.validate(); err != nil {
		t.Fatal(err)
	}
	if o.CPURounds != CPURounds {
		t.Errorf("default rounds %d, want %d", o.CPURounds, CPURounds)
	}
	var names []string
	for _, c := range o.plan() {
		names = append(names, c.name)
		if c.pipeline != PipelineCPU || c.workers < 1 {
			t.Errorf("%s: pipeline %q, workers %d", c.name, c.pipeline, c.workers)
		}
	}
	if got := strings.Join(names, ","); got != "exactly-once/workers-1,exactly-once/workers-2,raw-franz-go/workers-1,raw-franz-go/workers-2,kafka-streams/threads-1,kafka-streams/threads-2" {
		t.Errorf("plan: %s", got)
	}

	// Upper with workers: every case once per count, Kafka Streams by threads.
	o = Options{Workers: []int{2}, Cases: []string{AtMostOnce, KafkaStreams}}
	o.defaults()
	if err := o.validate(); err != nil {
		t.Fatal(err)
	}
	if cs := o.plan(); len(cs) != 2 || cs[0].name != "at-most-once/workers-2" || cs[1].name != "kafka-streams/threads-2" || cs[1].workers != 2 {
		t.Errorf("plan: %+v", cs)
	}
	// Upper without workers keeps its names.
	o = Options{Workers: []int{1}, Cases: []string{AtMostOnce}}
	o.defaults()
	if cs := o.plan(); len(cs) != 1 || cs[0].name != AtMostOnce {
		t.Errorf("plan: %+v", cs)
	}

	for _, tc := range []struct {
		o    Options
		want string
	}{
		{Options{Pipeline: PipelineCPU, Workers: []int{0}}, "from 1 to"},
		{Options{Pipeline: PipelineCPU, Workers: []int{1, 300}}, "from 1 to"},
		{Options{Pipeline: PipelineCPU, Workers: []int{2, 2}}, "twice"},
		{Options{Pipeline: PipelineCount, Workers: []int{1, 2}}, "stateless"},
		{Options{Pipeline: PipelineCPU, Cases: []string{AtMostOnce}}, "raw-franz-go"},
	} {
		tc.o.defaults()
		if err := tc.o.validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want an error naming %q", tc.o, err, tc.want)
		}
	}
}

// The report sets each workers-N row against the same case at the fewest
// workers, and judges the framework's 2 against 1 by TargetWorkers2.
func TestReportWorkers(t *testing.T) {
	o := Options{Pipeline: PipelineCPU, Records: 10, RecordSize: 100, Rate: 1, LatencyDuration: time.Second}
	o.defaults()
	h := &harness{o: &o, broker: "b"}
	cases := o.plan()
	rate := map[string]float64{"exactly-once/workers-1": 1000, "exactly-once/workers-2": 1700, "raw-franz-go/workers-1": 1100, "raw-franz-go/workers-2": 1500,
		"kafka-streams/threads-1": 300, "kafka-streams/threads-2": 500}
	runs := make([][]runResult, len(cases))
	for i, c := range cases {
		runs[i] = []runResult{{rate: rate[c.name], cpuPerRecord: 50 * time.Microsecond}}
	}
	rep := h.report(cases, runs, make([]error, len(cases)), nil)
	for _, r := range rep.Results {
		// The other goals hold at each worker count, against the same count.
		var same []Target
		for _, tg := range r.Targets {
			if strings.HasSuffix(tg.Against, "s-"+strconv.Itoa(r.Workers)) {
				same = append(same, tg)
			}
		}
		if strings.HasPrefix(r.Name, ExactlyOnce) && (len(same) != 2 || same[0].Against != fmt.Sprintf("raw-franz-go/workers-%d", r.Workers) ||
			same[1].Against != fmt.Sprintf("kafka-streams/threads-%d", r.Workers)) {
			t.Errorf("%s: goals at its own worker count %+v, want raw-franz-go and kafka-streams", r.Name, same)
		}
		if !strings.HasPrefix(r.Name, ExactlyOnce) && len(r.Targets) != 0 {
			t.Errorf("%s: the goals are the framework's, got %+v", r.Name, r.Targets)
		}
		r.Targets = slices.DeleteFunc(r.Targets, func(tg Target) bool { return slices.Contains(same, tg) })
		if r.Workers == 1 {
			if r.Baseline != nil || len(r.Targets) != 0 {
				t.Errorf("%s: baseline %+v, targets %+v; want none", r.Name, r.Baseline, r.Targets)
			}
			continue
		}
		one := strings.TrimSuffix(r.Name, "2") + "1" // threads-2 against threads-1 for Kafka Streams
		if r.Baseline == nil || r.Baseline.Against != one || r.Baseline.Ratio != rate[r.Name]/rate[one] {
			t.Errorf("%s: baseline %+v, want against %s", r.Name, r.Baseline, one)
		}
		met := rate[r.Name]/rate[one] >= TargetWorkers2
		if !strings.HasPrefix(r.Name, ExactlyOnce) {
			if len(r.Targets) != 0 {
				t.Errorf("%s: the workers goal is the framework's, got targets %+v", r.Name, r.Targets)
			}
			continue
		}
		if len(r.Targets) != 1 || r.Targets[0].Want != TargetWorkers2 || r.Targets[0].Met != met || r.Targets[0].CPURatio != 1 {
			t.Errorf("%s: targets %+v, want one met=%v", r.Name, r.Targets, met)
		}
	}
}

// hasTarget says whether r has a goal against the case named against.
func hasTarget(r Result, against string) bool {
	return slices.ContainsFunc(r.Targets, func(t Target) bool { return t.Against == against })
}

// The cpu pipeline on the embedded broker through Run: each case at one
// and two workers moves every record once, and the sampled digests match.
func TestRunCPUCases(t *testing.T) {
	if testing.Short() {
		t.Skip("runs four pipelines")
	}
	rep := shortRun(t, Options{Pipeline: PipelineCPU, Cases: []string{ExactlyOnce, RawFranzGo}, Workers: []int{1, 2},
		Rate: 1000, LatencyDuration: 300 * time.Millisecond, CPURounds: workRounds})
	if len(rep.Results) != 4 {
		t.Fatalf("%d results, want 4", len(rep.Results))
	}
	for _, r := range rep.Results {
		checkRan(t, r)
		if r.Workload.CPURounds != workRounds {
			t.Errorf("%s: workload of %d rounds, want %d", r.Name, r.Workload.CPURounds, workRounds)
		}
		if r.Invalid != 0 || r.LatencySamples == 0 {
			t.Errorf("%s: %d invalid outputs, %d latency samples", r.Name, r.Invalid, r.LatencySamples)
		}
		if r.Workers == 2 && (r.Baseline == nil || r.Engine == EngineFramework && !hasTarget(r, "exactly-once/workers-1")) {
			t.Errorf("%s: no comparison with one worker: %+v", r.Name, r)
		}
		if r.Engine == EngineFramework && !hasTarget(r, fmt.Sprintf("raw-franz-go/workers-%d", r.Workers)) {
			t.Errorf("%s: no goal against the raw loop at its worker count: %+v", r.Name, r.Targets)
		}
	}
}

// Two workers of each kind, on the embedded broker: every output is the
// right transform of its input, and every input comes out exactly once
// for a read_committed reader.
func TestWorkCPUTwoWorkers(t *testing.T) {
	if testing.Short() {
		t.Skip("runs two pipelines")
	}
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(4, "cpu-in", "cpu-out-"+ExactlyOnce, "cpu-out-"+RawFranzGo))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	brokers := c.ListenAddrs()
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	const n, size = 600, 100
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	if err := kafkautil.ProduceAll(ctx, cl, n, func(id int) *kgo.Record {
		return &kgo.Record{Topic: "cpu-in", Key: key(id, 50), Value: cpuValue(id, time.Time{}, size)}
	}); err != nil {
		t.Fatal(err)
	}
	for _, kind := range []string{ExactlyOnce, RawFranzGo} {
		t.Run(kind, func(t *testing.T) {
			out := "cpu-out-" + kind
			spec := WorkerSpec{Case: kind, Brokers: brokers, Input: "cpu-in", Output: out, AppID: "cpu-" + kind,
				CommitInterval: 20 * time.Millisecond, BatchRecords: 50, Pipeline: PipelineCPU, Workers: 2, Rounds: workRounds}
			wctx, stop := context.WithCancel(ctx)
			done := make(chan error, 1)
			go func() { done <- Work(wctx, spec, &bytes.Buffer{}) }()
			seen := readCPUOutputs(t, ctx, brokers, out, n, size)
			// Two workers are two transactional producers in one group:
			// one id each, both of which committed.
			txs, err := kadm.NewClient(cl).ListTransactions(ctx, nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			var ids []string
			for _, tx := range txs.Sorted() {
				if strings.HasPrefix(tx.TxnID, spec.AppID+":") {
					ids = append(ids, tx.TxnID)
				}
			}
			one := config.Config{AppID: spec.AppID, InstanceID: "bench"}
			if want := []string{runcfg.TransactionalID(runcfg.ForWorker(one, 0)), runcfg.TransactionalID(runcfg.ForWorker(one, 1))}; !slices.Equal(ids, want) {
				t.Errorf("transactional ids %v, want %v", ids, want)
			}
			stop()
			if err := <-done; err != nil {
				t.Fatalf("worker: %v", err)
			}
			if len(seen) != n {
				t.Errorf("%d distinct outputs, want %d", len(seen), n)
			}
		})
	}
}

// readCPUOutputs reads topic read_committed until n distinct ids came
// out, failing on a duplicate or a wrong transform, and then for another
// half second, in which nothing more may come.
func readCPUOutputs(t *testing.T, ctx context.Context, brokers []string, topic string, n, size int) map[int]bool {
	t.Helper()
	rd, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumeTopics(topic),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	seen := map[int]bool{}
	var settle time.Time
	for settle.IsZero() || time.Now().Before(settle) {
		pctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
		fs := rd.PollFetches(pctx)
		cancel()
		if ctx.Err() != nil {
			t.Fatalf("%d of %d outputs before the deadline", len(seen), n)
		}
		fs.EachRecord(func(r *kgo.Record) {
			id, _, ok := parseCPUValue(r.Value)
			switch {
			case !ok || !checkCPUOutput(id, r.Value, size, workRounds):
				t.Errorf("output %s is no input's right transform", r.Value)
			case seen[id]:
				t.Errorf("id %d came out twice", id)
			case !bytes.Equal(r.Key, key(id, 50)):
				t.Errorf("id %d came out under key %s", id, r.Key)
			}
			seen[id] = true
		})
		if len(seen) >= n && settle.IsZero() {
			settle = time.Now().Add(500 * time.Millisecond)
		}
	}
	return seen
}
