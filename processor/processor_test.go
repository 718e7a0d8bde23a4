package processor_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/eosflow/eosflow/codec"
	"github.com/eosflow/eosflow/processor"
	"github.com/eosflow/eosflow/topology"
	"github.com/twmb/franz-go/pkg/kgo"
)

var errBoom = errors.New("boom")

// build makes a topology whose "check" node fails on value "bad" and panics
// on "panic", after a sibling branch has already emitted an output.
func build(policy topology.ErrorPolicy, calls *int) *topology.Topology {
	top := topology.New("p")
	in := topology.Source(top, "in", "in", codec.String())
	topology.To(in, "copy", "copies", codec.String())
	checked := topology.MapValues(in, "check", func(v string) (string, error) {
		*calls++
		switch v {
		case "bad":
			return "", errBoom
		case "panic":
			panic("user bug")
		}
		return strings.ToUpper(v), nil
	})
	topology.To(checked, "out", "out", codec.String())
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
	noSleep := processor.WithSleep(func(context.Context, time.Duration) error { return nil })
	cases := []struct {
		name      string
		policy    topology.ErrorPolicy
		value     string
		outcome   processor.Outcome
		topics    string
		calls     int
		wantError bool
	}{
		{"success emits all outputs", topology.Fail(), "ok", processor.Processed, "copies,out", 1, false},
		{"fail drops partial output", topology.Fail(), "bad", processor.Failed, "", 1, true},
		{"skip drops the record", topology.Skip(), "bad", processor.Skipped, "", 1, false},
		{"dead letter writes the original", topology.DeadLetter("dlq"), "bad", processor.DeadLettered, "dlq", 1, false},
		{"retry then dead letter", topology.Retry(3, time.Millisecond, topology.DeadLetter("dlq")), "bad", processor.DeadLettered, "dlq", 3, false},
		{"retry exhausted then fail", topology.Retry(2, time.Millisecond, topology.Fail()), "bad", processor.Failed, "", 2, true},
		{"panic is dead-lettered with its stack", topology.DeadLetter("dlq"), "panic", processor.DeadLettered, "dlq", 1, false},
		{"panic under fail", topology.Fail(), "panic", processor.Failed, "", 1, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			calls := 0
			p, err := processor.New(build(tc.policy, &calls), noSleep)
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
				if tc.value == "panic" && !strings.Contains(header(d, processor.HeaderStack), "processor_test.go") {
					t.Errorf("panic stack missing from dead letter")
				}
			}
		})
	}
}

func TestStatsAndInvalidTopology(t *testing.T) {
	calls := 0
	p, err := processor.New(build(topology.Skip(), &calls))
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range []string{"a", "bad", "b"} {
		if _, err := p.Process(context.Background(), &kgo.Record{Topic: "in", Value: []byte(v)}, func(*kgo.Record) {}); err != nil {
			t.Fatal(err)
		}
	}
	if s := p.Stats(); s.Processed != 2 || s.Skipped != 1 {
		t.Fatalf("stats %+v", s)
	}
	if _, err := p.Process(context.Background(), &kgo.Record{Topic: "other"}, func(*kgo.Record) {}); !errors.Is(err, processor.ErrNoSource) {
		t.Fatalf("unknown topic: %v", err)
	}
	if _, err := processor.New(topology.New("empty")); !errors.Is(err, topology.ErrInvalid) {
		t.Fatalf("invalid topology accepted: %v", err)
	}
}

// A cancelled context (a shutdown in progress) must not change what the
// policies do: the open batch still commits, so a record under Skip or
// DeadLetter must not turn into a failure that aborts it. A retry's wait is
// cut short, and the policy after the retries applies at once.
func TestPoliciesUnderCancelledContext(t *testing.T) {
	cases := []struct {
		name    string
		policy  topology.ErrorPolicy
		outcome processor.Outcome
		topics  string
		calls   int
	}{
		{"skip", topology.Skip(), processor.Skipped, "", 1},
		{"dead letter", topology.DeadLetter("dlq"), processor.DeadLettered, "dlq", 1},
		{"retry then skip", topology.Retry(5, time.Hour, topology.Skip()), processor.Skipped, "", 1},
		{"retry then dead letter", topology.Retry(5, time.Hour, topology.DeadLetter("dlq")), processor.DeadLettered, "dlq", 1},
		{"retry without backoff then skip", topology.Retry(3, 0, topology.Skip()), processor.Skipped, "", 1},
		{"fail", topology.Fail(), processor.Failed, "", 1},
		{"retry then fail", topology.Retry(5, time.Hour, topology.Fail()), processor.Failed, "", 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			calls := 0
			p, err := processor.New(build(tc.policy, &calls))
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
			if got != tc.outcome || (err != nil) != (tc.outcome == processor.Failed) {
				t.Fatalf("outcome %v err %v; want %v", got, err, tc.outcome)
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
			var ne *topology.NodeError
			if err != nil && (!errors.As(err, &ne) || ne.Node != "check") {
				t.Fatalf("a failure should name the node: %v", err)
			}
		})
	}
}

// A retry whose wait is interrupted by cancellation moves on to its Then
// policy without waiting out the backoff.
func TestRetryStopsWhenContextEnds(t *testing.T) {
	calls := 0
	p, _ := processor.New(build(topology.Retry(100, time.Hour, topology.Skip()), &calls))
	ctx, cancel := context.WithCancel(context.Background())
	go func() { time.Sleep(20 * time.Millisecond); cancel() }()
	start := time.Now()
	got, err := p.Process(ctx, &kgo.Record{Topic: "in", Value: []byte("bad")}, func(*kgo.Record) {})
	if got != processor.Skipped || err != nil || time.Since(start) > 5*time.Second {
		t.Fatalf("cancelled retry should skip promptly, got %v %v after %s", got, err, time.Since(start))
	}
	if s := p.Stats(); s.Skipped != 1 || s.Retries != 0 {
		t.Fatalf("stats %+v, want one skip and no completed retry", s)
	}
}

func BenchmarkProcess(b *testing.B) {
	top := topology.New("bench")
	in := topology.Source(top, "in", "in", codec.Bytes())
	up := topology.MapValues(in, "upper", func(v []byte) ([]byte, error) {
		out := make([]byte, len(v))
		for i, c := range v {
			if c >= 'a' && c <= 'z' {
				c -= 32
			}
			out[i] = c
		}
		return out, nil
	})
	topology.To(up, "out", "out", codec.Bytes())
	p, err := processor.New(top)
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
