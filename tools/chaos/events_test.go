package chaos

import (
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/eosflow/eosflow/topology"
	"github.com/twmb/franz-go/pkg/kgo"
)

var testNow = time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)

func TestWindowedSeed(t *testing.T) {
	const n, keys, partitions = 5000, 40, 3
	recs := windowedSeed("in", n, keys, partitions, 7, testNow)
	if len(recs) != n {
		t.Fatalf("%d records, want %d", len(recs), n)
	}
	if slices.Equal(recs, windowedSeed("in", n, keys, partitions, 8, testNow)) {
		t.Fatal("two seeds made the same records")
	}
	if !slices.Equal(recs, windowedSeed("in", n, keys, partitions, 7, testNow)) {
		t.Fatal("one seed made two different sets of records")
	}
	last := map[int32]time.Time{}
	backwards := 0
	for i, r := range recs {
		if r.ts.Truncate(time.Millisecond) != r.ts {
			t.Fatalf("record %d: event time %s is not whole milliseconds", i, r.ts)
		}
		if !r.ts.Before(testNow.Add(-time.Hour)) {
			t.Fatalf("record %d: event time %s is not an hour before now, so a broker may refuse it", i, r.ts)
		}
		if r.ts.Before(last[r.partition]) {
			backwards++
		}
		last[r.partition] = maxTime(last[r.partition], r.ts)
		if i >= n-partitions {
			if r.key != closeKey+strconv.Itoa(i-(n-partitions)) || r.partition != int32(i-(n-partitions)) {
				t.Fatalf("record %d (%s in %d) is not the closing record of its partition", i, r.key, r.partition)
			}
			continue
		}
		k, err := strconv.Atoi(strings.TrimPrefix(r.key, "k"))
		if err != nil || int32(k%partitions) != r.partition {
			t.Fatalf("record %d: key %s in partition %d, want partition key %% %d", i, r.key, r.partition, partitions)
		}
	}
	want, late := expectedWindows(recs)
	if backwards < n/10 || late == 0 || late > n/20 {
		t.Fatalf("%d records out of order, %d late: the seed must hold both, and few late", backwards, late)
	}
	var counted int64
	for id, c := range want {
		if strings.HasPrefix(id.key, closeKey) {
			t.Fatalf("the closing record's window %s closes", id)
		}
		counted += c
	}
	if int(counted)+late+partitions != n {
		t.Fatalf("%d records counted, %d late, %d closing: want %d in all", counted, late, partitions, n)
	}
	if avg := float64(counted) / float64(len(want)); avg < 2 || avg > 2*windowRecords {
		t.Fatalf("%.1f records per window, want about %d", avg, windowRecords)
	}
}

func TestExpectedWindowsLateness(t *testing.T) {
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(d time.Duration) time.Time { return base.Add(d) }
	recs := []eventRecord{
		{partition: 0, key: "a", ts: at(1 * time.Second)},
		{partition: 0, key: "a", ts: at(12 * time.Second)},
		{partition: 0, key: "a", ts: at(9 * time.Second)},  // window [0,10) open until 13 s
		{partition: 1, key: "b", ts: at(30 * time.Second)}, // another partition's stream time
		{partition: 0, key: "a", ts: at(13 * time.Second)}, // stream time 13 s: [0,10) closes
		{partition: 0, key: "a", ts: at(2 * time.Second)},  // late
		{partition: 1, key: "b", ts: at(5 * time.Second)},  // late in partition 1
		{partition: 0, key: closeKey + "0", ts: at(time.Minute)},
		{partition: 1, key: closeKey + "1", ts: at(time.Minute)},
	}
	want, late := expectedWindows(recs)
	exp := map[windowID]int64{
		{"a", base.UnixMilli()}:                 2,
		{"a", at(10 * time.Second).UnixMilli()}: 2,
		{"b", at(30 * time.Second).UnixMilli()}: 1,
	}
	if late != 2 || len(want) != len(exp) {
		t.Fatalf("late %d, windows %v; want 2 late and %v", late, want, exp)
	}
	for id, c := range exp {
		if want[id] != c {
			t.Fatalf("window %s: %d, want %d (all: %v)", id, want[id], c, want)
		}
	}
}

