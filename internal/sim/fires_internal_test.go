package sim

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/eosflow/eosflow/internal/chaos"
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
		cl, err := kgo.NewClient(append(s.base(), kgo.RecordPartitioner(kgo.ManualPartitioner()))...)
		if err != nil {
			return err
		}
		defer cl.Close()
		again := &kgo.Record{Topic: fired, Partition: out[0].Partition, Key: out[0].Key, Value: out[0].Value}
		return cl.ProduceSync(ctx, again).FirstErr()
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
