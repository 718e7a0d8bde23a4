package bench

import (
	"bytes"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

func TestValueRoundTrip(t *testing.T) {
	sent := time.Unix(0, 1_790_000_000_123_456_789)
	for _, tc := range []struct {
		id   int
		sent time.Time
	}{{0, time.Time{}}, {123456, time.Time{}}, {7, sent}} {
		v := value(tc.id, tc.sent, 100)
		if len(v) != 100 {
			t.Fatalf("len %d", len(v))
		}
		for _, in := range [][]byte{v, Upper(v)} {
			id, got, ok := parseValue(in)
			if !ok || id != tc.id || (tc.sent.IsZero() && got != 0) || (!tc.sent.IsZero() && got != tc.sent.UnixNano()) {
				t.Errorf("parseValue(%q) = %d, %d, %v", in, id, got, ok)
			}
		}
	}
	for _, bad := range []string{"", "id=", "id=x;", "xd=1;", "id=12"} {
		if _, _, ok := parseValue([]byte(bad)); ok {
			t.Errorf("parseValue(%q) accepted", bad)
		}
	}
}

func TestUpper(t *testing.T) {
	if got := string(Upper([]byte("id=1;abz-ÄxZ"))); got != "ID=1;ABZ-ÄXZ" {
		t.Errorf("Upper = %q", got)
	}
	if Upper(nil) != nil {
		t.Error("nil value should stay nil")
	}
}

func TestLatencyPercentiles(t *testing.T) {
	var ds []time.Duration
	for i := 1000; i >= 1; i-- {
		ds = append(ds, time.Duration(i)*time.Millisecond)
	}
	p50, p99, p999 := latencyPercentiles(ds)
	if p50 != 500*time.Millisecond || p99 != 990*time.Millisecond || p999 != 999*time.Millisecond {
		t.Errorf("got %v %v %v", p50, p99, p999)
	}
	if a, b, c := latencyPercentiles(nil); a+b+c != 0 {
		t.Error("empty input")
	}
}

func TestSpread(t *testing.T) {
	if m, lo, hi := spread([]float64{3, 1, 2}); m != 2 || lo != 1 || hi != 3 {
		t.Errorf("odd: %v %v %v", m, lo, hi)
	}
	if m, _, _ := spread([]float64{4, 1, 2, 3}); m != 2.5 {
		t.Errorf("even: %v", m)
	}
}

func TestReportRatiosAndTargets(t *testing.T) {
	h := &harness{o: &Options{Records: 10, RecordSize: 100, Rate: 1, LatencyDuration: time.Second}, broker: "b"}
	cases := []caseSpec{
		{name: AtMostOnce, engine: EngineFramework},
		{name: AtLeastOnce, engine: EngineFramework},
		{name: ExactlyOnce, engine: EngineFramework},
		{name: RawFranzGo, engine: EngineFranzGo},
		{name: KafkaStreams, engine: EngineStreams, skipped: "no java"},
	}
	r := func(rate float64, cpu time.Duration) runResult {
		return runResult{rate: rate, cpuPerRecord: cpu, p99: 100 * time.Millisecond, samples: 1}
	}
	runs := [][]runResult{
		{r(1000, 2*time.Microsecond)},
		{r(800, 2*time.Microsecond)},
		{r(700, 2*time.Microsecond), r(760, 2*time.Microsecond), r(740, 2*time.Microsecond)},
		{r(750, time.Microsecond)}, // and a failed run
		nil,
	}
	rep := h.report(cases, runs, []error{nil, nil, nil, errors.New("x"), nil})
	eo := rep.Results[2]
	if eo.RecordsPerSec != 740 || eo.RecordsPerSecMin != 700 || eo.RecordsPerSecMax != 760 || eo.Runs != 3 {
		t.Errorf("median and spread: %+v", eo)
	}
	if eo.RatioToAtMostOnce == nil || *eo.RatioToAtMostOnce != 0.74 {
		t.Errorf("ratio to at-most-once: %v", eo.RatioToAtMostOnce)
	}
	if rep.Results[4].RatioToAtMostOnce != nil || rep.Results[4].Skipped == "" {
		t.Errorf("skipped case: %+v", rep.Results[4])
	}
	if rep.Results[3].Error != "x" {
		t.Errorf("error kept: %+v", rep.Results[3])
	}
	if len(eo.Targets) != 2 || eo.Targets[0].Against != AtLeastOnce || !eo.Targets[0].Met || eo.Targets[0].Ratio != 740.0/800 ||
		eo.Targets[1].Against != RawFranzGo || !eo.Targets[1].Met || eo.Targets[1].CPURatio != 0.5 {
		t.Errorf("targets: %+v", eo.Targets)
	}
	var svg bytes.Buffer
	if err := WriteSVG(&svg, rep); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"<svg", "740", "skipped", "raw-franz-go", "</svg>"} {
		if !strings.Contains(svg.String(), want) {
			t.Errorf("chart lacks %q", want)
		}
	}
}

