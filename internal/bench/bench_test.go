package bench

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"
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
