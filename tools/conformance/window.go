package conformance

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/eosflow/eosflow/codec"
	"github.com/eosflow/eosflow/config"
	"github.com/eosflow/eosflow/state"
	"github.com/eosflow/eosflow/tools/kafkatest"
	"github.com/eosflow/eosflow/topology"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Window settings of the windowed scenario.
const (
	windowSize  = 10 * time.Second
	windowGrace = 3 * time.Second
)

// WindowedCountTopology counts the records of each key of in per tumbling
// window of windowSize (grace windowGrace), in a store "per-window" of
// engine e, and writes each window's final count once to out as JSON of
// topology.Windowed[int64]. Late records are dropped.
func WindowedCountTopology(in, out string, e state.Engine) *topology.Topology {
	top := topology.New()
	src := topology.Source(top, in, codec.Bytes(), topology.Named("in"))
	counts := topology.CountWindows(topology.GroupByKey(src, "by-key"), "per-window",
		topology.Tumbling(windowSize).Grace(windowGrace).FinalOnly(), e)
	topology.ToTable(counts, out, codec.JSON[topology.Windowed[int64]](), topology.Named("out"))
	return top
}

// eventBase is where the seeds' event times begin: an hour ago, to the
// minute. Event times become the records' timestamps, and a real broker
// deletes records older than its retention (7 days by default) at its
// next retention check, whether or not the scenario has read them yet;
// it refuses records too far ahead of its clock. The minute keeps windows
// and timer intervals aligned alike in every run.
func eventBase() time.Time { return time.Now().UTC().Add(-time.Hour).Truncate(time.Minute) }

// eventRecord is one seeded record: its partition, key and event time.
type eventRecord struct {
	partition int32
	key       string
	ts        time.Time
}

// windowSeed makes n records over keys keys in partitions partitions, each
// key in one partition, with event times that mostly rise, some out of
// order within the grace and some beyond it (late), then one record per
// partition far in the future, which closes every window of the data.
func windowSeed(n, keys int, partitions int32, seed uint64) []eventRecord {
	rng := rand.New(rand.NewPCG(seed, seed^0x5eed))
	base := eventBase()
	var recs []eventRecord
	for i := 0; i < n; i++ {
		k := rng.IntN(keys)
		ts := base.Add(time.Duration(i) * 50 * time.Millisecond)
		switch j := rng.IntN(100); {
		case j < 10: // out of order, within the grace
			ts = ts.Add(-time.Duration(rng.IntN(int(windowGrace/time.Millisecond))) * time.Millisecond)
		case j < 12: // likely late
			ts = ts.Add(-windowSize - windowGrace - time.Duration(rng.IntN(5000))*time.Millisecond)
		}
		recs = append(recs, eventRecord{partition: int32(k) % partitions, key: fmt.Sprintf("k%03d", k), ts: ts})
	}
	end := base.Add(time.Duration(n)*50*time.Millisecond + 10*windowSize)
	for p := int32(0); p < partitions; p++ {
		recs = append(recs, eventRecord{partition: p, key: fmt.Sprintf("flush-%d", p), ts: end})
	}
	return recs
}

// windowKey names one window of one key in the expected results.
type windowKey struct {
	key   string
	start time.Time
}

// expectedWindows computes, in plain Go, the final count of every window
// that closes: per partition in order, stream time is the highest event
// time so far, and a record whose window ended (plus grace) at or before
// it is late and dropped. The flush records' own windows never close.
func expectedWindows(recs []eventRecord) (map[windowKey]int64, int) {
	counts := map[windowKey]int64{}
	stream := map[int32]time.Time{}
	late := 0
	for _, r := range recs {
		if r.ts.After(stream[r.partition]) {
			stream[r.partition] = r.ts
		}
		start := r.ts.Truncate(windowSize)
		if !start.Add(windowSize + windowGrace).After(stream[r.partition]) {
			late++
			continue
		}
		counts[windowKey{r.key, start}]++
	}
	for k := range counts {
		if strings.HasPrefix(k.key, "flush-") {
			delete(counts, k)
		}
	}
	return counts, late
}

