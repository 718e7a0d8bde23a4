package eostest_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/eosflow/eosflow/codec"
	"github.com/eosflow/eosflow/eostest"
	"github.com/eosflow/eosflow/processor"
	"github.com/eosflow/eosflow/state"
	"github.com/eosflow/eosflow/state/pebble"
	"github.com/eosflow/eosflow/topology"
)

// clickCounts counts clicks per user (the key); the node "check" after
// the count fails on the user "mallory" under policy.
func clickCounts(policy topology.ErrorPolicy, opts ...topology.AggregateOption) *topology.Topology {
	top := topology.New()
	in := topology.Source(top, "clicks", codec.String(), topology.Named("in"))
	counts := topology.Count(topology.GroupByKey(in, "by-user"), "counts", pebble.New(), opts...)
	checked := topology.Process(topology.ToStream(counts, "updates"), "check", func(ctx processor.Context[int64], r processor.Record[int64]) error {
		if string(r.Key) == "mallory" {
			return errors.New("mallory is not counted")
		}
		ctx.Emit(r)
		return nil
	})
	topology.To(checked, "click-counts", codec.JSON[int64](), topology.Named("out"))
	top.OnError("check", policy)
	return top
}

// latest folds records into each key's last value.
func latest[V any](rs []eostest.Record[V]) map[string]V {
	m := map[string]V{}
	for _, r := range rs {
		m[string(r.Key)] = r.Value
	}
	return m
}

// A count reads and writes its store per task; a seeded count goes on
// from the seed, and the store reads what the outputs say.
func TestCountWithStore(t *testing.T) {
	d := eostest.New(t, clickCounts(topology.Fail()), eostest.Partitions("clicks", 3))
	in := eostest.Input(d, "clicks", codec.String())
	out := eostest.Output(d, "click-counts", codec.JSON[int64]())
	counts := eostest.Store(d, "counts", codec.String(), codec.Int64())
	counts.Put("ada", 10)
	for _, user := range []string{"ada", "bob", "ada", "cy", "ada"} {
		pipe(t, in, user, "click")
	}
	want := map[string]int64{"ada": 13, "bob": 1, "cy": 1}
	if got := latest(out.ReadAll()); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("outputs: %v, want %v", got, want)
	}
	for user, n := range want {
		if got, ok := counts.Get(user); !ok || got != n {
			t.Errorf("store: %s = %d (%v), want %d", user, got, ok, n)
		}
	}
	if _, ok := counts.Get("dan"); ok {
		t.Error("store: dan counted without a click")
	}
	all := counts.All()
	if len(all) != 3 {
		t.Fatalf("All: %+v, want 3 entries", all)
	}
	for _, e := range all {
		if v, ok := counts.Partition(e.Partition).Get(e.Key); !ok || v != e.Value {
			t.Errorf("All says %s=%d in partition %d; that partition's store says %d (%v)", e.Key, e.Value, e.Partition, v, ok)
		}
	}
}

// A record that fails under the Fail policy is the pipe's error, a
// *processor.RecordError naming it; its batch aborts, so the count it
// made is not kept and nothing of it is written; later records go on.
func TestFailPolicyLeavesStoreUnchanged(t *testing.T) {
	d := eostest.New(t, clickCounts(topology.Fail()))
	in := eostest.Input(d, "clicks", codec.String())
	out := eostest.Output(d, "click-counts", codec.JSON[int64]())
	counts := eostest.Store(d, "counts", codec.String(), codec.Int64())
	counts.Put("mallory", 5)
	pipe(t, in, "ada", "click")
	err := in.Pipe("mallory", "click")
	var re *processor.RecordError
	var ne *topology.NodeError
	if !errors.As(err, &re) || !errors.As(err, &ne) || ne.Node != "check" || re.Topic != "clicks" || re.Offset != 1 {
		t.Fatalf("Pipe: %v, want a RecordError of clicks@1 from node check", err)
	}
	if n, _ := counts.Get("mallory"); n != 5 {
		t.Errorf("mallory's count is %d after the failed record, want the seeded 5", n)
	}
	pipe(t, in, "ada", "click")
	if got := latest(out.ReadAll()); len(got) != 1 || got["ada"] != 2 {
		t.Errorf("outputs: %v, want ada=2 only", got)
	}
}

