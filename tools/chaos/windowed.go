package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/eosflow/eosflow/codec"
	"github.com/eosflow/eosflow/state"
	"github.com/eosflow/eosflow/topology"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Window settings of PipelineWindowed. The seed puts about windowRecords
// records of a key into each window, a tenth of them out of order within
// the grace and a fiftieth beyond it (late).
const (
	// WindowSize is the length of PipelineWindowed's tumbling windows.
	WindowSize = 10 * time.Second
	// WindowGrace is how long after its end a window of PipelineWindowed
	// still takes records out of order.
	WindowGrace = 3 * time.Second
	// WindowStore is the store PipelineWindowed counts in; its changelog
	// is topology.ChangelogTopic(appID, WindowStore).
	WindowStore = "per-window"
	// windowRecords is how many records of one key a window holds on
	// average.
	windowRecords = 4
	// closeKey prefixes the key of the record that closes a partition's
	// windows; its own window never closes.
	closeKey = "close-"
)

// WindowedPipeline is the windowed sample topology: it counts the records
// of each key of in per tumbling window of WindowSize (grace WindowGrace)
// by their timestamps, in the store WindowStore of engine e, and writes
// each window's final count once, when it closes, to out as the JSON of a
// topology.Windowed[int64] under the key. Late records are dropped.
// before runs ahead of each record; nil skips it.
func WindowedPipeline(in, out string, e state.Engine, before func()) *topology.Topology {
	top := topology.New()
	src := topology.Source(top, in, codec.Bytes(), topology.Named("input"))
	paced := topology.Peek(src, "pace", func(context.Context, []byte, []byte) {
		if before != nil {
			before()
		}
	})
	counts := topology.CountWindows(topology.GroupByKey(paced, "by-key"), WindowStore,
		topology.Tumbling(WindowSize).Grace(WindowGrace).FinalOnly(), e)
	topology.ToTable(counts, out, codec.JSON[topology.Windowed[int64]](), topology.Named("output"))
	return top
}

// eventRecord is one seeded record with its partition and event time, so
// that the expected results can be computed from the order each partition
// holds.
type eventRecord struct {
	topic     string
	partition int32
	key       string
	value     string
	ts        time.Time
}

// record is r as the seeding client produces it, to its own partition.
func (r eventRecord) record() *kgo.Record {
	return &kgo.Record{Topic: r.topic, Partition: r.partition, Key: []byte(r.key), Value: []byte(r.value), Timestamp: r.ts}
}

// windowStep is the event time between two seeded records, so that a
// key's window holds about windowRecords of them; whole milliseconds,
// as Kafka keeps timestamps.
func windowStep(keys int) time.Duration {
	return max(time.Millisecond, (WindowSize / time.Duration(windowRecords*max(keys, 1))).Truncate(time.Millisecond))
}

// windowedSeed makes n records for topic: n - partitions of them over
// keys keys (key k in partition k % partitions) with rising event times,
// a tenth moved back within the grace and a fiftieth beyond it (most of
// those are late), then one record per partition far enough ahead to
// close every window before it. The event times end more than an hour
// before now, since brokers refuse timestamps too far in the future.
func windowedSeed(topic string, n, keys int, partitions int32, seed uint64, now time.Time) []eventRecord {
	rng := rand.New(rand.NewPCG(seed, seed^0x77696e646f77))
	body := n - int(partitions)
	step := windowStep(keys)
	span := time.Duration(body) * step
	closeAt := span + 10*WindowSize
	base := now.Add(-closeAt - time.Hour).Truncate(WindowSize)
	recs := make([]eventRecord, 0, n)
	for i := range body {
		k := rng.IntN(keys)
		ts := base.Add(time.Duration(i) * step)
		switch j := rng.IntN(100); {
		case j < 10: // out of order, within the grace
			ts = ts.Add(-time.Duration(rng.IntN(int(WindowGrace/time.Millisecond))) * time.Millisecond)
		case j < 12: // behind by more than a window and its grace: late unless stream time is behind too
			ts = ts.Add(-WindowSize - WindowGrace - time.Duration(rng.IntN(5000))*time.Millisecond)
		}
		recs = append(recs, eventRecord{topic: topic, partition: int32(k % int(partitions)), key: "k" + strconv.Itoa(k),
			value: "e" + strconv.Itoa(i), ts: ts})
	}
	for p := range partitions {
		recs = append(recs, eventRecord{topic: topic, partition: p, key: closeKey + strconv.Itoa(int(p)), value: "close", ts: base.Add(closeAt)})
	}
	return recs
}