// produceEvents writes recs to topic, each to its partition with its event
// time as the record's timestamp, in order.
func produceEvents(t *testing.T, env *kafkatest.Env, topic string, recs []eventRecord) {
	t.Helper()
	cl := env.Client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	for _, r := range recs {
		cl.Produce(context.Background(), &kgo.Record{Topic: topic, Partition: r.partition, Key: []byte(r.key), Value: []byte("v"), Timestamp: r.ts}, nil)
	}
	if err := cl.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// WindowedFinalResultsExactlyOnce counts per key and tumbling window with
// final results only, while the pipeline restarts and a second instance
// joins: the committed output must equal the results computed in plain Go
// from the seed — every window of every key exactly once with its exact
// count, and no late record counted. With faults injected by the caller
// (aborted commits), the same must hold. Stores use engine e.
func WindowedFinalResultsExactlyOnce(t *testing.T, env *kafkatest.Env, e state.Engine) {
	const n, keys, partitions = 3000, 40, 3
	recs := windowSeed(n, keys, partitions, 7)
	want, late := expectedWindows(recs)
	names := topics(t, env, partitions, "events", "windows")
	in, out := names[0], names[1]
	app := env.Name("windowed")
	cfg := env.Config(app, "a", config.ExactlyOnce)
	cfg.MaxBatchRecords = 150
	// The data is produced in three parts: before the first instance,
	// after its restart, and after a second instance joined; the flush
	// records come last.
	body := recs[:n]
	produceEvents(t, env, in, body[:n/3])
	f := newFleet(t, env, cfg, func() *topology.Topology { return WindowedCountTopology(in, out, e) })
	first := f.start("a")
	Until(t, 90*time.Second, "the first part counted", func() bool { return f.recordsIn() >= uint64(n/3) })
	first.Stop()
	if err := first.Wait(t, 60*time.Second); err != nil {
		t.Fatal(err)
	}
	produceEvents(t, env, in, body[n/3:2*n/3])
	f.start("a")
	Until(t, 90*time.Second, "the second part counted", func() bool { return f.recordsIn() >= uint64(2*n/3) })
	f.start("b")
	produceEvents(t, env, in, recs[2*n/3:])
	Until(t, 120*time.Second, "every record counted", func() bool { return f.recordsIn() >= uint64(len(recs)) })

	got := map[windowKey]int64{}
	for _, r := range Drain(t, env, out, len(want)) {
		var w topology.Windowed[int64]
		if err := json.Unmarshal(r.Value, &w); err != nil {
			t.Fatalf("output %q: %v", r.Value, err)
		}
		k := windowKey{string(r.Key), w.Window.Start}
		if _, dup := got[k]; dup {
			t.Fatalf("window %s of %s emitted twice", k.start.Format(time.TimeOnly), k.key)
		}
		if w.Window.End.Sub(w.Window.Start) != windowSize {
			t.Fatalf("window %v is not %s long", w.Window, windowSize)
		}
		got[k] = w.Value
	}
	var wrong []string
	for k, c := range want {
		if got[k] != c {
			wrong = append(wrong, fmt.Sprintf("%s@%s: got %d, want %d", k.key, k.start.Format(time.TimeOnly), got[k], c))
		}
	}
	for k, c := range got {
		if _, ok := want[k]; !ok {
			wrong = append(wrong, fmt.Sprintf("%s@%s: got %d, want no window", k.key, k.start.Format(time.TimeOnly), c))
		}
	}
	slices.Sort(wrong)
	if len(wrong) > 0 {
		t.Fatalf("%d of %d windows differ from the computed results (first ones: %v)", len(wrong), len(want), wrong[:min(5, len(wrong))])
	}
	var skipped uint64
	for _, x := range f.runs {
		skipped += x.R.Stats().Skipped
	}
	t.Logf("%d windows exact, %d late records in the seed, %d skipped", len(want), late, skipped)
	if late == 0 {
		t.Fatal("the seed has no late record: the scenario does not exercise lateness")
	}
	if skipped != uint64(late) {
		t.Fatalf("%d records skipped as late, want %d", skipped, late)
	}
}
