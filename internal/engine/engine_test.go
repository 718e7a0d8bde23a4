package engine_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/eosflow/eosflow/codec"
	"github.com/eosflow/eosflow/internal/engine"
	"github.com/eosflow/eosflow/processor"
	"github.com/eosflow/eosflow/topology"
	"github.com/twmb/franz-go/pkg/kgo"
)

var errBoom = errors.New("boom")

// build makes a topology whose "check" node fails on value "bad" and panics
// on "panic", after a sibling branch has already emitted an output.
func build(policy topology.ErrorPolicy, calls *int) *topology.Topology {
	top := topology.New()
	in := topology.Source(top, "in", codec.String())
	topology.To(in, "copies", codec.String(), topology.Named("copy"))
	checked := topology.MapValues(in, "check", func(_ context.Context, v string) (string, error) {
		*calls++
		switch v {
		case "bad":
			return "", errBoom
		case "panic":
			panic("user bug")
		}
		return strings.ToUpper(v), nil
	})
	topology.To(checked, "out", codec.String())
	top.OnError("check", policy)
	return top
}

func header(r *kgo.Record, key string) string {
	for _, h := range r.Headers {
		if h.Key == key {
			return string(h.Value)
		}
	}
	return ""
}

func TestPolicies(t *testing.T) {
	noSleep := engine.Sleep(func(context.Context, time.Duration) error { return nil })
	cases := []struct {
		name      string
		policy    topology.ErrorPolicy
		value     string
		outcome   engine.Outcome
		topics    string
		calls     int
		wantError bool
	}{
		{"success emits all outputs", topology.Fail(), "ok", engine.Processed, "copies,out", 1, false},
		{"fail drops partial output", topology.Fail(), "bad", engine.Failed, "", 1, true},
		{"skip drops the record", topology.Skip(), "bad", engine.Skipped, "", 1, false},
		{"dead letter writes the original", topology.DeadLetter("dlq"), "bad", engine.DeadLettered, "dlq", 1, false},
		{"retry then dead letter", topology.Retry(3, time.Millisecond, topology.DeadLetter("dlq")), "bad", engine.DeadLettered, "dlq", 3, false},
		{"retry exhausted then fail", topology.Retry(2, time.Millisecond, topology.Fail()), "bad", engine.Failed, "", 2, true},
		{"panic is dead-lettered with its stack", topology.DeadLetter("dlq"), "panic", engine.DeadLettered, "dlq", 1, false},
		{"panic under fail", topology.Fail(), "panic", engine.Failed, "", 1, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			calls := 0
			p, err := engine.New(build(tc.policy, &calls), noSleep)
			if err != nil {
				t.Fatal(err)
			}
			var out []*kgo.Record
			in := &kgo.Record{Topic: "in", Partition: 3, Offset: 42, Key: []byte("k"), Value: []byte(tc.value),
				Headers: []kgo.RecordHeader{{Key: "trace", Value: []byte("t1")}}}
			got, err := p.Process(context.Background(), in, func(r *kgo.Record) { out = append(out, r) })
			if got != tc.outcome || (err != nil) != tc.wantError {
				t.Fatalf("outcome %v err %v; want %v error=%v", got, err, tc.outcome, tc.wantError)
			}
			var topics []string
			for _, r := range out {
				topics = append(topics, r.Topic)
			}
			if strings.Join(topics, ",") != tc.topics {
				t.Fatalf("outputs to %v, want %q", topics, tc.topics)
			}
			if calls != tc.calls {
				t.Fatalf("node called %d times, want %d", calls, tc.calls)
			}
			if tc.wantError {
				var re *processor.RecordError
				var ne *topology.NodeError
				if !errors.As(err, &re) || re.Offset != 42 || !errors.As(err, &ne) || ne.Node != "check" {
					t.Fatalf("error should name the record and node: %v", err)
				}
			}
			if tc.topics == "dlq" {
				d := out[0]
				if string(d.Value) != tc.value || string(d.Key) != "k" || header(d, "trace") != "t1" {
					t.Fatalf("dead letter is not the original record: %+v", d)
				}
				for key, want := range map[string]string{
					processor.HeaderNode: "check", processor.HeaderSourceTopic: "in",
					processor.HeaderSourcePartition: "3", processor.HeaderSourceOffset: "42",
				} {
					if got := header(d, key); got != want {
						t.Errorf("header %s = %q, want %q", key, got, want)
					}
				}
				if tc.value == "panic" && !strings.Contains(header(d, processor.HeaderStack), "engine_test.go") {
					t.Errorf("panic stack missing from dead letter")
				}
			}
		})
	}
}

