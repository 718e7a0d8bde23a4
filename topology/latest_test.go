package topology_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"testing"

	"github.com/eosflow/eosflow/codec"
	"github.com/eosflow/eosflow/internal/engine"
	"github.com/eosflow/eosflow/processor"
	"github.com/eosflow/eosflow/state"
	"github.com/eosflow/eosflow/topology"
	"github.com/twmb/franz-go/pkg/kgo"
)

// flush ends a batch as the runtime does before it commits: the held-back
// updates run, and their outputs are returned as "topic:key=value".
func (r *rig) flush() (engine.Outcome, []string, error) {
	r.t.Helper()
	var out []string
	got, err := r.e.Flush(func(*kgo.Record) context.Context { return context.Background() }, func(o *kgo.Record) {
		out = append(out, fmt.Sprintf("%s:%s=%s", o.Topic, o.Key, o.Value))
	}, func(engine.Outcome) {})
	return got, out, err
}

// latestKeys is the key of record i of the batch in TestLatestPerCommit:
// a hot key and two others.
var latestKeys = []string{"a", "b", "a", "c", "a", "b", "a", "c", "b", "a"}

// Each aggregation, with LatestPerCommit, emits nothing per record and,
// at the end of the batch, one update per key with the key's final value;
// without it, one update per record. The next batch goes on from the
// committed values and emits only the keys it touched.
func TestLatestPerCommit(t *testing.T) {
	for _, op := range []string{"Count", "Reduce", "Aggregate"} {
		for _, latest := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/latest=%v", op, latest), func(t *testing.T) {
				var opts []topology.AggregateOption
				if latest {
					opts = append(opts, topology.LatestPerCommit())
				}
				top := topology.New()
				in := topology.Source(top, "in", codec.JSON[int64]())
				g := topology.GroupByKey(in, "by-key")
				var tbl topology.Table[int64]
				switch op {
				case "Count":
					tbl = topology.Count(g, "agg", state.Memory(), opts...)
				case "Reduce":
					tbl = topology.Reduce(g, "agg", func(_ context.Context, acc, v int64) (int64, error) { return acc + v, nil },
						state.Memory(), codec.JSON[int64](), opts...)
				case "Aggregate":
					tbl = topology.Aggregate(g, "agg", func() int64 { return 0 },
						func(_ context.Context, _ []byte, v, acc int64) (int64, error) { return acc + v, nil },
						state.Memory(), codec.JSON[int64](), opts...)
				}
				topology.ToTable(tbl, "out", codec.JSON[int64]())
				r := newRig(t, top)
				var perRecord []string
				for _, k := range latestKeys {
					perRecord = append(perRecord, r.must("in", 0, k, "1")...) // every value 1: each op counts
				}
				_, flushed, err := r.flush()
				if err != nil {
					t.Fatal(err)
				}
				if latest {
					if len(perRecord) != 0 {
						t.Fatalf("per record: %v, want nothing before the end of the batch", perRecord)
					}
					if want := []string{"out:a=5", "out:b=3", "out:c=2"}; !slices.Equal(flushed, want) {
						t.Fatalf("flushed: %v, want %v", flushed, want)
					}
				} else {
					if len(perRecord) != len(latestKeys) || perRecord[len(perRecord)-1] != "out:a=5" || len(flushed) != 0 {
						t.Fatalf("per record: %v, flushed %v; want one update per record, the last a=5, and nothing held back", perRecord, flushed)
					}
				}
				r.commit()
				for _, k := range []string{"c", "c"} {
					perRecord = append(perRecord, r.must("in", 0, k, "1")...)
				}
				if _, flushed, _ = r.flush(); latest && !slices.Equal(flushed, []string{"out:c=4"}) {
					t.Fatalf("second batch flushed %v, want only c=4", flushed)
				}
			})
		}
	}
}

// A node after the aggregation that skips an update at the end of the
// batch drops that update only: the store keeps the key's new value, which
// the next batch counts on from, and the other keys' updates go out.
func TestLatestPerCommitSkipKeepsStore(t *testing.T) {
	top := topology.New()
	in := topology.Source(top, "in", codec.String())
	counts := topology.Count(topology.GroupByKey(in, "by-key"), "counts", state.Memory(), topology.LatestPerCommit())
	checked := topology.Process(topology.ToStream(counts, "updates"), "check", func(ctx processor.Context[int64], r processor.Record[int64]) error {
		if string(r.Key) == "b" && r.Value == 2 {
			return errors.New("b=2 refused")
		}
		ctx.Emit(r)
		return nil
	})
	topology.To(checked, "out", codec.JSON[int64]())
	top.OnError("check", topology.Skip())
	r := newRig(t, top)
	for _, k := range []string{"a", "b", "b"} {
		r.must("in", 0, k, "")
	}
	got, out, err := r.flush()
	if got != engine.Processed || err != nil || !slices.Equal(out, []string{"out:a=1"}) {
		t.Fatalf("flush: %v %v %v, want Processed with only a=1", got, out, err)
	}
	if tally := r.e.Take(); tally.Skipped != 1 {
		t.Fatalf("tally %+v, want one skip", tally)
	}
	if v, ok := r.get("counts", "in", 0, "b"); !ok || v != "\x00\x00\x00\x00\x00\x00\x00\x02" {
		t.Fatalf("stored count of b: %q %v, want 2: a skipped update keeps its store write", v, ok)
	}
	r.commit()
	r.must("in", 0, "b", "")
	if _, out, _ := r.flush(); !slices.Equal(out, []string{"out:b=3"}) {
		t.Fatalf("next batch: %v, want b=3", out)
	}
}

// Aggregations chained after one another all hold back: the second sees
// the first's final updates only (one update per key, not 5, 3 and 2),
// because held updates run in topology order.
func TestLatestPerCommitChained(t *testing.T) {
	top := topology.New()
	in := topology.Source(top, "in", codec.String())
	counts := topology.Count(topology.GroupByKey(in, "by-key"), "counts", state.Memory(), topology.LatestPerCommit())
	topology.ToTable(counts, "counts", codec.JSON[int64](), topology.Named("counts-out"))
	same := topology.MapValues(topology.ToStream(counts, "updates"), "same-key", func(_ context.Context, n int64) (int64, error) { return n, nil })
	updates := topology.Count(topology.GroupByKey(same, "by-same-key"), "updates-seen", state.Memory(), topology.LatestPerCommit())
	topology.ToTable(updates, "updates", codec.JSON[int64](), topology.Named("updates-out"))
	// A path without an aggregation in the same topology emits per record.
	topology.To(in, "echo", codec.String())
	r := newRig(t, top)
	var echoed []string
	for i, k := range latestKeys {
		echoed = append(echoed, r.must("in", 0, k, strconv.Itoa(i))...)
	}
	if len(echoed) != len(latestKeys) {
		t.Fatalf("echo path: %v, want one output per record", echoed)
	}
	_, out, err := r.flush()
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(out)
	if want := []string{"counts:a=5", "counts:b=3", "counts:c=2", "updates:a=1", "updates:b=1", "updates:c=1"}; !slices.Equal(out, want) {
		t.Fatalf("flushed %v, want %v", out, want)
	}
}
