package chaos_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/eosflow/eosflow/tools/chaos"
)

// eventArgs is the fault load of the event-time pipelines' runs on the
// embedded broker: 3,000 records over 50 keys (for the windowed count
// about 700 windows of 4 records, for the join about 2,000 pairs), 2
// workers, 3 SIGKILLs, a SIGTERM, 2 rebalances and 5 % injected aborts. No
// broker restart, for the reason chaosArgs gives.
var eventArgs = []string{"--records", "3000", "--keys", "50", "--workers", "2", "--kills", "3",
	"--broker-restarts", "0", "--terms", "1", "--rebalances", "2", "--abort-rate", "0.05", "--duration", "2m"}

func TestVerifyWindowedMemoryExactlyOnce(t *testing.T) {
	t.Parallel()
	res, raw, code := verify(t, append(eventArgs, "--pipeline", "windowed", "--state", "memory")...)
	checkWindowsExactlyOnce(t, res, raw, code, 3, 0)
}

func TestVerifyWindowedPebbleExactlyOnce(t *testing.T) {
	t.Parallel()
	res, raw, code := verify(t, append(eventArgs, "--pipeline", "windowed", "--state", "pebble")...)
	checkWindowsExactlyOnce(t, res, raw, code, 3, 0)
}

func TestVerifyJoinMemoryExactlyOnce(t *testing.T) {
	t.Parallel()
	res, raw, code := verify(t, append(eventArgs, "--pipeline", "join", "--state", "memory")...)
	checkPairsExactlyOnce(t, res, raw, code, 3, 0)
}

func TestVerifyJoinPebbleExactlyOnce(t *testing.T) {
	t.Parallel()
	res, raw, code := verify(t, append(eventArgs, "--pipeline", "join", "--state", "pebble")...)
	checkPairsExactlyOnce(t, res, raw, code, 3, 0)
}

// Under at-least-once a batch's final results, its store changes and its
// input offsets do not commit together: a worker killed or failed after
// some of its batch's results reached the output, but before its offsets
// committed, leaves them there, and its successor, from the state the
// changelog holds, closes the same windows again.
func TestVerifyWindowedAtLeastOnceControlFails(t *testing.T) {
	t.Parallel()
	res, _, code := verify(t, append(eventArgs, "--pipeline", "windowed", "--guarantee", "at-least-once")...)
	checkWindowsAtLeastOnce(t, res, code, 3)
}

// Under at-least-once a batch's joined pairs, its stores' changelog and
// its input offsets do not commit together: a worker killed or failed
// after some of its batch's pairs reached the output, but before its
// offsets committed, leaves them there, and its successor, reading the
// same orders and payments again, joins them again with what its stores
// hold.
func TestVerifyJoinAtLeastOnceControlFails(t *testing.T) {
	t.Parallel()
	res, _, code := verify(t, append(eventArgs, "--pipeline", "join", "--guarantee", "at-least-once")...)
	checkPairsAtLeastOnce(t, res, code, 3)
}

// checkPairsAtLeastOnce asserts that the join at-least-once control failed
// with repeated pairs, named in its examples, and for no reason but the
// pair checks.
func checkPairsAtLeastOnce(t *testing.T, res chaos.Result, code, kills int) {
	t.Helper()
	if code != 1 || res.Pass {
		t.Errorf("exit %d, pass %v: the at-least-once control must fail", code, res.Pass)
	}
	v := res.JoinVerdict
	if v == nil || res.Pipeline != "join" {
		t.Fatalf("pipeline %q, no join verdict in %+v", res.Pipeline, res)
	}
	t.Logf("join verdict: %s; e.g. %v", v, v.PairExamples)
	if v.PairDuplicates == 0 || !res.Fails(chaos.ProblemPairDuplicates) {
		t.Errorf("join verdict %s (failed %v): the same chaos under at-least-once must repeat pairs", v, res.Failed)
	}
	if !slices.ContainsFunc(v.PairExamples, func(e string) bool { return strings.Contains(e, " joined ") && strings.Contains(e, " times") }) {
		t.Errorf("pair examples %q name no repeated pair", v.PairExamples)
	}
	if res.WorkerKills != kills || res.FaultsNotInjected != 0 {
		t.Errorf("kills %d, faults not injected %d: want %d and 0", res.WorkerKills, res.FaultsNotInjected, kills)
	}
	checkFailsOnly(t, res, chaos.ProblemPairDuplicates, chaos.ProblemPairMissing, chaos.ProblemPairUnexpected, chaos.ProblemLiveDuplicates)
}

