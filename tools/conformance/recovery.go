package conformance

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/eosflow/eosflow/codec"
	"github.com/eosflow/eosflow/config"
	"github.com/eosflow/eosflow/processor"
	"github.com/eosflow/eosflow/tools/kafkatest"
	"github.com/eosflow/eosflow/tools/verdict"
	"github.com/eosflow/eosflow/topology"
	"github.com/twmb/franz-go/pkg/kgo"
)

// SlowUpper is Upper with a pause per record, and a longer one for the
// record with id slowID.
func SlowUpper(in, out string, per time.Duration, slowID int, slowFor time.Duration) *topology.Topology {
	top := topology.New()
	src := topology.Source(top, in, codec.Bytes(), topology.Named("in"))
	up := topology.MapValues(src, "upper", func(_ context.Context, v []byte) ([]byte, error) {
		d := per
		if id, _ := verdict.ID(v); id == slowID {
			d = slowFor
		}
		time.Sleep(d)
		return bytes.ToUpper(v), nil
	})
	topology.To(up, out, codec.Bytes(), topology.Named("out"))
	return top
}

// SlowTransformCommitsInSmallBatches: 2,000 records at 2 ms each under a
// 2 s transaction timeout. The first poll returns them all (4 s of work);
// the batch must end on time as records are processed, so every record
// commits exactly once and the instance is never fenced.
func SlowTransformCommitsInSmallBatches(t *testing.T, env *kafkatest.Env) {
	const n = 2000
	in, out := seededPair(t, env, 1, n)
	cfg := env.Config(env.Name("app"), "a", config.ExactlyOnce)
	cfg.TransactionTimeout = 2 * time.Second
	x := Start(t, cfg, SlowUpper(in, out, 2*time.Millisecond, -1, 0))
	x.WaitCommitted(t, n, 120*time.Second)
	ExactlyOnce(t, env, out, n)
	if s := x.R.Stats(); s.Committed < 3 {
		t.Fatalf("%d records in %d transactions: the batches were not cut", n, s.Committed)
	}
}

// bloat is Upper, except that record id big becomes 64 KiB larger.
func bloat(in, out string, big int, policy topology.ErrorPolicy) *topology.Topology {
	top := topology.New()
	src := topology.Source(top, in, codec.Bytes(), topology.Named("in"))
	up := topology.MapValues(src, "upper", func(_ context.Context, v []byte) ([]byte, error) {
		if id, _ := verdict.ID(v); id == big {
			return append(bytes.ToUpper(v), make([]byte, 64<<10)...), nil
		}
		return bytes.ToUpper(v), nil
	})
	topology.To(up, out, codec.Bytes(), topology.Named("out"))
	top.OnError("out", policy)
	return top
}

// OversizedOutputGoesThroughPolicy: an output larger than its topic's
// max.message.bytes goes through the sink's error policy, under
// exactly-once and idempotent. DeadLetter: the input lands in the DLQ with
// the reason and everything else commits once, with no abort and no
// rebuild. Fail: Run stops naming the input record, the output topic and
// the limit.
func OversizedOutputGoesThroughPolicy(t *testing.T, env *kafkatest.Env) {
	for _, g := range []config.Guarantee{config.ExactlyOnce, config.Idempotent} {
		t.Run(string(g)+"/dead-letter", func(t *testing.T) {
			in, out, dlq := limitedTopics(t, env, 3)
			const n, big = 2000, 1234
			Seed(t, env, in, n)
			x := Start(t, env.Config(env.Name("app"), "a", g), bloat(in, out, big, topology.DeadLetter(dlq)))
			x.WaitCommitted(t, n, 60*time.Second)
			v := verdict.Judge(n, Drain(t, env, out, n-1))
			if v.Missing != 1 || v.Duplicates != 0 || v.Unknown != 0 {
				t.Fatalf("want every record but %d once: %v", big, v)
			}
			dl := Drain(t, env, dlq, 1)
			if len(dl) != 1 || !HasHeaderContaining(dl[0], processor.HeaderError, "max.message.bytes") {
				t.Fatalf("want one dead letter naming max.message.bytes, got %d", len(dl))
			}
			if s := x.R.Stats(); s.Aborted != 0 || s.Rebuilds != 0 || s.DeadLettered != 1 {
				t.Fatalf("the oversized output should be caught before it is produced: %+v", s)
			}
		})
		t.Run(string(g)+"/fail", func(t *testing.T) {
			in, out, _ := limitedTopics(t, env, 1)
			Seed(t, env, in, 100)
			x := Start(t, env.Config(env.Name("app"), "a", g), bloat(in, out, 42, topology.Fail()))
			err := x.Wait(t, 60*time.Second)
			var re *processor.RecordError
			if !errors.As(err, &re) || re.Offset != 42 || !errors.Is(err, processor.ErrRecordTooLarge) {
				t.Fatalf("want a RecordError for offset 42 wrapping ErrRecordTooLarge, got %v", err)
			}
			for _, want := range []string{in + "/0@42", out, "16384"} {
				if !strings.Contains(err.Error(), want) {
					t.Fatalf("error does not name %q: %v", want, err)
				}
			}
		})
	}
}

// limitedTopics makes in and dlq, and out with max.message.bytes 16384.
func limitedTopics(t *testing.T, env *kafkatest.Env, partitions int32) (in, out, dlq string) {
	t.Helper()
	tp := topics(t, env, partitions, "in", "dlq")
	in, dlq, out = tp[0], tp[1], env.Name("out")
	limit := "16384"
	env.CreateTopicsWith(t, partitions, map[string]*string{"max.message.bytes": &limit}, out)
	return in, out, dlq
}

// HasHeaderContaining reports whether r has header key with sub in its value.
func HasHeaderContaining(r *kgo.Record, key, sub string) bool {
	for _, h := range r.Headers {
		if h.Key == key && strings.Contains(string(h.Value), sub) {
			return true
		}
	}
	return false
}