// Updates held back (LatestPerCommit) collapse per batch: one Batch
// emits each key's last count, and a failure of a node after the
// aggregation comes when they run, at the batch's end, aborting it all.
func TestBatchHoldsBack(t *testing.T) {
	d := eostest.New(t, clickCounts(topology.Fail(), topology.LatestPerCommit()))
	in := eostest.Input(d, "clicks", codec.String())
	out := eostest.Output(d, "click-counts", codec.JSON[int64]())
	counts := eostest.Store(d, "counts", codec.String(), codec.Int64())
	err := d.Batch(func() error {
		for _, user := range []string{"ada", "ada", "ada", "bob"} {
			pipe(t, in, user, "click")
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	got := out.ReadAll()
	if len(got) != 2 || latest(got)["ada"] != 3 || latest(got)["bob"] != 1 {
		t.Errorf("held-back updates: %+v, want ada=3 and bob=1 only", got)
	}
	err = d.Batch(func() error {
		pipe(t, in, "ada", "click")
		pipe(t, in, "mallory", "click") // check runs at the end of the batch
		return nil
	})
	var re *processor.RecordError
	if !errors.As(err, &re) || re.Offset != 5 {
		t.Fatalf("Batch: %v, want the RecordError of mallory's record", err)
	}
	if n, _ := counts.Get("ada"); n != 3 {
		t.Errorf("ada = %d after the aborted batch, want 3", n)
	}
	if got := out.ReadAll(); len(got) != 0 {
		t.Errorf("the aborted batch wrote %+v", got)
	}
}

// In a Batch, a failing record aborts the whole batch: the records before
// it lose their outputs and counts too, and the records after it are not
// run; the next batch starts afresh.
func TestBatchAbortsOnFailure(t *testing.T) {
	d := eostest.New(t, clickCounts(topology.Fail()))
	in := eostest.Input(d, "clicks", codec.String())
	out := eostest.Output(d, "click-counts", codec.JSON[int64]())
	counts := eostest.Store(d, "counts", codec.String(), codec.Int64())
	var failed, after error
	err := d.Batch(func() error {
		pipe(t, in, "ada", "click")
		failed = in.Pipe("mallory", "click")
		after = in.Pipe("bob", "click")
		return nil
	})
	if err == nil || failed != err || after != err {
		t.Fatalf("Batch: %v; the failing pipe: %v; the pipe after it: %v; want the failure from each", err, failed, after)
	}
	if got := counts.All(); len(got) != 0 {
		t.Errorf("store after the aborted batch: %+v, want it empty", got)
	}
	if got := out.ReadAll(); len(got) != 0 {
		t.Errorf("the aborted batch wrote %+v", got)
	}
	if err := d.Batch(func() error { return in.Pipe("bob", "click") }); err != nil {
		t.Fatal(err)
	}
	if n, ok := counts.Get("bob"); !ok || n != 1 {
		t.Errorf("bob = %d (%v) after the next batch, want 1", n, ok)
	}
}

// visits counts visits per user; the input is keyed by visit, so the
// records are re-keyed through a repartition topic.
func visits() *topology.Topology {
	top := topology.New()
	in := topology.Source(top, "visits", codec.String(), topology.Named("in"))
	byUser := topology.GroupBy(in, "by-user", func(_ context.Context, _ []byte, v string) ([]byte, error) {
		user, _, _ := strings.Cut(v, ":")
		return []byte(user), nil
	}, topology.Repartition(codec.String()))
	counts := topology.Count(byUser, "counts", state.Memory())
	topology.ToTable(counts, "visits-per-user", codec.JSON[int64](), topology.Named("out"))
	return top
}

// Re-keyed records go through the repartition topic, partitioned by the
// new key, and are counted there, before Pipe returns.
func TestRepartitionedCount(t *testing.T) {
	d := eostest.New(t, visits(), eostest.Partitions("visits", 3))
	in := eostest.Input(d, "visits", codec.String())
	for i, v := range []string{"ada:/", "bob:/a", "ada:/b", "cy:/", "ada:/c"} {
		pipe(t, in, fmt.Sprint("visit-", i), v)
	}
	out := eostest.Output(d, "visits-per-user", codec.JSON[int64]())
	if got, want := latest(out.ReadAll()), map[string]int64{"ada": 3, "bob": 1, "cy": 1}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("counts %v, want %v", got, want)
	}
	rt := topology.RepartitionTopic(eostest.DefaultAppID, "by-user")
	through := eostest.Output(d, rt, codec.String()).ReadAll()
	if len(through) != 5 {
		t.Fatalf("%s holds %d records, want 5", rt, len(through))
	}
	for _, r := range through {
		if want := kafkaPartitionOf(string(r.Key), 3); r.Partition != want {
			t.Errorf("%s in partition %d of %s, want %d (3 partitions, as its input)", r.Key, r.Partition, rt, want)
		}
	}
	if n, ok := eostest.Store(d, "counts", codec.String(), codec.Int64()).Get("ada"); !ok || n != 3 {
		t.Errorf("store: ada = %d, %v", n, ok)
	}
}

// kafkaPartitionOf computes Kafka's partition of any key, from the
// driver's own placement of a keyed record in a topic of n partitions.
func kafkaPartitionOf(key string, n int32) int32 {
	d, err := eostest.Open(whereFrom(), eostest.Partitions("in", n))
	if err != nil {
		panic(err)
	}
	defer d.Close()
	if err := d.Pipe("in", []byte(key), nil); err != nil {
		panic(err)
	}
	var p int32
	fmt.Sscan(eostest.Output(d, "out", codec.String()).ReadAll()[0].Value, &p)
	return p
}

// A windowed count with final results closes a window when stream time,
// moved by the records' timestamps, passes its end; a record for a
// closed window is late and skipped.
func TestWindowedCountByStreamTime(t *testing.T) {
	top := topology.New()
	in := topology.Source(top, "orders", codec.String(), topology.Named("in"))
	counts := topology.CountWindows(topology.GroupByKey(in, "by-shop"), "per-minute",
		topology.Tumbling(time.Minute).Grace(10*time.Second).FinalOnly(), state.Memory())
	topology.ToTable(counts, "orders-per-minute", codec.JSON[topology.Windowed[int64]](), topology.Named("out"))
	d := eostest.New(t, top)
	orders := eostest.Input(d, "orders", codec.String())
	out := eostest.Output(d, "orders-per-minute", codec.JSON[topology.Windowed[int64]]())
	at := func(hms string) eostest.PipeOption {
		ts, err := time.Parse(time.DateTime, "2026-01-02 "+hms)
		if err != nil {
			t.Fatal(err)
		}
		return eostest.Timestamp(ts)
	}
	pipe(t, orders, "north", "o1", at("10:00:05"))
	pipe(t, orders, "north", "o2", at("10:00:55"))
	pipe(t, orders, "north", "o3", at("10:01:05")) // 10:00 is open in its grace
	pipe(t, orders, "north", "o4", at("10:00:59"))
	if got := out.ReadAll(); len(got) != 0 {
		t.Fatalf("a window closed early: %+v", got)
	}
	pipe(t, orders, "south", "o5", at("10:01:10")) // stream time passes 10:01 + grace
	got := out.ReadAll()
	if len(got) != 1 || string(got[0].Key) != "north" || got[0].Value.Value != 3 || got[0].Value.Window.Start.Format("15:04") != "10:00" {
		t.Fatalf("closed windows: %+v, want north 10:00 with 3", got)
	}
	pipe(t, orders, "north", "late", at("10:00:30"))
	if s := d.Stats(); s.Skipped != 1 {
		t.Errorf("Stats: %+v, want the late record skipped", s)
	}
}