func TestNiceTicks(t *testing.T) {
	for _, most := range []float64{0, 0.7, 3, 99, 101, 123456, 3016.5} {
		ticks, top := niceTicks(most)
		if top < most || ticks[0] != 0 || ticks[len(ticks)-1] != top || len(ticks) > 7 {
			t.Errorf("niceTicks(%v) = %v, %v", most, ticks, top)
		}
	}
}

func TestOptionsValidate(t *testing.T) {
	o := Options{Cases: []string{"nope"}}
	o.defaults()
	if err := o.validate(); err == nil || !strings.Contains(err.Error(), "raw-franz-go") {
		t.Errorf("unknown case: %v", err)
	}
	o = Options{RecordSize: 10}
	o.defaults()
	if err := o.validate(); err == nil {
		t.Error("record size below 40 accepted")
	}
	o = Options{Sweep: []time.Duration{10 * time.Millisecond}, Cases: []string{AtMostOnce}}
	o.defaults()
	if cs := o.plan(); len(cs) != 2 || cs[1].name != "exactly-once@10ms" || cs[1].commit != 10*time.Millisecond {
		t.Errorf("plan: %+v", cs)
	}
}

func TestInt64BEIsLongSerializerBytes(t *testing.T) {
	c := Int64BE()
	b, err := c.Encode(258)
	if err != nil || !bytes.Equal(b, []byte{0, 0, 0, 0, 0, 0, 1, 2}) {
		t.Fatalf("Encode(258) = %x, %v", b, err)
	}
	if v, err := c.Decode(b); err != nil || v != 258 {
		t.Errorf("Decode = %d, %v", v, err)
	}
	if _, err := c.Decode([]byte("258")); err == nil {
		t.Error("a 3-byte count decoded")
	}
}

// countOut is an output of the count pipeline: key k<k>, count c.
func countOut(k int, c int64) *kgo.Record {
	v, _ := Int64BE().Encode(c)
	return &kgo.Record{Key: key(k, 1<<30), Value: v}
}

func TestCountAccount(t *testing.T) {
	// 10 phase-1 records and 4 latency-phase records over 3 keys: key 0
	// has ids 0,3,6,9,12; key 1 has 1,4,7,10,13; key 2 has 2,5,8,11.
	newObs := func(base int32) *observer {
		return &observer{phase1: 10, total: 14, warmID: 10, sentAt: make([]atomic.Int64, 4),
			acct: newCountAccount(3, 10, 4, base)}
	}
	now := time.Now()
	o := newObs(0)
	o.sent(12, now.Add(-7*time.Millisecond)) // key 0's 5th count
	feed := func(k int, cs ...int64) {
		for _, c := range cs {
			o.acct.record(o, countOut(k, c), now)
		}
	}
	feed(0, 1, 2, 3, 4) // every update
	feed(1, 2, 4)       // coalesced, as Kafka Streams' cache emits
	feed(2, 1, 2, 3, 4)
	if o.distinct1 != 10 || o.distinct != 12 || o.dups != 0 {
		t.Fatalf("after phase 1: distinct1 %d distinct %d dups %d, want 10 12 0", o.distinct1, o.distinct, o.dups)
	}
	feed(0, 5)
	feed(1, 5)
	if o.distinct != 14 || len(o.lat) != 1 || o.lat[0] != 7*time.Millisecond {
		t.Errorf("after all: distinct %d, latencies %v; want 14 and [7ms]", o.distinct, o.lat)
	}
	feed(1, 5) // repeated
	feed(2, 3) // going back
	feed(2, 5) // above key 2's 4 records: a record counted twice
	if o.dups != 3 {
		t.Errorf("dups %d, want 3", o.dups)
	}
	o.acct.record(o, &kgo.Record{Key: []byte("k1"), Value: []byte("5")}, now)
	o.acct.record(o, &kgo.Record{Key: []byte("x1"), Value: make([]byte, 8)}, now)
	if o.unknown != 2 {
		t.Errorf("unknown %d, want 2", o.unknown)
	}

	// On restored state (count 1 per key) a key's first output is 2: an
	// output of 1 means the store started empty.
	o = newObs(1)
	feed(0, 1)
	if o.dups != 1 || o.distinct != 0 {
		t.Errorf("an unrestored count was accepted: dups %d distinct %d", o.dups, o.distinct)
	}
	feed(0, 2)
	if o.distinct != 1 {
		t.Errorf("restored count: distinct %d, want 1", o.distinct)
	}
}

