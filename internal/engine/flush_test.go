package engine_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/eosflow/eosflow/codec"
	"github.com/eosflow/eosflow/internal/engine"
	"github.com/eosflow/eosflow/processor"
	"github.com/eosflow/eosflow/state"
	"github.com/eosflow/eosflow/topology"
	"github.com/twmb/franz-go/pkg/kgo"
)

// latestTop counts per key with LatestPerCommit; a Process node after the
// count (policy p) fails updates for which fail says so, and a sibling
// branch of the source fails records whose value is "bad" (same policy).
func latestTop(p topology.ErrorPolicy, fail func(ctx context.Context, r processor.Record[int64]) error) *topology.Topology {
	top := topology.New()
	in := topology.Source(top, "in", codec.String())
	counts := topology.Count(topology.GroupByKey(in, "by-key"), "counts", state.Memory(), topology.LatestPerCommit())
	checked := topology.Process(topology.ToStream(counts, "updates"), "check", func(ctx processor.Context[int64], r processor.Record[int64]) error {
		if err := fail(ctx, r); err != nil {
			return err
		}
		ctx.Emit(r)
		return nil
	})
	topology.To(checked, "out", codec.JSON[int64]())
	sibling := topology.Filter(in, "sibling", func(_ []byte, v string) bool { return true })
	bad := topology.MapValues(sibling, "bad", func(_ context.Context, v string) (string, error) {
		if v == "bad" {
			return "", errors.New("bad value")
		}
		return v, nil
	})
	topology.To(bad, "side", codec.String())
	top.OnError("check", p).OnError("bad", p)
	return top
}

func never(context.Context, processor.Record[int64]) error { return nil }

type flushed struct {
	out   []*kgo.Record
	begun []int64 // offsets of the input records begin was called with
	done  []engine.Outcome
}

func flush(ctx context.Context, e *engine.Engine) (engine.Outcome, *flushed, error) {
	f := &flushed{}
	got, err := e.Flush(func(in *kgo.Record) context.Context {
		f.begun = append(f.begun, in.Offset)
		return ctx
	}, func(r *kgo.Record) { f.out = append(f.out, r) }, func(o engine.Outcome) { f.done = append(f.done, o) })
	return got, f, err
}

func (f *flushed) outputs() []string {
	var s []string
	for _, r := range f.out {
		s = append(s, fmt.Sprintf("%s:%s=%s", r.Topic, r.Key, r.Value))
	}
	return s
}