// checkWindowsAtLeastOnce asserts that the windowed at-least-once control
// failed with repeated final results, and for no reason but the window
// checks.
func checkWindowsAtLeastOnce(t *testing.T, res chaos.Result, code, kills int) {
	t.Helper()
	if code != 1 || res.Pass {
		t.Errorf("exit %d, pass %v: the at-least-once control must fail", code, res.Pass)
	}
	v := res.WindowVerdict
	if v == nil {
		t.Fatalf("no window verdict in %+v", res)
	}
	t.Logf("window verdict: %s; e.g. %v", v, v.WindowExamples)
	if v.WindowDuplicates == 0 || !res.Fails(chaos.ProblemWindowDuplicates) {
		t.Errorf("window verdict %s (failed %v): the same chaos under at-least-once must repeat final results", v, res.Failed)
	}
	if res.WorkerKills != kills || res.FaultsNotInjected != 0 {
		t.Errorf("kills %d, faults not injected %d: want %d and 0", res.WorkerKills, res.FaultsNotInjected, kills)
	}
	checkFailsOnly(t, res, chaos.ProblemWindowDuplicates, chaos.ProblemWindowWrongCount, chaos.ProblemWindowMissing,
		chaos.ProblemWindowUnexpected, chaos.ProblemLiveDuplicates)
}

// checkWindowsExactlyOnce asserts a passing windowed run: every window the
// seed closes came out once with its count, nothing else came out, the
// seed held late records, nothing was repeated live, and the faults fired
// and hit open transactions.
func checkWindowsExactlyOnce(t *testing.T, res chaos.Result, raw map[string]any, code, kills, brokerRestarts int) {
	t.Helper()
	if code != 0 || !res.Pass {
		t.Fatalf("exit %d, problems %v", code, res.Problems)
	}
	v := res.WindowVerdict
	if v == nil || res.Pipeline != "windowed" || res.Counts != nil || res.JoinVerdict != nil {
		t.Fatalf("pipeline %q, window verdict %v: not a windowed run", res.Pipeline, v)
	}
	t.Logf("window verdict: %s", v)
	if !v.OK() || v.WindowsExpected == 0 || res.RecordsOut != v.WindowsExpected || res.LiveDuplicates != 0 || res.LiveRead != v.WindowsExpected {
		t.Errorf("window verdict %s, %d output records, live %d (duplicates %d)", v, res.RecordsOut, res.LiveRead, res.LiveDuplicates)
	}
	if v.LateRecords == 0 {
		t.Errorf("the seed has no late record: the run does not exercise lateness")
	}
	checkEventFaults(t, res, raw, kills, brokerRestarts, "window_missing", "window_duplicates", "window_wrong_count",
		"window_unexpected", "windows_expected", "late_records")
}

// checkPairsExactlyOnce asserts a passing join run: every pair of the seed
// came out once, nothing else came out or was repeated live, and the
// faults fired and hit open transactions.
func checkPairsExactlyOnce(t *testing.T, res chaos.Result, raw map[string]any, code, kills, brokerRestarts int) {
	t.Helper()
	if code != 0 || !res.Pass {
		t.Fatalf("exit %d, problems %v", code, res.Problems)
	}
	v := res.JoinVerdict
	if v == nil || res.Pipeline != "join" || res.Counts != nil || res.WindowVerdict != nil || res.Payments == "" {
		t.Fatalf("pipeline %q, join verdict %v, payments topic %q: not a join run", res.Pipeline, v, res.Payments)
	}
	t.Logf("join verdict: %s", v)
	if !v.OK() || v.PairsExpected == 0 || res.RecordsOut != v.PairsExpected || res.LiveDuplicates != 0 || res.LiveRead != v.PairsExpected {
		t.Errorf("join verdict %s, %d output records, live %d (duplicates %d)", v, res.RecordsOut, res.LiveRead, res.LiveDuplicates)
	}
	checkEventFaults(t, res, raw, kills, brokerRestarts, "pair_missing", "pair_duplicates", "pair_unexpected", "pairs_expected", "payments_topic")
}