// windowRecord is an output record of WindowedPipeline.
func windowRecord(t *testing.T, key string, start time.Time, size time.Duration, count int64) *kgo.Record {
	t.Helper()
	v, err := json.Marshal(topology.Windowed[int64]{Window: topology.Window{Start: start, End: start.Add(size)}, Value: count})
	if err != nil {
		t.Fatal(err)
	}
	return &kgo.Record{Key: []byte(key), Value: v}
}

func TestJudgeWindows(t *testing.T) {
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	w := func(i int) time.Time { return base.Add(time.Duration(i) * WindowSize) }
	want := map[windowID]int64{{"a", w(0).UnixMilli()}: 3, {"a", w(1).UnixMilli()}: 1, {"b", w(0).UnixMilli()}: 2, {"c", w(0).UnixMilli()}: 5}
	exact := []*kgo.Record{windowRecord(t, "a", w(0), WindowSize, 3), windowRecord(t, "a", w(1), WindowSize, 1),
		windowRecord(t, "b", w(0), WindowSize, 2), windowRecord(t, "c", w(0), WindowSize, 5)}
	if v := judgeWindows(want, 4, exact); !v.OK() || v.WindowsExpected != 4 || v.LateRecords != 4 || len(v.WindowExamples) != 0 {
		t.Fatalf("exact output judged %s %v", v, v.WindowExamples)
	}
	v := judgeWindows(want, 0, []*kgo.Record{
		windowRecord(t, "a", w(0), WindowSize, 3),
		windowRecord(t, "a", w(0), WindowSize, 3), // repeated
		windowRecord(t, "a", w(1), WindowSize, 2), // wrong count
		windowRecord(t, "a", w(1), WindowSize, 3), // and repeated with another
		windowRecord(t, "d", w(0), WindowSize, 1), // not closed by the seed
		windowRecord(t, "b", w(0), time.Second, 2),
		{Key: []byte("b"), Value: []byte("7")},
		// c is missing, and b's results were unreadable
	})
	got := [6]int{v.WindowMissing, v.WindowDuplicates, v.WindowWrongCount, v.WindowUnexpected, v.WindowUnreadable, len(v.WindowExamples)}
	if got != [6]int{2, 2, 1, 1, 2, 5} || v.OK() {
		t.Fatalf("judged %s with %d examples %v", v, len(v.WindowExamples), v.WindowExamples)
	}
}

func TestJoinSeedAndPairs(t *testing.T) {
	const n, keys, partitions = 1500, 12, 3
	recs := joinSeed("orders", "payments", n, keys, partitions, 5, testNow)
	if len(recs) != n {
		t.Fatalf("%d records, want %d", len(recs), n)
	}
	ords := 0
	for i, r := range recs {
		k, err := strconv.Atoi(strings.TrimPrefix(r.key, "c"))
		if err != nil || int32(k%partitions) != r.partition {
			t.Fatalf("record %d: key %s in partition %d: the topics are not co-partitioned by key", i, r.key, r.partition)
		}
		if !r.ts.Before(testNow.Add(-time.Hour)) || r.ts.Truncate(time.Millisecond) != r.ts {
			t.Fatalf("record %d: event time %s", i, r.ts)
		}
		if r.topic == "orders" {
			ords++
		}
	}
	if ords < n/3 || ords > 2*n/3 {
		t.Fatalf("%d orders of %d records", ords, n)
	}
	want := expectedPairs(recs, "orders")
	// Every pair by brute force.
	brute := map[string]bool{}
	for _, o := range recs {
		for _, p := range recs {
			if o.topic == "orders" && p.topic == "payments" && o.key == p.key && o.ts.Sub(p.ts).Abs() <= JoinWithin {
				brute[pairID(o.key, o.value+"+"+p.value)] = true
			}
		}
	}
	if len(want) != len(brute) {
		t.Fatalf("%d pairs, by brute force %d", len(want), len(brute))
	}
	for id := range brute {
		if !want[id] {
			t.Fatalf("pair %s missing from the expected pairs", id)
		}
	}
	if per := float64(len(want)) / float64(ords); per < 0.5 || per > 3 {
		t.Fatalf("%.2f pairs per order, want about %.1f", per, joinPartners)
	}
}

