package eos_test

import (
	"testing"
	"time"

	"github.com/eosflow/eosflow/config"
	"github.com/eosflow/eosflow/internal/conformance"
	"github.com/eosflow/eosflow/internal/kafkatest"
	"github.com/eosflow/eosflow/internal/verdict"
	"github.com/eosflow/eosflow/processor"
	"github.com/eosflow/eosflow/topology"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Item 10: an output the broker itself refuses (here: every produce to out
// twice) is attributed to its input record on the redo and goes through
// the sink's policy; retriable failures are untouched.
func TestBrokerRefusedOutputIsAttributed(t *testing.T) {
	for _, g := range []config.Guarantee{config.ExactlyOnce, config.Idempotent} {
		t.Run(string(g), func(t *testing.T) {
			env := kafkatest.Fake(t)
			env.CreateTopics(t, 3, "in", "out", "dlq")
			const n = 2000
			conformance.Seed(t, env, "in", n)
			h := env.Fake.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Topic: "out", Err: kerr.MessageTooLarge, Count: 2})
			cfg := env.Config("app", "a", g)
			cfg.MaxBatchRecords = 500
			top := conformance.Upper("in", "out", nil)
			top.OnError("out", topology.DeadLetter("dlq"))
			x := conformance.Start(t, cfg, top)
			x.WaitCommitted(t, n, 60*time.Second)
			if h.Hits() != 2 {
				t.Fatalf("fault hit %d times, want 2", h.Hits())
			}
			dlq := conformance.Drain(t, env, "dlq", 1)
			if len(dlq) != 1 || !conformance.HasHeaderContaining(dlq[0], processor.HeaderError, "MESSAGE_TOO_LARGE") {
				t.Fatalf("want one dead letter naming MESSAGE_TOO_LARGE, got %d", len(dlq))
			}
			id, _ := verdict.ID(dlq[0].Value)
			out := conformance.Drain(t, env, "out", n-1)
			v := verdict.Judge(n, out)
			s := x.R.Stats()
			if v.Missing != 1 || v.Unknown != 0 || g == config.ExactlyOnce && v.Duplicates != 0 || uint64(v.Duplicates) > s.Redone {
				t.Fatalf("want every record but the dead letter (id %d): %v; stats %+v", id, v, s)
			}
			t.Logf("dead-lettered id %d; verdict %v; stats %+v", id, v, s)
		})
	}
}
