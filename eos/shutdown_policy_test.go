package eos_test

import (
	"sync"
	"testing"
	"time"

	"github.com/eosflow/eosflow/config"
	"github.com/eosflow/eosflow/tools/conformance"
	"github.com/eosflow/eosflow/tools/kafkatest"
	"github.com/eosflow/eosflow/tools/verdict"
	"github.com/eosflow/eosflow/topology"
)

// A shutdown that lands while a record under Skip is failing must neither
// turn the failure into an error nor apply the policy (the failure may be
// the cancellation itself): the records before it commit, Run returns nil,
// and the record is left for the next run, where its policy applies.
func TestFailureDuringShutdownIsLeftForTheNextRun(t *testing.T) {
	env := kafkatest.Fake(t)
	env.CreateTopics(t, 1, "in", "out")
	const n, bad = 1000, 500
	conformance.Seed(t, env, "in", n)
	cfg := env.Config("app", "a", config.ExactlyOnce)
	cfg.CommitInterval = 2 * time.Second // the records before bad share its batch

	reached, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	top := conformance.Upper("in", "out", func(id int) bool {
		if id != bad {
			return false
		}
		// Fail only after Run's context is cancelled, mid-batch.
		once.Do(func() { close(reached) })
		<-release
		return true
	})
	top.OnError("upper", topology.Skip())
	x := conformance.Start(t, cfg, top)
	select {
	case <-reached:
	case <-time.After(60 * time.Second):
		t.Fatalf("record %d never reached the failing node; stats %+v", bad, x.R.Stats())
	}
	x.Stop()
	close(release)
	if err := x.Wait(t, 30*time.Second); err != nil {
		t.Fatalf("a skipped record during shutdown stopped Run with %v; want nil", err)
	}

	s := x.R.Stats()
	if s.Skipped != 0 || s.Aborted != 0 || s.Committed == 0 || s.RecordsIn != bad {
		t.Fatalf("stats %+v: want the %d records before record %d committed, no skip and no abort", s, bad, bad)
	}
	y := conformance.Start(t, cfg, top)
	y.WaitCommitted(t, n-bad, 60*time.Second)
	if s := y.R.Stats(); s.Skipped != 1 {
		t.Fatalf("next run: stats %+v, want record %d skipped there", s, bad)
	}
	want := n - 1
	seen := map[int]int{}
	for _, r := range conformance.Drain(t, env, "out", want) {
		id, ok := verdict.ID(r.Value)
		if !ok {
			t.Fatalf("output %q is not a seeded record", r.Value)
		}
		seen[id]++
	}
	for id := 0; id < n; id++ {
		switch c := seen[id]; {
		case id == bad && c != 0:
			t.Errorf("skipped record %d reached the output %d times", id, c)
		case id != bad && c != 1:
			t.Errorf("record %d committed %d times in the output, want once", id, c)
		}
	}
	if len(seen) != want {
		t.Errorf("output holds %d distinct records, want %d (the input less the skipped one)", len(seen), want)
	}
}