func TestExpectedPairsWindowIsInclusive(t *testing.T) {
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	recs := []eventRecord{
		{topic: "o", key: "a", value: "o0", ts: base},
		{topic: "p", key: "a", value: "p1", ts: base.Add(JoinWithin)},                       // exactly within
		{topic: "p", key: "a", value: "p2", ts: base.Add(-JoinWithin - time.Millisecond)},   // just outside
		{topic: "p", key: "b", value: "p3", ts: base},                                       // another key
		{topic: "o", key: "a", value: "o4", ts: base.Add(-JoinWithin - 2*time.Millisecond)}, // pairs with p2 only
	}
	got := slices.Sorted(func(yield func(string) bool) {
		for id := range expectedPairs(recs, "o") {
			if !yield(id) {
				return
			}
		}
	})
	if want := []string{"a/o0+p1", "a/o4+p2"}; !slices.Equal(got, want) {
		t.Fatalf("pairs %v, want %v", got, want)
	}
}

func TestJudgePairs(t *testing.T) {
	want := map[string]bool{"a/o1+p2": true, "a/o1+p3": true, "b/o4+p5": true}
	rec := func(k, v string) *kgo.Record { return &kgo.Record{Key: []byte(k), Value: []byte(v)} }
	if v := judgePairs(want, []*kgo.Record{rec("a", "o1+p2"), rec("b", "o4+p5"), rec("a", "o1+p3")}); !v.OK() || v.PairsExpected != 3 {
		t.Fatalf("exact output judged %s", v)
	}
	v := judgePairs(want, []*kgo.Record{rec("a", "o1+p2"), rec("a", "o1+p2"), rec("b", "o1+p3"), rec("a", "x")})
	if v.PairMissing != 2 || v.PairDuplicates != 1 || v.PairUnexpected != 2 || v.OK() || len(v.PairExamples) != 5 {
		t.Fatalf("judged %s %v", v, v.PairExamples)
	}
}

func TestEventProblems(t *testing.T) {
	r := Result{Guarantee: "at-least-once",
		WindowVerdict: &WindowVerdict{WindowsExpected: 9, WindowMissing: 1, WindowDuplicates: 2, WindowWrongCount: 3, WindowUnexpected: 4, WindowUnreadable: 5},
		JoinVerdict:   &JoinVerdict{PairsExpected: 9, PairMissing: 1, PairDuplicates: 2, PairUnexpected: 3}}
	names, words := problems(r, 0)
	want := []Problem{ProblemWindowMissing, ProblemWindowDuplicates, ProblemWindowWrongCount, ProblemWindowUnexpected, ProblemWindowUnreadable,
		ProblemPairMissing, ProblemPairDuplicates, ProblemPairUnexpected}
	if !slices.Equal(names, want) || len(words) != len(want) {
		t.Fatalf("failed %v (%v), want %v", names, words, want)
	}
	r = Result{Guarantee: "exactly-once", WindowVerdict: &WindowVerdict{WindowsExpected: 9, LateRecords: 3}, JoinVerdict: &JoinVerdict{PairsExpected: 9}}
	if names, words := problems(r, 0); len(names) != 0 {
		t.Fatalf("a clean run failed %v: %v", names, words)
	}
}

func TestEventOptionsValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		o    Options
		want string // "" accepts
	}{
		{"windowed", Options{Exe: "x", Pipeline: PipelineWindowed}, ""},
		{"windowed on pebble under at-least-once", Options{Exe: "x", Pipeline: PipelineWindowed, State: StatePebble, Guarantee: "at-least-once"}, ""},
		{"join", Options{Exe: "x", Pipeline: PipelineJoin, State: StateMemory}, ""},
		{"windowed at most once", Options{Exe: "x", Pipeline: PipelineWindowed, Guarantee: "at-most-once"}, "at-most-once"},
		{"join at most once", Options{Exe: "x", Pipeline: PipelineJoin, Guarantee: "at-most-once"}, "at-most-once"},
		{"windowed with no record besides the closing ones", Options{Exe: "x", Pipeline: PipelineWindowed, Records: 6, Partitions: 6}, "must exceed --partitions"},
		{"join spanning more than its grace", Options{Exe: "x", Pipeline: PipelineJoin, Records: 1_000_000, Keys: 2}, "raise --keys"},
		{"outer join", Options{Exe: "x", Pipeline: PipelineOuterJoin, State: StatePebble}, ""},
		{"outer join at most once", Options{Exe: "x", Pipeline: PipelineOuterJoin, Guarantee: "at-most-once"}, "at-most-once"},
		{"outer join with no record besides the closing ones", Options{Exe: "x", Pipeline: PipelineOuterJoin, Records: 6, Partitions: 6}, "must exceed --partitions"},
		{"global join", Options{Exe: "x", Pipeline: PipelineGlobalJoin, State: StatePebble}, ""},
		{"global join at most once", Options{Exe: "x", Pipeline: PipelineGlobalJoin, Guarantee: "at-most-once"}, "at-most-once"},
		{"unknown pipeline names them all", Options{Exe: "x", Pipeline: "sum"}, "windowed join"},
		{"state without a stateful pipeline", Options{Exe: "x", State: StatePebble}, "windowed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.o.Validate()
			if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
				t.Fatalf("Validate() = %v, want %q", err, tc.want)
			}
		})
	}
}

func TestEventWorkerTopology(t *testing.T) {
	for _, tc := range []struct {
		name string
		o    WorkerOptions
		want string // "" accepts
	}{
		{"windowed", WorkerOptions{In: "i", Out: "o", Pipeline: PipelineWindowed, State: StatePebble}, ""},
		{"join", WorkerOptions{In: "i", Out: "o", Payments: "p", Pipeline: PipelineJoin}, ""},
		{"join without payments", WorkerOptions{In: "i", Out: "o", Pipeline: PipelineJoin}, "--payments"},
		{"outer join", WorkerOptions{In: "i", Out: "o", Pipeline: PipelineOuterJoin, State: StatePebble}, ""},
		{"outer join with payments", WorkerOptions{In: "i", Out: "o", Payments: "p", Pipeline: PipelineOuterJoin}, "only for pipeline join"},
		{"global join", WorkerOptions{In: "i", Out: "o", Table: "t", Pipeline: PipelineGlobalJoin, State: StatePebble}, ""},
		{"global join without its table", WorkerOptions{In: "i", Out: "o", Pipeline: PipelineGlobalJoin}, "--table"},
		{"outer join with a table", WorkerOptions{In: "i", Out: "o", Table: "t", Pipeline: PipelineOuterJoin}, "--table"},
		{"windowed with payments", WorkerOptions{In: "i", Out: "o", Payments: "p", Pipeline: PipelineWindowed}, "only for pipeline join"},
		{"windowed with an unknown state", WorkerOptions{In: "i", Out: "o", Pipeline: PipelineWindowed, State: "rocks"}, "rocks"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			top, err := tc.o.topology(nil)
			if tc.want != "" {
				if err == nil || !strings.Contains(err.Error(), tc.want) {
					t.Fatalf("topology() = %v, want %q", err, tc.want)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if err := top.Validate(); err != nil {
				t.Fatalf("the %s topology does not validate: %v", tc.o.Pipeline, err)
			}
		})
	}
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