// checkEventFaults asserts that the planned faults fired and hit open
// transactions, that -o json has the pipeline's fields, and that the
// workers' state went with the run.
func checkEventFaults(t *testing.T, res chaos.Result, raw map[string]any, kills, brokerRestarts int, fields ...string) {
	t.Helper()
	if res.WorkerKills != kills || res.BrokerRestarts != brokerRestarts || res.FaultsNotInjected != 0 ||
		res.WorkerTerms == 0 || res.WorkersAdded == 0 || res.WorkersRemoved == 0 {
		t.Errorf("kills %d (want %d), broker restarts %d (want %d), terms %d, added %d, removed %d, faults not injected %d",
			res.WorkerKills, kills, res.BrokerRestarts, brokerRestarts, res.WorkerTerms, res.WorkersAdded, res.WorkersRemoved, res.FaultsNotInjected)
	}
	if res.AbortedRecords <= 0 {
		t.Errorf("no aborted records in the output log: the faults missed every open transaction")
	}
	for _, k := range append([]string{"pipeline", "state"}, fields...) {
		if _, ok := raw[k]; !ok {
			t.Errorf("-o json lacks %q", k)
		}
	}
	if entries, err := os.ReadDir(filepath.Join(res.LogDir, "state")); err == nil {
		t.Errorf("the workers' state directory is still there with %d entries", len(entries))
	}
}

// realEventRuns is TestVerifyRealBroker's part for the event-time
// pipelines: 20,000 records over 200 keys through 4 worker kills, a
// SIGTERM, 2 rebalances, 5 % injected aborts and a hard broker restart,
// windowed on pebble state and joined on memory state (about 1.5 minutes
// each); with EnvVerifyFull, then the windowed and the join
// at-least-once controls, each under 3 kills and a broker restart (about
// 1 minute each; CI runs the embedded broker's). real holds --brokers and
// --broker-restart-cmd.
func realEventRuns(t *testing.T, real []string) {
	load := append(real, "--records", "20000", "--keys", "200", "--workers", "3", "--kills", "4", "--broker-restarts", "1",
		"--terms", "1", "--rebalances", "2", "--abort-rate", "0.05", "--duration", "4m")
	t.Run("windowed with pebble state", func(t *testing.T) {
		res, raw, code := verify(t, append(load, "--pipeline", "windowed", "--state", "pebble")...)
		checkWindowsExactlyOnce(t, res, raw, code, 4, 1)
		checkRestarts(t, res, maxRestartToFirstCommit)
	})
	t.Run("join with memory state", func(t *testing.T) {
		res, raw, code := verify(t, append(load, "--pipeline", "join", "--state", "memory")...)
		checkPairsExactlyOnce(t, res, raw, code, 4, 1)
		checkRestarts(t, res, maxRestartToFirstCommit)
	})
	if os.Getenv(EnvVerifyFull) == "" {
		return
	}
	t.Run("windowed at-least-once control", func(t *testing.T) {
		res, _, code := verify(t, append(real, "--pipeline", "windowed", "--guarantee", "at-least-once", "--records", "20000", "--keys", "200",
			"--workers", "2", "--kills", "3", "--broker-restarts", "1", "--terms", "0", "--rebalances", "0", "--abort-rate", "0.05", "--duration", "3m")...)
		checkWindowsAtLeastOnce(t, res, code, 3)
	})
	t.Run("join at-least-once control", func(t *testing.T) {
		res, _, code := verify(t, append(real, "--pipeline", "join", "--guarantee", "at-least-once", "--records", "20000", "--keys", "200",
			"--workers", "2", "--kills", "3", "--broker-restarts", "1", "--terms", "0", "--rebalances", "0", "--abort-rate", "0.05", "--duration", "3m")...)
		checkPairsAtLeastOnce(t, res, code, 3)
	})
}
