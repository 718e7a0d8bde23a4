package chaos_test

import (
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/eosflow/eosflow/tools/chaos"
	"github.com/eosflow/eosflow/tools/kafkatest"
)

// The outer join under the event-time pipelines' load (eventArgs): about
// 2,200 pairs and 700 lonely records over 50 keys, 600 of those expiring
// while the workers run, through 3 SIGKILLs, a SIGTERM, 2 rebalances and
// 5 % injected aborts on the embedded broker; about 30 s each.

func TestVerifyOuterJoinMemoryExactlyOnce(t *testing.T) {
	t.Parallel()
	res, raw, code := verify(t, append(eventArgs, "--pipeline", "outer-join", "--state", "memory")...)
	checkOuterExactlyOnce(t, res, raw, code, 3, 0)
}

// Under at-least-once a batch's output, its stores' changelog (the
// matched marks, the expired records' deletes) and its input offsets do
// not commit together: a worker killed or failed after some of its
// batch's pairs or expired lonely records reached the output, but before
// its offsets committed, leaves them there, and its successor joins or
// expires the same records again.
func TestVerifyOuterJoinAtLeastOnceControlFails(t *testing.T) {
	t.Parallel()
	res, _, code := verify(t, append(eventArgs, "--pipeline", "outer-join", "--guarantee", "at-least-once")...)
	checkOuterAtLeastOnce(t, res, code, 3)
}

// TestVerifyOuterJoinRealBroker runs the outer join against Apache Kafka
// (EOS_KAFKA_BROKERS, EOS_KAFKA_RESTART_CMD as for TestVerifyRealBroker):
// 20,000 records over 200 keys through 4 kills, a SIGTERM, 2 rebalances,
// 5 % injected aborts and a hard broker restart on pebble state, then the
// at-least-once control under 3 kills and a restart; about 2 minutes.
func TestVerifyOuterJoinRealBroker(t *testing.T) {
	brokers := kafkatest.RealBrokers()
	restart := strings.TrimSpace(os.Getenv(EnvRestartCmd))
	if brokers == nil || restart == "" {
		t.Skipf("set %s and %s (e.g. %q) to run verify against a real cluster",
			kafkatest.EnvBrokers, EnvRestartCmd, "integration/kafka/kafka.sh restart --hard")
	}
	if dl, ok := t.Deadline(); ok && time.Until(dl) < 9*time.Minute {
		t.Fatalf("the real-broker outer join needs up to 8 minutes; run go test with -timeout 10m")
	}
	real := []string{"--brokers", strings.Join(brokers, ","), "--broker-restart-cmd", restart, "--pipeline", "outer-join",
		"--records", "20000", "--keys", "200", "--abort-rate", "0.05"}
	t.Run("pebble state", func(t *testing.T) {
		res, raw, code := verify(t, append(real, "--state", "pebble", "--workers", "3", "--kills", "4", "--broker-restarts", "1",
			"--terms", "1", "--rebalances", "2", "--duration", "4m")...)
		checkOuterExactlyOnce(t, res, raw, code, 4, 1)
		checkRestarts(t, res, maxRestartToFirstCommit)
	})
	t.Run("at-least-once control", func(t *testing.T) {
		res, _, code := verify(t, append(real, "--guarantee", "at-least-once", "--workers", "2", "--kills", "3", "--broker-restarts", "1",
			"--terms", "0", "--rebalances", "0", "--duration", "3m")...)
		checkOuterAtLeastOnce(t, res, code, 3)
	})
}

// checkOuterExactlyOnce asserts a passing outer join run: every pair and
// every lonely record of the seed came out once, lonely records expired
// while the workers ran, nothing else came out or was repeated live, and
// the faults fired and hit open transactions.
func checkOuterExactlyOnce(t *testing.T, res chaos.Result, raw map[string]any, code, kills, brokerRestarts int) {
	t.Helper()
	if code != 0 || !res.Pass {
		t.Fatalf("exit %d, problems %v", code, res.Problems)
	}
	p, l := res.JoinVerdict, res.LonelyVerdict
	if p == nil || l == nil || res.Pipeline != "outer-join" || res.Payments != "" {
		t.Fatalf("pipeline %q, join verdict %v, lonely verdict %v: not an outer join run", res.Pipeline, p, l)
	}
	t.Logf("join verdict: %s; lonely verdict: %s", p, l)
	want := p.PairsExpected + l.LonelyOrders + l.LonelyPayments
	if !p.OK() || !l.OK() || res.RecordsOut != want || res.LiveRead != want || res.LiveDuplicates != 0 {
		t.Errorf("%s; %s; %d output records, live %d (duplicates %d), want %d", p, l, res.RecordsOut, res.LiveRead, res.LiveDuplicates, want)
	}
	if l.LonelyOrders == 0 || l.LonelyPayments == 0 || l.LonelyEarly == 0 || l.LonelySeen != l.LonelyOrders+l.LonelyPayments {
		t.Errorf("lonely verdict %s: the run must see lonely orders and payments, some expiring while the workers run", l)
	}
	checkEventFaults(t, res, raw, kills, brokerRestarts, "pairs_expected", "pair_duplicates", "lonely_orders", "lonely_payments",
		"lonely_early", "lonely_seen", "lonely_missing", "lonely_duplicates", "lonely_joined", "lonely_unexpected")
}

// checkOuterAtLeastOnce asserts that the outer join's at-least-once
// control failed with repeated pairs or lonely records, named in its
// examples, and for no reason but the pair and lonely checks.
func checkOuterAtLeastOnce(t *testing.T, res chaos.Result, code, kills int) {
	t.Helper()
	if code != 1 || res.Pass {
		t.Errorf("exit %d, pass %v: the at-least-once control must fail", code, res.Pass)
	}
	p, l := res.JoinVerdict, res.LonelyVerdict
	if p == nil || l == nil {
		t.Fatalf("pipeline %q: no join or lonely verdict in %+v", res.Pipeline, res)
	}
	t.Logf("join verdict: %s, e.g. %v; lonely verdict: %s, e.g. %v", p, p.PairExamples, l, l.LonelyExamples)
	if p.PairDuplicates+l.LonelyDuplicates == 0 || !(res.Fails(chaos.ProblemPairDuplicates) || res.Fails(chaos.ProblemLonelyDuplicates)) {
		t.Errorf("%s; %s (failed %v): the same chaos under at-least-once must repeat pairs or lonely records", p, l, res.Failed)
	}
	named := func(e string) bool { return strings.Contains(e, " times") }
	if !slices.ContainsFunc(p.PairExamples, named) && !slices.ContainsFunc(l.LonelyExamples, named) {
		t.Errorf("examples %q, %q name no repeat", p.PairExamples, l.LonelyExamples)
	}
	if l.LonelyOrders == 0 || l.LonelyPayments == 0 || l.LonelyEarly == 0 {
		t.Errorf("lonely verdict %s: the control must run through expiries too", l)
	}
	if res.WorkerKills != kills || res.FaultsNotInjected != 0 {
		t.Errorf("kills %d, faults not injected %d: want %d and 0", res.WorkerKills, res.FaultsNotInjected, kills)
	}
	checkFailsOnly(t, res, chaos.ProblemPairDuplicates, chaos.ProblemPairMissing, chaos.ProblemPairUnexpected, chaos.ProblemLonelyDuplicates,
		chaos.ProblemLonelyMissing, chaos.ProblemLonelyJoined, chaos.ProblemLiveDuplicates)
}
