package engine_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/eosflow/eosflow/codec"
	"github.com/eosflow/eosflow/internal/engine"
	"github.com/eosflow/eosflow/processor"
	"github.com/eosflow/eosflow/topology"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// sinks builds in → "out" (topic out) and in → "table" (topic table), both
// sinks under policy.
func sinks(policy topology.ErrorPolicy, opts ...topology.Option) *topology.Topology {
	top := topology.New(opts...)
	in := topology.Source(top, "in", codec.Bytes())
	topology.To(in, "out", codec.Bytes())
	topology.To(in, "table", codec.Bytes())
	top.OnError("out", policy)
	top.OnError("table", policy)
	return top
}

// emitted is one record passed to out, with the node OutputNode named.
type emitted struct {
	rec  *kgo.Record
	node string
}

func collect(p *engine.Engine, got *[]emitted) func(*kgo.Record) {
	return func(r *kgo.Record) { *got = append(*got, emitted{r, p.OutputNode()}) }
}

func describe(got []emitted) string {
	s := make([]string, len(got))
	for i, e := range got {
		s[i] = e.rec.Topic + "<-" + e.node
	}
	return strings.Join(s, ",")
}

func TestReject(t *testing.T) {
	rejected := fmt.Errorf("produce: %w", kerr.MessageTooLarge)
	cases := []struct {
		name    string
		policy  topology.ErrorPolicy
		def     topology.ErrorPolicy // the topology's default
		sink    string
		outcome engine.Outcome
		outputs string
	}{
		{"dead letter", topology.DeadLetter("dlq"), topology.Fail(), "out", engine.DeadLettered, "dlq<-out"},
		{"skip", topology.Skip(), topology.Fail(), "out", engine.Skipped, ""},
		{"fail", topology.Fail(), topology.Skip(), "out", engine.Failed, ""},
		{"retry goes straight to its final policy", topology.Retry(5, time.Hour, topology.Skip()), topology.Fail(), "out", engine.Skipped, ""},
		{"unknown sink takes the default: dead letter", topology.Skip(), topology.DeadLetter("default-dlq"), "nope", engine.DeadLettered, "default-dlq<-nope"},
		{"unknown sink takes the default: fail", topology.Skip(), topology.Fail(), "nope", engine.Failed, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p, err := engine.New(sinks(tc.policy, topology.DefaultErrorPolicy(tc.def)))
			if err != nil {
				t.Fatal(err)
			}
			in := &kgo.Record{Topic: "in", Partition: 2, Offset: 77, Key: []byte("k"), Value: []byte("v"),
				Headers: []kgo.RecordHeader{{Key: "trace", Value: []byte("t1")}}}
			var got []emitted
			start := time.Now()
			outcome, err := p.Reject(in, tc.sink, rejected, collect(p, &got))
			if d := time.Since(start); d > 5*time.Second {
				t.Fatalf("took %s", d)
			}
			if outcome != tc.outcome || (err != nil) != (tc.outcome == engine.Failed) {
				t.Fatalf("outcome %v err %v; want %v", outcome, err, tc.outcome)
			}
			if s := describe(got); s != tc.outputs {
				t.Fatalf("outputs %q, want %q", s, tc.outputs)
			}
			st := p.Take()
			counted := map[engine.Outcome]uint64{engine.DeadLettered: st.DeadLettered, engine.Skipped: st.Skipped, engine.Failed: 1}
			if counted[tc.outcome] != 1 || st.Retries != 0 || st.Processed != 0 {
				t.Fatalf("stats %+v, want one %v", st, tc.outcome)
			}
			if err != nil {
				var re *processor.RecordError
				var ne *topology.NodeError
				if !errors.Is(err, kerr.MessageTooLarge) || !errors.As(err, &re) || re.Topic != "in" || re.Partition != 2 || re.Offset != 77 ||
					!errors.As(err, &ne) || ne.Node != tc.sink {
					t.Fatalf("want the rejection at node %q naming in/2@77, got %v", tc.sink, err)
				}
			}
			if tc.outcome == engine.DeadLettered {
				d := got[0].rec
				if string(d.Value) != "v" || header(d, "trace") != "t1" || header(d, processor.HeaderNode) != tc.sink ||
					header(d, processor.HeaderSourcePartition) != "2" || header(d, processor.HeaderSourceOffset) != "77" ||
					!strings.Contains(header(d, processor.HeaderError), kerr.MessageTooLarge.Message) {
					t.Fatalf("dead letter lacks the original or the reason: %+v", d)
				}
			}
		})
	}
}

func TestOutputNode(t *testing.T) {
	// Two sinks write the same topic, so only OutputNode tells them apart.
	top := topology.New()
	in := topology.Source(top, "in", codec.String())
	topology.To(in, "shared", codec.String(), topology.Named("first"))
	split := topology.FlatMap(in, "split", func(_ context.Context, k []byte, v string) ([]topology.KV[string], error) {
		if v == "bad" {
			return nil, errBoom
		}
		return []topology.KV[string]{{Key: k, Value: v + "1"}, {Key: k, Value: v + "2"}}, nil
	})
	topology.To(split, "shared", codec.String(), topology.Named("second"))
	top.OnError("split", topology.DeadLetter("dlq"))
	p, err := engine.New(top)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ value, want string }{
		{"a", "shared<-first,shared<-second,shared<-second"},
		{"bad", "dlq<-split"}, // a dead letter names the node that failed
		{"b", "shared<-first,shared<-second,shared<-second"},
	} {
		var got []emitted
		if _, err := p.Process(context.Background(), &kgo.Record{Topic: "in", Value: []byte(tc.value)}, collect(p, &got)); err != nil {
			t.Fatal(err)
		}
		if s := describe(got); s != tc.want {
			t.Fatalf("%s: outputs %q, want %q", tc.value, s, tc.want)
		}
	}
}
