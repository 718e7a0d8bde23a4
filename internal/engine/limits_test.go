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

func TestOutputLimits(t *testing.T) {
	// "out" takes at most 200 bytes; "table" is compacted, with no size limit.
	limits := func(asked map[string]int) func(string) (int, bool, error) {
		return func(topic string) (int, bool, error) {
			asked[topic]++
			if topic == "table" {
				return 0, true, nil
			}
			return 200, false, nil
		}
	}
	fits := 200 - engine.RecordOverhead - 1 // value bytes that fit with key "k"
	cases := []struct {
		name    string
		limits  bool
		policy  topology.ErrorPolicy
		key     []byte
		value   int
		headers []kgo.RecordHeader
		outcome engine.Outcome
		outputs string // topic<-node of each record passed to out
		is      error  // the error wrapped by the failure, if any
		node    string // the node named by the failure or dead letter
	}{
		{name: "no limits set: nothing is checked", policy: topology.Fail(), value: 10000,
			outcome: engine.Processed, outputs: "out<-out,table<-table"},
		{name: "fits", limits: true, policy: topology.Fail(), key: []byte("k"), value: 100,
			outcome: engine.Processed, outputs: "out<-out,table<-table"},
		{name: "exactly at the limit fits", limits: true, policy: topology.Fail(), key: []byte("k"), value: fits,
			outcome: engine.Processed, outputs: "out<-out,table<-table"},
		{name: "one byte over fails the record", limits: true, policy: topology.Fail(), key: []byte("k"), value: fits + 1,
			outcome: engine.Failed, is: processor.ErrRecordTooLarge, node: "out"},
		{name: "headers count", limits: true, policy: topology.Fail(), key: []byte("k"), value: fits - 10,
			headers: []kgo.RecordHeader{{Key: "h", Value: make([]byte, 10)}},
			outcome: engine.Failed, is: processor.ErrRecordTooLarge, node: "out"},
		{name: "too large under skip", limits: true, policy: topology.Skip(), key: []byte("k"), value: 1000,
			outcome: engine.Skipped},
		{name: "too large under dead letter", limits: true, policy: topology.DeadLetter("dlq"), key: []byte("k"), value: 1000,
			outcome: engine.DeadLettered, outputs: "dlq<-out", is: processor.ErrRecordTooLarge, node: "out"},
		{name: "too large is not retried", limits: true, policy: topology.Retry(5, time.Hour, topology.DeadLetter("dlq")), key: []byte("k"), value: 1000,
			outcome: engine.DeadLettered, outputs: "dlq<-out", is: processor.ErrRecordTooLarge, node: "out"},
		{name: "no key for a compacted topic", limits: true, policy: topology.Fail(), value: 10,
			outcome: engine.Failed, is: processor.ErrNoKeyForCompactedTopic, node: "table"},
		{name: "no key for a compacted topic under dead letter", limits: true, policy: topology.DeadLetter("dlq"), value: 10,
			outcome: engine.DeadLettered, outputs: "dlq<-table", is: processor.ErrNoKeyForCompactedTopic, node: "table"},
		{name: "an empty key is a key", limits: true, policy: topology.Fail(), key: []byte{}, value: 10,
			outcome: engine.Processed, outputs: "out<-out,table<-table"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			asked := map[string]int{}
			var opts []engine.Option
			if tc.limits {
				opts = append(opts, engine.OutputLimits(limits(asked)))
			}
			p, err := engine.New(sinks(tc.policy), opts...)
			if err != nil {
				t.Fatal(err)
			}
			in := &kgo.Record{Topic: "in", Partition: 1, Offset: 9, Key: tc.key, Value: make([]byte, tc.value), Headers: tc.headers}
			var got []emitted
			start := time.Now()
			outcome, err := p.Process(context.Background(), in, collect(p, &got))
			if d := time.Since(start); d > 5*time.Second {
				t.Fatalf("took %s", d)
			}
			if outcome != tc.outcome || (err != nil) != (tc.outcome == engine.Failed) {
				t.Fatalf("outcome %v err %v; want %v", outcome, err, tc.outcome)
			}
			if s := describe(got); s != tc.outputs {
				t.Fatalf("outputs %q, want %q", s, tc.outputs)
			}
			if st := p.Take(); st.Retries != 0 {
				t.Fatalf("%d retries: a limit check cannot pass on a second try", st.Retries)
			}
			if err != nil {
				var re *processor.RecordError
				var ne *topology.NodeError
				if !errors.Is(err, tc.is) || !errors.As(err, &re) || re.Topic != "in" || re.Partition != 1 || re.Offset != 9 ||
					!errors.As(err, &ne) || ne.Node != tc.node {
					t.Fatalf("want %v at node %q naming in/1@9, got %v", tc.is, tc.node, err)
				}
				checkReason(t, err.Error(), tc.is)
			}
			if tc.outcome == engine.DeadLettered {
				d := got[0].rec
				if len(d.Value) != tc.value || header(d, processor.HeaderNode) != tc.node || header(d, processor.HeaderSourceOffset) != "9" {
					t.Fatalf("dead letter is not the original with error headers: %+v", d)
				}
				checkReason(t, header(d, processor.HeaderError), tc.is)
			}
		})
	}

	t.Run("each topic is asked once", func(t *testing.T) {
		asked := map[string]int{}
		p, err := engine.New(sinks(topology.Skip()), engine.OutputLimits(limits(asked)))
		if err != nil {
			t.Fatal(err)
		}
		for i := range 10 {
			p.Process(context.Background(), &kgo.Record{Topic: "in", Key: []byte("k"), Value: make([]byte, i*50)}, func(*kgo.Record) {})
		}
		if asked["out"] != 1 || asked["table"] != 1 || len(asked) != 2 {
			t.Fatalf("limits asked %v, want each topic once", asked)
		}
	})
}

// checkReason fails t unless msg says what was wrong and how to fix it.
func checkReason(t *testing.T, msg string, is error) {
	t.Helper()
	var want []string
	switch is {
	case processor.ErrRecordTooLarge:
		want = []string{`"out"`, "200", "max.message.bytes", "smaller"}
	case processor.ErrNoKeyForCompactedTopic:
		want = []string{`"table"`, "compacted", "key"}
	}
	for _, w := range want {
		if !strings.Contains(msg, w) {
			t.Errorf("%q does not mention %q", msg, w)
		}
	}
}

func BenchmarkProcessWithLimits(b *testing.B) {
	top := topology.New()
	in := topology.Source(top, "in", codec.Bytes())
	topology.To(in, "out", codec.Bytes())
	p, err := engine.New(top, engine.OutputLimits(func(string) (int, bool, error) { return 1 << 20, true, nil }))
	if err != nil {
		b.Fatal(err)
	}
	r := &kgo.Record{Topic: "in", Key: []byte("key"), Value: make([]byte, 100),
		Headers: []kgo.RecordHeader{{Key: "trace", Value: []byte("t1")}}}
	sink := func(*kgo.Record) { _ = p.OutputNode() }
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := p.Process(ctx, r, sink); err != nil {
			b.Fatal(err)
		}
	}
}
