package eos_test

import (
	"testing"
	"time"

	"github.com/eosflow/eosflow/config"
	"github.com/eosflow/eosflow/tools/conformance"
	"github.com/eosflow/eosflow/tools/kafkatest"
	"github.com/eosflow/eosflow/tools/verdict"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Every fault below breaks one step of a transaction; the output must still
// hold each input exactly once, and the runner must have noticed.
func TestTransactionFaults(t *testing.T) {
	cases := []struct {
		name  string
		fault kfake.Fault
	}{
		{"EndTxn fails", kfake.Fault{Keys: []kmsg.Key{kmsg.EndTxn}, Err: kerr.UnknownServerError}},
		{"EndTxn times out after committing", kfake.Fault{Keys: []kmsg.Key{kmsg.EndTxn}, Err: kerr.RequestTimedOut}},
		{"Produce rejects a batch", kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Topic: "out", Err: kerr.InvalidRecord}},
		{"TxnOffsetCommit sees a new generation", kfake.Fault{Keys: []kmsg.Key{kmsg.TxnOffsetCommit}, Err: kerr.IllegalGeneration}},
		{"TxnOffsetCommit coordinator moved", kfake.Fault{Keys: []kmsg.Key{kmsg.TxnOffsetCommit}, Err: kerr.NotCoordinator, Count: 3}},
		{"heartbeat starts a rebalance", kfake.Fault{Keys: []kmsg.Key{kmsg.Heartbeat}, Err: kerr.RebalanceInProgress}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			env := kafkatest.Fake(t)
			env.CreateTopics(t, 3, "in", "out")
			const n = 3000
			conformance.Seed(t, env, "in", n)
			h := env.Fake.Fault(tc.fault)
			cfg := env.Config("app", "a", config.ExactlyOnce)
			cfg.MaxBatchRecords = 500
			x := conformance.Start(t, cfg, conformance.Upper("in", "out", nil))
			conformance.Until(t, 60*time.Second, "all records", func() bool { return x.R.Stats().RecordsIn >= n })
			v := conformance.ExactlyOnce(t, env, "out", n)
			s := x.R.Stats()
			if h.Hits() == 0 {
				t.Fatalf("fault never hit; the test proves nothing")
			}
			t.Logf("verdict %v; stats %+v", v, s)
		})
	}
}

// A produce that the broker applies but answers with a timeout is retried:
// the idempotent producer's sequence numbers drop the repeat, a producer
// without idempotence writes it twice. The second half is the control that
// shows the fault really duplicates.
func TestIdempotenceAgainstRetriedProduce(t *testing.T) {
	for _, tc := range []struct {
		g        config.Guarantee
		wantDups bool
	}{
		{config.Idempotent, false},
		{config.AtLeastOnce, true},
	} {
		t.Run(string(tc.g), func(t *testing.T) {
			env := kafkatest.Fake(t)
			env.CreateTopics(t, 3, "in", "out")
			const n = 3000
			conformance.Seed(t, env, "in", n)
			h := env.Fake.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Topic: "out", Err: kerr.RequestTimedOut, Count: 5})
			x := conformance.Start(t, env.Config("app", "a", tc.g), conformance.Upper("in", "out", nil))
			conformance.Until(t, 60*time.Second, "all records", func() bool { return x.R.Stats().RecordsIn >= n })
			v := verdict.Judge(n, conformance.Drain(t, env, "out", n))
			if h.Hits() == 0 {
				t.Fatal("fault never hit")
			}
			if v.Missing != 0 || (v.Duplicates > 0) != tc.wantDups {
				t.Fatalf("%s: %v (want duplicates: %v)", tc.g, v, tc.wantDups)
			}
			t.Logf("%s: %v", tc.g, v)
		})
	}
}