func TestStatsAndInvalidTopology(t *testing.T) {
	calls := 0
	p, err := engine.New(build(topology.Skip(), &calls))
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range []string{"a", "bad", "b"} {
		if _, err := p.Process(context.Background(), &kgo.Record{Topic: "in", Value: []byte(v)}, func(*kgo.Record) {}); err != nil {
			t.Fatal(err)
		}
	}
	if s := p.Take(); s.Processed != 2 || s.Skipped != 1 {
		t.Fatalf("stats %+v", s)
	}
	if _, err := p.Process(context.Background(), &kgo.Record{Topic: "other"}, func(*kgo.Record) {}); !errors.Is(err, engine.ErrNoSource) {
		t.Fatalf("unknown topic: %v", err)
	}
	if _, err := engine.New(topology.New()); !errors.Is(err, topology.ErrInvalid) {
		t.Fatalf("invalid topology accepted: %v", err)
	}
}

// A record whose user code fails after its context ended (a shutdown or a
// revoke) is Interrupted under every policy: nothing is emitted, dead
// lettered or skipped, and no retry waits, since the failure is most
// likely the cancellation itself. The runtime leaves it for the next run.
func TestFailureAfterContextEndsIsInterrupted(t *testing.T) {
	for _, policy := range []topology.ErrorPolicy{
		topology.Skip(), topology.DeadLetter("dlq"), topology.Retry(5, time.Hour, topology.Skip()),
		topology.Retry(5, time.Hour, topology.DeadLetter("dlq")), topology.Retry(3, 0, topology.Skip()),
		topology.Fail(), topology.Retry(5, time.Hour, topology.Fail()),
	} {
		t.Run(policy.String(), func(t *testing.T) {
			calls := 0
			p, err := engine.New(build(policy, &calls))
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			var out []*kgo.Record
			start := time.Now()
			got, err := p.Process(ctx, &kgo.Record{Topic: "in", Offset: 7, Value: []byte("bad")}, func(r *kgo.Record) { out = append(out, r) })
			if d := time.Since(start); d > 5*time.Second {
				t.Fatalf("took %s: a cancelled retry must not wait out its backoff", d)
			}
			if got != engine.Interrupted || err != nil || len(out) != 0 || calls != 1 {
				t.Fatalf("outcome %v err %v outputs %d calls %d; want Interrupted, nil, 0, 1", got, err, len(out), calls)
			}
			if s := p.Take(); s != (engine.Tally{}) {
				t.Fatalf("an interrupted record counted: %+v", s)
			}
		})
	}
	// A panic is a bug, not a cancellation: its policy applies.
	calls := 0
	p, _ := engine.New(build(topology.DeadLetter("dlq"), &calls))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if got, err := p.Process(ctx, &kgo.Record{Topic: "in", Value: []byte("panic")}, func(*kgo.Record) {}); got != engine.DeadLettered || err != nil {
		t.Fatalf("panic under a cancelled context: %v %v, want DeadLettered", got, err)
	}
}

// A retry whose wait is cut short by cancellation ends the record as
// Interrupted at once, without waiting out the backoff.
func TestRetryStopsWhenContextEnds(t *testing.T) {
	calls := 0
	p, _ := engine.New(build(topology.Retry(100, time.Hour, topology.Skip()), &calls))
	ctx, cancel := context.WithCancel(context.Background())
	go func() { time.Sleep(20 * time.Millisecond); cancel() }()
	start := time.Now()
	got, err := p.Process(ctx, &kgo.Record{Topic: "in", Value: []byte("bad")}, func(*kgo.Record) {})
	if got != engine.Interrupted || err != nil || time.Since(start) > 5*time.Second {
		t.Fatalf("cancelled retry should end promptly as interrupted, got %v %v after %s", got, err, time.Since(start))
	}
	if s := p.Take(); s.Skipped != 0 || s.Retries != 0 {
		t.Fatalf("stats %+v, want nothing counted", s)
	}
}

func BenchmarkProcess(b *testing.B) {
	top := topology.New()
	in := topology.Source(top, "in", codec.Bytes())
	up := topology.MapValues(in, "upper", func(_ context.Context, v []byte) ([]byte, error) {
		out := make([]byte, len(v))
		for i, c := range v {
			if c >= 'a' && c <= 'z' {
				c -= 32
			}
			out[i] = c
		}
		return out, nil
	})
	topology.To(up, "out", codec.Bytes())
	p, err := engine.New(top)
	if err != nil {
		b.Fatal(err)
	}
	r := &kgo.Record{Topic: "in", Key: []byte("key"), Value: make([]byte, 100)}
	sink := func(*kgo.Record) {}
	ctx := context.Background()
	b.ReportAllocs()
	b.SetBytes(100)
	for b.Loop() {
		if _, err := p.Process(ctx, r, sink); err != nil {
			b.Fatal(err)
		}
	}
}