// windowID names one window of one key: the key and the window's start
// in Unix milliseconds.
type windowID struct {
	key   string
	start int64
}

func (w windowID) String() string {
	return w.key + "@" + time.UnixMilli(w.start).UTC().Format(time.RFC3339)
}

// expectedWindows computes, in plain Go, the final count of every window
// of recs that closes: per partition, in order, stream time is the
// highest event time so far, and a record whose window ended (plus the
// grace) at or before it is late and counts nowhere. The closing records'
// own windows never close. It also returns how many records are late.
func expectedWindows(recs []eventRecord) (map[windowID]int64, int) {
	counts := map[windowID]int64{}
	stream := map[int32]time.Time{}
	late := 0
	for _, r := range recs {
		if r.ts.After(stream[r.partition]) {
			stream[r.partition] = r.ts
		}
		start := r.ts.Truncate(WindowSize)
		if !start.Add(WindowSize + WindowGrace).After(stream[r.partition]) {
			late++
			continue
		}
		if len(r.key) >= len(closeKey) && r.key[:len(closeKey)] == closeKey {
			continue
		}
		counts[windowID{r.key, start.UnixMilli()}]++
	}
	return counts, late
}

// WindowVerdict is the window-by-window judgement of PipelineWindowed:
// every window the seed closes must come out exactly once with the count
// computed from the seed, and no other window may.
type WindowVerdict struct {
	// WindowsExpected is how many windows the seed closes.
	WindowsExpected int `json:"windows_expected"`
	// WindowMissing is how many of them never came out: lost results.
	WindowMissing int `json:"window_missing"`
	// WindowDuplicates is how many output records repeat a window that
	// came out before: a final result emitted twice.
	WindowDuplicates int `json:"window_duplicates"`
	// WindowWrongCount is how many expected windows came out with a count
	// other than the seed's: records lost or counted twice.
	WindowWrongCount int `json:"window_wrong_count"`
	// WindowUnexpected is how many windows came out that the seed does
	// not close (a late record's, or a closing record's own).
	WindowUnexpected int `json:"window_unexpected"`
	// WindowUnreadable is how many output records are not a window of
	// WindowSize with a count.
	WindowUnreadable int `json:"window_unreadable"`
	// LateRecords is how many seeded records are late: each must count
	// in no window.
	LateRecords int `json:"late_records"`
	// WindowExamples names the first few differences, for the logs.
	WindowExamples []string `json:"window_examples,omitempty"`
}

// OK reports whether every window came out once with its count.
func (v WindowVerdict) OK() bool {
	return v.WindowMissing == 0 && v.WindowDuplicates == 0 && v.WindowWrongCount == 0 && v.WindowUnexpected == 0 && v.WindowUnreadable == 0
}

// String is the window verdict on one line, for logs.
func (v WindowVerdict) String() string {
	return fmt.Sprintf("windows=%d window_missing=%d window_duplicates=%d window_wrong_count=%d window_unexpected=%d window_unreadable=%d late_records=%d",
		v.WindowsExpected, v.WindowMissing, v.WindowDuplicates, v.WindowWrongCount, v.WindowUnexpected, v.WindowUnreadable, v.LateRecords)
}

// parseWindow reads one output record of PipelineWindowed.
func parseWindow(r *kgo.Record) (windowID, int64, bool) {
	var w topology.Windowed[int64]
	if err := json.Unmarshal(r.Value, &w); err != nil || w.Window.End.Sub(w.Window.Start) != WindowSize {
		return windowID{}, 0, false
	}
	return windowID{string(r.Key), w.Window.Start.UnixMilli()}, w.Value, true
}

