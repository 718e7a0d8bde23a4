package sim

import (
	"context"
	"encoding/binary"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/eosflow/eosflow/tools/chaos"
	"github.com/twmb/franz-go/pkg/kgo"
)

// The firings judge can fail: a firing written twice is a repeated count,
// and the input moves stream time often enough that its count is judged.
func TestTheFiringsJudgeCatchesARepeat(t *testing.T) {
	var streamed int64
	tamper := func(s *sim) error {
		ctx := context.Background()
		in, err := s.read(ctx, input, true)
		if err != nil {
			return err
		}
		for _, n := range streamFires(in, s.cfg.Partitions) {
			streamed += n
		}
		out, err := s.read(ctx, fired, true)
		if err != nil || len(out) == 0 {
			return err // the test fails below: the run proved nothing
		}
		return s.produceAgain(out[0])
	}
	r := run(context.Background(), Schedule{Pipeline: Timers}, Config{}, tamper)
	if r.OK() || r.Kind != KindFires || !strings.Contains(r.Failure, "count 1 after") {
		t.Fatalf("a firing written twice: failure %q (%s), want it reported", r.Failure, r.Kind)
	}
	if streamed < 3 {
		t.Fatalf("the input moved stream time %d times: too few to judge the stream-time timer", streamed)
	}
}

// A task's stream-time timer fires when a record moves its stream time
// past a multiple of the interval, not on its first record, nor on one
// at or behind stream time.
func TestStreamFiresFollowsStreamTime(t *testing.T) {
	at := func(p int32, ms int64) *kgo.Record { return &kgo.Record{Partition: p, Timestamp: time.UnixMilli(ms)} }
	in := []*kgo.Record{at(0, 10), at(0, 10), at(0, 12), at(1, 5), at(0, 11), at(0, 13), at(1, 5)}
	got := streamFires(in, 3)
	want := map[string]int64{"stream/0": 2, "stream/1": 0, "stream/2": 0}
	for k, n := range want {
		if got[k] != n {
			t.Errorf("%s: %d firings, want %d (all: %v)", k, got[k], n, got)
		}
	}
	if chaos.StreamEvery != time.Millisecond {
		t.Fatalf("the cases above assume a 1ms interval, not %v", chaos.StreamEvery)
	}
}

// The firings judge reports each way a task's firings can go wrong, and
// lets a lost commit's firings be missing.
func TestJudgeFiring(t *testing.T) {
	fire := func(kind string, n int64) *kgo.Record {
		return &kgo.Record{Key: []byte(kind), Value: []byte(strconv.FormatInt(n, 10))}
	}
	logged := func(kind string, n int64) *kgo.Record {
		return &kgo.Record{Key: []byte(kind), Value: binary.BigEndian.AppendUint64(nil, uint64(n))}
	}
	want := map[string]int64{"stream/0": 2}
	cases := []struct {
		name      string
		out, log  []*kgo.Record
		lost      map[string]int64
		complaint string // "" when the judge must pass
	}{
		{"every firing once", []*kgo.Record{fire("stream", 1), fire("wall", 1), fire("stream", 2)}, []*kgo.Record{logged("stream", 2), logged("wall", 1)}, nil, ""},
		{"a firing repeated", []*kgo.Record{fire("stream", 1), fire("stream", 1), fire("stream", 2), fire("wall", 1)}, []*kgo.Record{logged("stream", 2), logged("wall", 1)}, nil, "stream/0: count 1 after 1"},
		{"a stream-time firing missing", []*kgo.Record{fire("stream", 1), fire("wall", 1)}, []*kgo.Record{logged("stream", 1), logged("wall", 1)}, nil, "stream/0: 1 firings, want 2"},
		{"a wall-clock timer that never fired", []*kgo.Record{fire("stream", 1), fire("stream", 2)}, []*kgo.Record{logged("stream", 2)}, nil, "wall/0: never fired"},
		{"a changelog behind the firings", []*kgo.Record{fire("stream", 1), fire("stream", 2), fire("wall", 1)}, []*kgo.Record{logged("stream", 1), logged("wall", 1)}, nil, "the store's changelog ends at 1, the firings at 2"},
		{"a lost commit's firings and stream time forgotten", []*kgo.Record{fire("stream", 1), fire("wall", 1)}, []*kgo.Record{logged("stream", 1), logged("wall", 1)}, map[string]int64{"stream/0": 1}, ""},
		{"a lost commit's firing skipped", []*kgo.Record{fire("stream", 2), fire("wall", 1)}, []*kgo.Record{logged("stream", 2), logged("wall", 1)}, map[string]int64{"stream/0": 1}, ""},
		{"below the input without a lost commit", []*kgo.Record{fire("wall", 1)}, []*kgo.Record{logged("wall", 1)}, map[string]int64{"stream/0": 1}, "stream/0: 0 firings, want 2 (1 at least)"},
	}
	low := map[string]int64{"stream/0": 1} // the input without the lost commit's records
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			bounds := fireBounds{low: want, high: want}
			if c.lost != nil {
				bounds.low = low
			}
			err := judgeFiring(bounds, c.out, c.log, c.lost)
			switch {
			case c.complaint == "" && err != nil:
				t.Fatalf("judged %v; want a pass", err)
			case c.complaint != "" && (err == nil || !strings.Contains(err.Error(), c.complaint)):
				t.Fatalf("judged %v; want %q", err, c.complaint)
			}
		})
	}
}

// The input without a lost commit's records moves stream time less, and
// less by one more when they held the task's first record; the records
// after them that did not move stream time in memory are gone with them.
func TestWithoutALostCommitStreamTimeMovesLess(t *testing.T) {
	rec := func(i int, ms int64) *kgo.Record {
		return &kgo.Record{Value: []byte("id=" + strconv.Itoa(i) + ";"), Timestamp: time.UnixMilli(ms)}
	}
	at := func(ms ...int64) []*kgo.Record {
		var in []*kgo.Record
		for i, m := range ms {
			in = append(in, rec(i, m))
		}
		return in
	}
	cases := []struct {
		in   []*kgo.Record
		lost []int
		want int64
	}{
		{at(10, 11, 12, 14), nil, 3},
		{at(10, 11, 12, 14), []int{1}, 2},
		{at(10, 11, 12, 14), []int{0, 1}, 1}, // the first record lost too
		{at(10, 11, 12, 14), []int{3}, 2},
		{at(10, 11, 12, 12), []int{2}, 1}, // the second 12 moved nothing in memory
		{at(10, 11, 11, 12), []int{1}, 1}, // … nor the second 11
		{at(10, 10, 11, 12), []int{0}, 1}, // the first record lost, the next shadowed
	}
	for _, c := range cases {
		var lost []*kgo.Record
		for _, i := range c.lost {
			lost = append(lost, c.in[i])
		}
		if got := streamFires(without(c.in, lost), 1)["stream/0"]; got != c.want {
			t.Errorf("%d records, without %v: %d firings, want %d", len(c.in), c.lost, got, c.want)
		}
	}
}