func process(t *testing.T, e *engine.Engine, recs ...*kgo.Record) []string {
	t.Helper()
	var out []string
	for _, r := range recs {
		if _, err := e.Process(context.Background(), r, func(o *kgo.Record) {
			out = append(out, fmt.Sprintf("%s:%s=%s", o.Topic, o.Key, o.Value))
		}); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

func rec(offset int64, key, value string) *kgo.Record {
	return &kgo.Record{Topic: "in", Partition: 3, Offset: offset, Key: []byte(key), Value: []byte(value),
		Timestamp: time.UnixMilli(1000 + offset), Headers: []kgo.RecordHeader{{Key: "h", Value: []byte(fmt.Sprint(offset))}}}
}

// A held-back update runs as the input record that made it: its outputs
// carry that record's headers and timestamp, begin gets that record (for
// its context, attribution and store savepoint), and the stores are its
// task's. Updates are run in the order their keys were first held.
func TestFlushRunsUpdatesAsTheirInputRecords(t *testing.T) {
	m := newMemStores(t)
	e, err := engine.New(latestTop(topology.Fail(), never), engine.Stores(m.get))
	if err != nil {
		t.Fatal(err)
	}
	side := process(t, e, rec(0, "a", "x"), rec(1, "b", "x"), rec(2, "a", "x"), rec(3, "a", "x"), rec(4, "b", "x"))
	if len(side) != 5 || e.Held() != 2 {
		t.Fatalf("per record: outputs %v and %d held, want the sibling's 5 outputs and 2 held", side, e.Held())
	}
	m.asked = nil
	got, f, err := flush(context.Background(), e)
	if got != engine.Processed || err != nil {
		t.Fatalf("Flush: %v %v", got, err)
	}
	if want := []string{"out:a=3", "out:b=2"}; !slices.Equal(f.outputs(), want) {
		t.Fatalf("outputs %v, want %v", f.outputs(), want)
	}
	if !slices.Equal(f.begun, []int64{3, 4}) || !slices.Equal(f.done, []engine.Outcome{engine.Processed, engine.Processed}) {
		t.Fatalf("begun with offsets %v, done %v; want each key's last record, 3 and 4, both processed", f.begun, f.done)
	}
	for i, want := range []int64{3, 4} {
		o := f.out[i]
		if !o.Timestamp.Equal(time.UnixMilli(1000+want)) || len(o.Headers) != 1 || string(o.Headers[0].Value) != fmt.Sprint(want) {
			t.Fatalf("output %d: timestamp %v headers %v, want those of offset %d", i, o.Timestamp, o.Headers, want)
		}
	}
	if e.Held() != 0 {
		t.Fatalf("%d updates still held after Flush", e.Held())
	}
	if got, f, err := flush(context.Background(), e); got != engine.Processed || err != nil || len(f.out) != 0 {
		t.Fatalf("a second Flush: %v %v %v, want nothing", got, err, f.outputs())
	}
}

// A record that fails after the aggregation held its update leaves the
// key's previous update held (the runtime undoes its store write), as it
// leaves no outputs.
func TestFailedRecordDropsItsHold(t *testing.T) {
	m := newMemStores(t)
	e, err := engine.New(latestTop(topology.Skip(), never), engine.Stores(m.get))
	if err != nil {
		t.Fatal(err)
	}
	process(t, e, rec(0, "a", "x"), rec(1, "a", "x"))
	if got, _ := e.Process(context.Background(), rec(2, "a", "bad"), func(*kgo.Record) {}); got != engine.Skipped {
		t.Fatalf("outcome %v, want Skipped", got)
	}
	if got, _ := e.Process(context.Background(), rec(3, "c", "bad"), func(*kgo.Record) {}); got != engine.Skipped {
		t.Fatalf("outcome %v, want Skipped", got)
	}
	_, f, err := flush(context.Background(), e)
	if err != nil || !slices.Equal(f.outputs(), []string{"out:a=2"}) || !slices.Equal(f.begun, []int64{1}) {
		t.Fatalf("flushed %v from offsets %v (%v), want a=2 from offset 1 only", f.outputs(), f.begun, err)
	}
}

// A failure at flush goes to the failing node's policy, with the input
// record that made the update: DeadLetter writes that record and goes on;
// Fail stops the flush with an error naming it and forgets what is left;
// after the context ended, the update is Interrupted; a panic is the
// node's failure.
func TestFlushFailures(t *testing.T) {
	failB := func(ctx context.Context, r processor.Record[int64]) error {
		if string(r.Key) == "b" {
			return errors.New("b refused")
		}
		return nil
	}
	t.Run("dead letter", func(t *testing.T) {
		e, err := engine.New(latestTop(topology.DeadLetter("dlq"), failB), engine.Stores(newMemStores(t).get))
		if err != nil {
			t.Fatal(err)
		}
		process(t, e, rec(0, "b", "v0"), rec(1, "a", "x"), rec(2, "b", "v2"), rec(3, "c", "x"))
		got, f, err := flush(context.Background(), e)
		if got != engine.Processed || err != nil {
			t.Fatalf("Flush: %v %v", got, err)
		}
		if want := []string{"dlq:b=v2", "out:a=1", "out:c=1"}; !slices.Equal(f.outputs(), want) {
			t.Fatalf("outputs %v, want %v", f.outputs(), want)
		}
		dl := f.out[0]
		for k, want := range map[string]string{processor.HeaderNode: "check", processor.HeaderSourceOffset: "2", processor.HeaderSourcePartition: "3", "h": "2"} {
			if !hasHeader(dl, k, want) {
				t.Fatalf("dead letter headers %v lack %s=%s", dl.Headers, k, want)
			}
		}
		if !slices.Equal(f.done, []engine.Outcome{engine.DeadLettered, engine.Processed, engine.Processed}) {
			t.Fatalf("outcomes %v", f.done)
		}
		if tally := e.Take(); tally.DeadLettered != 1 {
			t.Fatalf("tally %+v", tally)
		}
	})
	t.Run("fail", func(t *testing.T) {
		e, err := engine.New(latestTop(topology.Fail(), failB), engine.Stores(newMemStores(t).get))
		if err != nil {
			t.Fatal(err)
		}
		process(t, e, rec(0, "a", "x"), rec(1, "b", "x"), rec(2, "c", "x"))
		got, f, err := flush(context.Background(), e)
		var re *processor.RecordError
		if got != engine.Failed || !errors.As(err, &re) || re.Offset != 1 || !strings.Contains(err.Error(), "b refused") {
			t.Fatalf("Flush: %v %v, want Failed naming offset 1 and the error", got, err)
		}
		if !slices.Equal(f.outputs(), []string{"out:a=1"}) || e.Held() != 0 {
			t.Fatalf("outputs %v, %d still held; want a=1 only and the rest forgotten", f.outputs(), e.Held())
		}
	})
	t.Run("interrupted", func(t *testing.T) {
		e, err := engine.New(latestTop(topology.Skip(), func(ctx context.Context, _ processor.Record[int64]) error { return ctx.Err() }),
			engine.Stores(newMemStores(t).get))
		if err != nil {
			t.Fatal(err)
		}
		process(t, e, rec(0, "a", "x"), rec(1, "b", "x"))
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		got, f, err := flush(ctx, e)
		if got != engine.Interrupted || err != nil || len(f.out) != 0 || len(f.begun) != 1 || e.Held() != 0 {
			t.Fatalf("Flush: %v %v, outputs %v, begun %v, %d held; want Interrupted at the first update, the rest forgotten",
				got, err, f.outputs(), f.begun, e.Held())
		}
	})
	t.Run("panic", func(t *testing.T) {
		e, err := engine.New(latestTop(topology.Fail(), func(context.Context, processor.Record[int64]) error { panic("at flush") }),
			engine.Stores(newMemStores(t).get))
		if err != nil {
			t.Fatal(err)
		}
		process(t, e, rec(0, "a", "x"))
		got, _, err := flush(context.Background(), e)
		var ne *topology.NodeError
		if got != engine.Failed || !errors.As(err, &ne) || ne.Node != "check" || ne.Stack == nil {
			t.Fatalf("Flush: %v %v, want Failed with the panic attributed to check", got, err)
		}
	})
}

// Drop forgets every held update: a batch that aborts emits none of them,
// and the next batch's Flush starts empty.
func TestDropForgetsHeldUpdates(t *testing.T) {
	e, err := engine.New(latestTop(topology.Fail(), never), engine.Stores(newMemStores(t).get))
	if err != nil {
		t.Fatal(err)
	}
	process(t, e, rec(0, "a", "x"), rec(1, "b", "x"))
	e.Drop()
	process(t, e, rec(2, "c", "x"))
	if _, f, err := flush(context.Background(), e); err != nil || !slices.Equal(f.outputs(), []string{"out:c=1"}) {
		t.Fatalf("after Drop: %v %v, want c=1 only", f.outputs(), err)
	}
}

func hasHeader(r *kgo.Record, k, v string) bool {
	for _, h := range r.Headers {
		if h.Key == k && string(h.Value) == v {
			return true
		}
	}
	return false
}