// judgeWindows compares the output of PipelineWindowed with want.
func judgeWindows(want map[windowID]int64, late int, out []*kgo.Record) WindowVerdict {
	v := WindowVerdict{WindowsExpected: len(want), LateRecords: late}
	example := func(format string, a ...any) {
		if len(v.WindowExamples) < 5 {
			v.WindowExamples = append(v.WindowExamples, fmt.Sprintf(format, a...))
		}
	}
	seen := map[windowID]int{}
	wrong := map[windowID]bool{}
	for _, r := range out {
		id, c, ok := parseWindow(r)
		if !ok {
			v.WindowUnreadable++
			example("unreadable output %q under key %q", r.Value, r.Key)
			continue
		}
		seen[id]++
		if seen[id] > 1 {
			v.WindowDuplicates++
			example("window %s emitted %d times (this time with count %d)", id, seen[id], c)
		}
		exp, ok := want[id]
		switch {
		case !ok:
			if seen[id] == 1 {
				v.WindowUnexpected++
				example("window %s emitted with count %d, but the seed closes no such window", id, c)
			}
		case c != exp && !wrong[id]:
			wrong[id] = true
			v.WindowWrongCount++
			example("window %s emitted with count %d, want %d", id, c, exp)
		}
	}
	for id, c := range want {
		if seen[id] == 0 {
			v.WindowMissing++
			example("window %s (count %d) never emitted", id, c)
		}
	}
	return v
}

// WindowedCheck is a seeded input for WindowedPipeline with the judge of
// its output, for harnesses that run the pipeline themselves.
type WindowedCheck struct{ run *windowedRun }

// NewWindowedCheck seeds n records over keys keys for topic's partitions,
// as verify does for PipelineWindowed; n must exceed partitions, as
// verify's --records must.
func NewWindowedCheck(topic string, n, keys int, partitions int32, seed uint64) (WindowedCheck, error) {
	o := Options{Pipeline: PipelineWindowed, Records: n, Keys: keys, Partitions: partitions, Seed: seed}
	if err := o.validateEvents(); err != nil {
		return WindowedCheck{}, err
	}
	return WindowedCheck{newWindowedRun(o, topic)}, nil
}

// Records are the input, each to its own partition, in the order to
// produce them.
func (c WindowedCheck) Records() []*kgo.Record {
	out := make([]*kgo.Record, len(c.run.recs))
	for i, r := range c.run.recs {
		out[i] = r.record()
	}
	return out
}

// Judge compares the pipeline's committed output with the windows the
// seed closes, computed in plain Go.
func (c WindowedCheck) Judge(out []*kgo.Record) WindowVerdict {
	return judgeWindows(c.run.want, c.run.late, out)
}

// windowedRun seeds and judges one run of PipelineWindowed.
type windowedRun struct {
	topic string
	recs  []eventRecord
	want  map[windowID]int64
	late  int
}

func newWindowedRun(o Options, topic string) *windowedRun {
	recs := windowedSeed(topic, o.Records, o.Keys, o.Partitions, o.Seed, time.Now())
	want, late := expectedWindows(recs)
	return &windowedRun{topic: topic, recs: recs, want: want, late: late}
}

func (w *windowedRun) records() []eventRecord { return w.recs }

func (w *windowedRun) describe() string {
	return fmt.Sprintf("windowed count: tumbling %s windows, grace %s, final results only; the seed closes %d windows and holds %d late records",
		WindowSize, WindowGrace, len(w.want), w.late)
}

func (w *windowedRun) identify(r *kgo.Record) (string, bool) {
	id, _, ok := parseWindow(r)
	return id.String(), ok
}

func (w *windowedRun) expected() int { return len(w.want) }

func (w *windowedRun) judge(out []*kgo.Record, res *Result) {
	v := judgeWindows(w.want, w.late, out)
	res.WindowVerdict = &v
}