func TestParseKey(t *testing.T) {
	for in, want := range map[string]int{"k0": 0, "k123": 123} {
		if got, ok := parseKey([]byte(in)); !ok || got != want {
			t.Errorf("parseKey(%q) = %d, %v", in, got, ok)
		}
	}
	for _, bad := range []string{"", "k", "x1", "k1x", "k-1"} {
		if _, ok := parseKey([]byte(bad)); ok {
			t.Errorf("parseKey(%q) accepted", bad)
		}
	}
}

func TestCountOptionsAndPlan(t *testing.T) {
	o := Options{Pipeline: "bogus"}
	o.defaults()
	if err := o.validate(); err == nil || !strings.Contains(err.Error(), "upper or count") {
		t.Errorf("unknown pipeline: %v", err)
	}
	o = Options{Pipeline: PipelineCount, Cases: []string{AtMostOnce}}
	o.defaults()
	if err := o.validate(); err == nil || !strings.Contains(err.Error(), CountMemory) {
		t.Errorf("at-most-once under count: %v", err)
	}
	o = Options{Pipeline: PipelineCount, Cases: []string{RestoreMemory}}
	o.defaults()
	if err := o.validate(); err == nil || !strings.Contains(err.Error(), "restore") {
		t.Errorf("restore case without keys: %v", err)
	}
	o = Options{RestoreKeys: 10}
	o.defaults()
	if err := o.validate(); err == nil {
		t.Error("restore keys with the upper pipeline accepted")
	}

	o = Options{Pipeline: PipelineCount}
	o.defaults()
	if err := o.validate(); err != nil {
		t.Fatal(err)
	}
	if o.Keys != 10_000 || strings.Join(o.Cases, ",") != "exactly-once/memory,exactly-once/pebble,kafka-streams,kafka-streams/cached" {
		t.Errorf("count defaults: keys %d, cases %v", o.Keys, o.Cases)
	}
	o = Options{Pipeline: PipelineCount, RestoreKeys: 100}
	o.defaults()
	cs := o.plan()
	if len(cs) != 6 {
		t.Fatalf("plan: %+v", cs)
	}
	want := []struct {
		kind, state string
		cache       int64
		restore     bool
	}{
		{ExactlyOnce, StateMemory, -1, false}, {ExactlyOnce, StatePebble, -1, false},
		{KafkaStreams, "", 0, false}, {KafkaStreams, "", -1, false},
		{ExactlyOnce, StateMemory, -1, true}, {ExactlyOnce, StatePebble, -1, true},
	}
	for i, w := range want {
		c := cs[i]
		if c.kind != w.kind || c.state != w.state || c.cache != w.cache || c.restore != w.restore || c.pipeline != PipelineCount {
			t.Errorf("plan[%d] %s: %+v, want %+v", i, c.name, c, w)
		}
	}
}

// The count worker refuses what it cannot run.
func TestWorkRefuses(t *testing.T) {
	for _, spec := range []WorkerSpec{
		{Case: ExactlyOnce, Pipeline: "bogus"},
		{Case: ExactlyOnce, Pipeline: PipelineCount, State: "rocksdb"},
		{Case: ExactlyOnce, Pipeline: PipelineUpper, State: StateMemory},
	} {
		spec.Brokers, spec.Input, spec.Output, spec.AppID = []string{"127.0.0.1:1"}, "i", "o", "a"
		spec.CommitInterval, spec.BatchRecords = time.Second, 10
		var out bytes.Buffer
		if err := Work(t.Context(), spec, &out); err == nil || out.Len() > 0 {
			t.Errorf("%+v: err %v, printed %q", spec, err, out.String())
		}
	}
}
