package eos_test

import (
	"testing"
	"time"

	"github.com/eosflow/eosflow/config"
	"github.com/eosflow/eosflow/tools/conformance"
	"github.com/eosflow/eosflow/tools/kafkatest"
)

// With adaptive_commit a batch ends once the records at hand are
// processed: a lone record commits long before a commit interval of 30 s
// runs out, under every guarantee that commits. Without it, the same
// record waits for the interval.
func TestAdaptiveCommitEndsABatchOnceItsRecordsAreProcessed(t *testing.T) {
	for _, g := range []config.Guarantee{config.ExactlyOnce, config.AtLeastOnce} {
		t.Run(string(g), func(t *testing.T) {
			t.Parallel()
			x, env := startLong(t, g, true)
			conformance.Seed(t, env, "in", 1)
			x.WaitCommitted(t, 1, 10*time.Second)
			conformance.Seed(t, env, "in", 1) // a second lone record: a batch of its own
			x.WaitCommitted(t, 2, 10*time.Second)
			if st := x.R.Stats(); st.Committed < 2 {
				t.Fatalf("%d batches committed for 2 records a batch apart", st.Committed)
			}
		})
	}
	t.Run("interval", func(t *testing.T) {
		t.Parallel()
		x, env := startLong(t, config.ExactlyOnce, false)
		conformance.Seed(t, env, "in", 1)
		time.Sleep(3 * time.Second)
		if st := x.R.Stats(); st.RecordsIn != 0 {
			t.Fatalf("a record committed %s into a 30 s commit interval without adaptive_commit: %+v", 3*time.Second, st)
		}
	})
}

// Under load, records that arrive while a batch runs make the next one:
// adaptive batches grow with the backlog instead of committing record by
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

// startLong runs the copying pipeline under g with a commit interval of
// 30 s, adaptive or not.
func startLong(t *testing.T, g config.Guarantee, adaptive bool) (*conformance.Run, *kafkatest.Env) {
	env := kafkatest.Fake(t)
	env.CreateTopics(t, 1, "in", "out")
	cfg := env.Config("app", "a", g)
	cfg.CommitInterval = 30 * time.Second
	cfg.TransactionTimeout = time.Minute
	cfg.AdaptiveCommit = adaptive
	return conformance.Start(t, cfg, spinning(0)), env
}
