package chaos_test

import (
	"os"
	"testing"

	"github.com/eosflow/eosflow/tools/chaos"
)

// dedupArgs is the chaos of the dedup-store runs, sized for CI: kills,
// a SIGTERM, a rebalance and injected aborts on the embedded broker, about
// 20 s a run on two cores.
var dedupArgs = []string{"--records", "6000", "--workers", "2", "--kills", "3", "--terms", "1", "--rebalances", "1",
	"--broker-restarts", "0", "--abort-rate", "0.05", "--duration", "3m"}

// verifyDedup runs `eosctl verify --sink sink ... -o json` against the
// Redis in EOS_REDIS_URL, skipping t without one.
func verifyDedup(t *testing.T, sink string, args ...string) (chaos.Result, int) {
	t.Helper()
	url := os.Getenv(chaos.EnvRedisURL)
	if url == "" {
		t.Skipf("%s is not set: run integration/redis/redis.sh start and export %s=$(integration/redis/redis.sh url)", chaos.EnvRedisURL, chaos.EnvRedisURL)
	}
	res, _, code := verify(t, append(append([]string{"--sink", sink, "--redis-url", url}, dedupArgs...), args...)...)
	if res.DedupVerdict == nil {
		t.Fatalf("exit %d: the result has no effects verdict: %+v", code, res)
	}
	t.Logf("effects: %s; injected aborts %d, aborted records %d", res.DedupVerdict, res.InjectedAborts, res.AbortedRecords)
	return res, code
}

// checkDedupChaos asserts that the faults the run is about happened: the
// kills, and aborted transactions whose records were processed again,
// their effects already done.
func checkDedupChaos(t *testing.T, res chaos.Result) {
	t.Helper()
	if res.WorkerKills != 3 || res.FaultsNotInjected != 0 {
		t.Errorf("%d kills, %d faults not injected: want 3 kills and every fault", res.WorkerKills, res.FaultsNotInjected)
	}
	if res.InjectedAborts == 0 || res.AbortedRecords <= 0 {
		t.Errorf("%d injected aborts, %d aborted output records: the run aborted no transaction, so it proves nothing", res.InjectedAborts, res.AbortedRecords)
	}
	if res.DedupVerdict.EffectsBound != res.WorkerKills {
		t.Errorf("effects bound %d, want the kills, %d", res.DedupVerdict.EffectsBound, res.WorkerKills)
	}
	if res.Missing != 0 || res.Duplicates != 0 || res.OutOfOrder != 0 || res.LiveDuplicates != 0 {
		t.Errorf("the Kafka output is not exactly once: %s, %d live duplicates", res.Verdict, res.LiveDuplicates)
	}
}

// TestVerifyDedupMarkAfter: with topology.MarkAfter (the default) no
// effect is lost, and at most one is repeated per SIGKILL, through kills
// and aborted batches whose effects already ran.
func TestVerifyDedupMarkAfter(t *testing.T) {
	res, code := verifyDedup(t, "redis-dedup")
	checkDedupChaos(t, res)
	v := res.DedupVerdict
	if code != 0 || !res.Pass || v.DedupMode != chaos.DedupAfter || v.EffectsMissing != 0 || v.EffectsExtraRuns > int64(res.WorkerKills) {
		t.Errorf("exit %d, pass %v, %s; problems %v: want no effect lost and at most one repeated per kill", code, res.Pass, v, res.Problems)
	}
}

// TestVerifyDedupMarkBefore: with topology.MarkBefore on a store that
// leases, no effect is lost (a pending mark of a killed worker is taken
// over once its lease expired), and at most one is repeated per SIGKILL.
func TestVerifyDedupMarkBefore(t *testing.T) {
	res, code := verifyDedup(t, "redis-dedup", "--dedup-mode", "before")
	checkDedupChaos(t, res)
	v := res.DedupVerdict
	if code != 0 || !res.Pass || v.DedupMode != chaos.DedupBefore || v.EffectsMissing != 0 || v.EffectsExtraRuns > int64(res.WorkerKills) {
		t.Errorf("exit %d, pass %v, %s; problems %v: want no effect lost and at most one repeated per kill", code, res.Pass, v, res.Problems)
	}
}

// TestVerifyDedupControlRepeatsEffects is the control: the same effect
// with no dedup store repeats the effects of every aborted batch, far
// beyond one per kill, and verify must fail on that alone.
func TestVerifyDedupControlRepeatsEffects(t *testing.T) {
	res, code := verifyDedup(t, "redis-dedup-none")
	checkDedupChaos(t, res)
	v := res.DedupVerdict
	if code != 1 || res.Pass || !res.Fails(chaos.ProblemEffectsRepeated) || len(res.Failed) != 1 {
		t.Errorf("exit %d, pass %v, failed %v: the control must fail with repeated effects and nothing else", code, res.Pass, res.Failed)
	}
	if v.DedupMode != chaos.DedupNone || v.EffectsMissing != 0 || v.EffectsExtraRuns <= 10*int64(res.WorkerKills) {
		t.Errorf("%s: want every effect run and far more repeats than the %d kills", v, res.WorkerKills)
	}
}
