package eos_test

import (
	"context"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/eosflow/eosflow/codec"
	"github.com/eosflow/eosflow/config"
	"github.com/eosflow/eosflow/tools/conformance"
	"github.com/eosflow/eosflow/tools/kafkatest"
	"github.com/eosflow/eosflow/topology"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// With adaptive_commit a batch ends once the records at hand are
// processed: a lone record commits long before a commit interval of 30 s
// runs out, under every guarantee, and so does a second one after it.
func TestAdaptiveCommitEndsABatchOnceItsRecordsAreProcessed(t *testing.T) {
	for _, g := range []config.Guarantee{config.ExactlyOnce, config.Idempotent, config.AtLeastOnce, config.AtMostOnce} {
		t.Run(string(g), func(t *testing.T) {
			t.Parallel()
			x, env := startInterval(t, g, 30*time.Second, true)
			conformance.Seed(t, env, "in", 1)
			x.WaitCommitted(t, 1, 10*time.Second)
			conformance.Seed(t, env, "in", 1)
			x.WaitCommitted(t, 2, 10*time.Second)
		})
	}
}

// Without adaptive_commit a record waits for the interval: once a first
// record committed (so the instance is running), a second one is still
// uncommitted halfway through an interval of 4 s, and commits after it.
func TestWithoutAdaptiveCommitARecordWaitsForTheInterval(t *testing.T) {
	x, env := startInterval(t, config.ExactlyOnce, 4*time.Second, false)
	conformance.Seed(t, env, "in", 1)
	x.WaitCommitted(t, 1, 20*time.Second)
	conformance.Seed(t, env, "in", 1)
	time.Sleep(2 * time.Second)
	if st := x.R.Stats(); st.RecordsIn != 1 {
		t.Fatalf("the second record committed within half of a 4 s commit interval without adaptive_commit: %+v", st)
	}
	x.WaitCommitted(t, 2, 20*time.Second)
}

// Under load, records that arrive while a batch runs make the next one:
// adaptive batches take what is at hand instead of committing record by
// record.
func TestAdaptiveCommitBatchesGrowUnderLoad(t *testing.T) {
	env := kafkatest.Fake(t)
	env.CreateTopics(t, 3, "in", "out")
	const n = 20000
	conformance.Seed(t, env, "in", n)
	cfg := env.Config("app", "a", config.ExactlyOnce)
	cfg.AdaptiveCommit = true
	x := conformance.Start(t, cfg, spinning(0))
	x.WaitCommitted(t, n, 120*time.Second)
	conformance.ExactlyOnce(t, env, "out", n)
	st := x.R.Stats()
	if st.Committed*100 > n {
		t.Fatalf("%d batches for a backlog of %d records: adaptive batches should take what is at hand, not a few records each", st.Committed, n)
	}
	t.Logf("%d batches for %d records", st.Committed, n)
}

// startInterval runs the copying pipeline under g at commit interval ci,
// adaptive or not.
func startInterval(t *testing.T, g config.Guarantee, ci time.Duration, adaptive bool) (*conformance.Run, *kafkatest.Env) {
	env := kafkatest.Fake(t)
	env.CreateTopics(t, 1, "in", "out")
	cfg := env.Config("app", "a", g)
	cfg.CommitInterval = ci
	cfg.TransactionTimeout = time.Minute
	cfg.AdaptiveCommit = adaptive
	return conformance.Start(t, cfg, spinning(0)), env
}

// On a real broker a transaction's end takes a few round trips, and the
// client buffers one fetch while it waits: the next batch's first poll
// returns records fetched just after the last one, while those that
// reached the broker later are not fetched until that buffer is drained.
// An adaptive batch that ended with the buffer left those records to the
// batch after next, two ends away, so that on a real Kafka adaptive_commit
// gained nothing over the commit interval. With every EndTxn taking
// endDelay, a record produced at a steady pace is processed, at the
// median, within one end of arriving.
func TestAdaptiveCommitTakesWhatArrivedWhileTheLastBatchEnded(t *testing.T) {
	const endDelay = 200 * time.Millisecond
	env := kafkatest.Fake(t)
	env.CreateTopics(t, 1, "in", "out")
	env.Fake.ControlKey(int16(kmsg.EndTxn), func(kmsg.Request) (kmsg.Response, error, bool) {
		env.Fake.KeepControl()
		env.Fake.SleepControl(func() { time.Sleep(endDelay) })
		return nil, nil, false
	})
	var (
		mu     sync.Mutex
		pickup []time.Duration
	)
	top := topology.New()
	in := topology.Source(top, "in", codec.Bytes())
	timed := topology.MapValues(in, "timed", func(_ context.Context, v []byte) ([]byte, error) {
		if sent, err := strconv.ParseInt(string(v), 10, 64); err == nil {
			mu.Lock()
			pickup = append(pickup, time.Since(time.Unix(0, sent)))
			mu.Unlock()
		}
		return v, nil
	})
	topology.To(timed, "out", codec.Bytes())
	cfg := env.Config("app", "a", config.ExactlyOnce)
	cfg.CommitInterval = 5 * time.Second
	cfg.TransactionTimeout = time.Minute
	cfg.AdaptiveCommit = true
	x := conformance.Start(t, cfg, top)
	conformance.Seed(t, env, "in", 1)
	x.WaitCommitted(t, 1, 20*time.Second)

	cl := env.Client(t, kgo.ProducerLinger(0))
	const n = 300 // 3 s at one record every 10 ms: some 15 batches
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for range n {
		<-tick.C
		cl.Produce(context.Background(), &kgo.Record{Topic: "in", Value: strconv.AppendInt(nil, time.Now().UnixNano(), 10)}, nil)
	}
	x.WaitCommitted(t, n+1, 30*time.Second)
	mu.Lock()
	defer mu.Unlock()
	slices.Sort(pickup)
	med := pickup[len(pickup)/2]
	if med > endDelay {
		t.Fatalf("median time from produce to processing %s with ends of %s: records that arrived while a batch ended waited for the batch after next", med, endDelay)
	}
	t.Logf("median time from produce to processing %s with ends of %s", med, endDelay)
}
