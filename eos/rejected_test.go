package eos_test

import (
	"context"
	"testing"
	"time"

	"github.com/eosflow/eosflow/config"
	"github.com/eosflow/eosflow/eos"
	"github.com/eosflow/eosflow/processor"
	"github.com/eosflow/eosflow/tools/conformance"
	"github.com/eosflow/eosflow/tools/kafkatest"
	"github.com/eosflow/eosflow/tools/verdict"
	"github.com/eosflow/eosflow/topology"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// An output the broker itself refuses (here: every produce request to out
// that carries one oversized record, as a broker whose limit the runtime
// could not read would) is attributed to its input record on the redo and
// goes through the sink's policy; the records that shared its batches are
// redone untouched.
func TestBrokerRefusedOutputIsAttributed(t *testing.T) {
	for _, tc := range []struct {
		g      config.Guarantee
		traced bool // tracing wraps each output's context in its span's
	}{{config.ExactlyOnce, false}, {config.Idempotent, false}, {config.ExactlyOnce, true}} {
		g, name := tc.g, string(tc.g)
		if tc.traced {
			name += "-traced"
		}
		t.Run(name, func(t *testing.T) {
			env := kafkatest.Fake(t)
			env.CreateTopics(t, 3, "in", "out", "dlq")
			const n, big = 2000, 200_000
			conformance.Seed(t, env, "in", n)
			poison := verdict.Value(n, big)
			if err := env.Client(t).ProduceSync(context.Background(), &kgo.Record{Topic: "in", Key: []byte("poison"), Value: poison}).FirstErr(); err != nil {
				t.Fatal(err)
			}
			details, err := kadm.NewClient(env.Client(t)).ListTopics(context.Background(), "out")
			if err != nil {
				t.Fatal(err)
			}
			outID := details["out"].ID
			h := env.Fake.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Topic: "out", Err: kerr.MessageTooLarge, Count: -1,
				When: func(req kmsg.Request) bool { return producesAtLeast(req, "out", outID, big) }})
			cfg := env.Config("app", "a", g)
			cfg.MaxBatchRecords = 500
			top := conformance.Upper("in", "out", nil)
			top.OnError("out", topology.DeadLetter("dlq"))
			// Uncompressed, a request's size shows whether it carries
			// the oversized record.
			opts := []eos.Option{eos.ClientOpts(kgo.ProducerBatchCompression(kgo.NoCompression()))}
			if tc.traced {
				tp := sdktrace.NewTracerProvider()
				t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
				opts = append(opts, eos.Tracing(tp, nil))
			}
			x := conformance.Start(t, cfg, top, opts...)
			x.WaitCommitted(t, n+1, 60*time.Second)
			if h.Hits() == 0 {
				t.Fatal("the broker never refused the oversized output")
			}
			dlq := conformance.Drain(t, env, "dlq", 1)
			if len(dlq) != 1 || !conformance.HasHeaderContaining(dlq[0], processor.HeaderError, "MESSAGE_TOO_LARGE") {
				t.Fatalf("want one dead letter naming MESSAGE_TOO_LARGE, got %d", len(dlq))
			}
			if id, _ := verdict.ID(dlq[0].Value); id != n {
				t.Fatalf("dead-lettered record %d, want the oversized one (%d)", id, n)
			}
			out := conformance.Drain(t, env, "out", n)
			v := verdict.Judge(n+1, out)
			s := x.R.Stats()
			if v.Missing != 1 || v.Unknown != 0 || g == config.ExactlyOnce && v.Duplicates != 0 || uint64(v.Duplicates) > s.Redone {
				t.Fatalf("want every record but the dead letter (id %d): %v; stats %+v", n, v, s)
			}
			t.Logf("refusals %d; verdict %v; stats %+v", h.Hits(), v, s)
		})
	}
}

// producesAtLeast reports whether a produce request carries at least size
// bytes of records for one partition of topic (named by ID in newer
// requests).
func producesAtLeast(req kmsg.Request, topic string, id [16]byte, size int) bool {
	pr, ok := req.(*kmsg.ProduceRequest)
	if !ok {
		return false
	}
	for _, t := range pr.Topics {
		if t.Topic != topic && t.TopicID != id {
			continue
		}
		for _, p := range t.Partitions {
			if len(p.Records) >= size {
				return true
			}
		}
	}
	return false
}
