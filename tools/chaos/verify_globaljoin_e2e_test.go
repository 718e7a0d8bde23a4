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

// The global join under the event-time pipelines' load (eventArgs): 3,000
// orders over 50 customers, their table updated in committed and aborted
// transactions while the workers run, through 3 SIGKILLs, a SIGTERM, 2
// rebalances and 5 % injected aborts on the embedded broker; about 30 s
// each.

func TestVerifyGlobalJoinMemoryExactlyOnce(t *testing.T) {
	t.Parallel()
	res, raw, code := verify(t, append(eventArgs, "--pipeline", "global-join", "--state", "memory")...)
	checkGlobalExactlyOnce(t, res, raw, code, 3, 0)
}

func TestVerifyGlobalJoinPebbleExactlyOnce(t *testing.T) {
	t.Parallel()
	res, raw, code := verify(t, append(eventArgs, "--pipeline", "global-join", "--state", "pebble")...)
	checkGlobalExactlyOnce(t, res, raw, code, 3, 0)
}

// Under at-least-once a batch's joined orders and its input offsets do
// not commit together: a worker killed or failed after some of its
// batch's orders reached the output, but before its offsets committed,
// leaves them there, and its successor joins the same orders again.
func TestVerifyGlobalJoinAtLeastOnceControlFails(t *testing.T) {
	t.Parallel()
	res, _, code := verify(t, append(eventArgs, "--pipeline", "global-join", "--guarantee", "at-least-once")...)
	checkGlobalAtLeastOnce(t, res, code, 3, 0)
}

// The same join against a copy of the table each worker reads once at
// its start (--table-snapshot): every row it joins was committed, so
// only the probe phase can tell, and it must: late orders produced past
// --table-lag (1 s here, to keep the test short) still join the rows of
// the workers' start. A worker added mid-run starts with some updates,
// so orders join updated rows; no injected abort restarts a worker while
// the probes run. About 15 s.
func TestVerifyGlobalJoinSnapshotControlFails(t *testing.T) {
	t.Parallel()
	res, raw, code := verify(t, "--pipeline", "global-join", "--table-snapshot", "--table-lag", "1s", "--records", "2000", "--keys", "50",
		"--workers", "2", "--kills", "0", "--terms", "0", "--rebalances", "1", "--broker-restarts", "0", "--abort-rate", "0", "--duration", "2m")
	if code != 1 || res.Pass {
		t.Errorf("exit %d, pass %v: the snapshot control must fail", code, res.Pass)
	}
	v := res.GlobalVerdict
	if v == nil {
		t.Fatalf("pipeline %q: no global verdict in %+v", res.Pipeline, res)
	}
	t.Logf("global join verdict: %s, e.g. %v", v, v.GlobalExamples)
	if !res.Fails(chaos.ProblemGlobalStale) || v.GlobalCurrent || v.GlobalStale == 0 || v.GlobalProbeLag < 1 || v.GlobalProbeWaves < 2 {
		t.Errorf("%s (failed %v): late orders produced past the bound must join stale rows", v, res.Failed)
	}
	if v.GlobalLastWaveOut != v.GlobalLastWave || v.GlobalSeen != v.GlobalOrders+v.GlobalProbes {
		t.Errorf("%s: every order and probe must come out", v)
	}
	if !slices.ContainsFunc(v.GlobalExamples, func(e string) bool { return strings.Contains(e, "not its last row") }) {
		t.Errorf("examples %q name no stale probe", v.GlobalExamples)
	}
	if _, ok := raw["global_stale"]; !ok {
		t.Errorf("-o json lacks global_stale")
	}
	if res.WorkersAdded != 1 || res.FaultsNotInjected != 0 || v.GlobalUpdatedJoins == 0 {
		t.Errorf("workers added %d, faults not injected %d, updated joins %d: want 1, 0 and some", res.WorkersAdded, res.FaultsNotInjected, v.GlobalUpdatedJoins)
	}
	checkFailsOnly(t, res, chaos.ProblemGlobalStale)
}

// TestVerifyGlobalJoinRealBroker runs the global join against Apache
// Kafka (EOS_KAFKA_BROKERS, EOS_KAFKA_RESTART_CMD as for
// TestVerifyRealBroker): 20,000 orders over 200 customers through 4
// kills, a SIGTERM, 2 rebalances, 5 % injected aborts and a hard broker
// restart on pebble state, then the at-least-once control under 3 kills
// and a restart; about 3 minutes.
func TestVerifyGlobalJoinRealBroker(t *testing.T) {
	brokers := kafkatest.RealBrokers()
	restart := strings.TrimSpace(os.Getenv(EnvRestartCmd))
	if brokers == nil || restart == "" {
		t.Skipf("set %s and %s (e.g. %q) to run verify against a real cluster",
			kafkatest.EnvBrokers, EnvRestartCmd, "integration/kafka/kafka.sh restart --hard")
	}
	if dl, ok := t.Deadline(); ok && time.Until(dl) < 9*time.Minute {
		t.Fatalf("the real-broker global join needs up to 8 minutes; run go test with -timeout 10m")
	}
	real := []string{"--brokers", strings.Join(brokers, ","), "--broker-restart-cmd", restart, "--pipeline", "global-join",
		"--records", "20000", "--keys", "200", "--abort-rate", "0.05"}
	t.Run("pebble state", func(t *testing.T) {
		res, raw, code := verify(t, append(real, "--state", "pebble", "--workers", "3", "--kills", "4", "--broker-restarts", "1",
			"--terms", "1", "--rebalances", "2", "--duration", "4m")...)
		checkGlobalExactlyOnce(t, res, raw, code, 4, 1)
		checkRestarts(t, res, maxRestartToFirstCommit)
	})
	t.Run("at-least-once control", func(t *testing.T) {
		res, _, code := verify(t, append(real, "--guarantee", "at-least-once", "--workers", "2", "--kills", "3", "--broker-restarts", "1",
			"--terms", "0", "--rebalances", "0", "--duration", "3m")...)
		checkGlobalAtLeastOnce(t, res, code, 3, 1)
	})
}

// checkGlobalExactlyOnce asserts a passing global join run: every order
// came out once with a row its customer committed, some joined rows
// updated while the workers ran, committed and aborted updates happened,
// the last wave of late orders joined their customers' last rows,
// nothing was repeated live, and the faults fired and hit open
// transactions.
func checkGlobalExactlyOnce(t *testing.T, res chaos.Result, raw map[string]any, code, kills, brokerRestarts int) {
	t.Helper()
	if code != 0 || !res.Pass {
		t.Fatalf("exit %d, problems %v", code, res.Problems)
	}
	v := res.GlobalVerdict
	if v == nil || res.Pipeline != "global-join" || res.Table == "" || res.Payments != "" {
		t.Fatalf("pipeline %q, table %q, global verdict %v: not a global join run", res.Pipeline, res.Table, v)
	}
	t.Logf("global join verdict: %s", v)
	want := v.GlobalOrders + v.GlobalProbes
	if !v.OK() || v.GlobalSeen != want || res.RecordsOut != want || res.LiveRead != want || res.LiveDuplicates != 0 {
		t.Errorf("%s; %d output records, live %d (duplicates %d), want %d", v, res.RecordsOut, res.LiveRead, res.LiveDuplicates, want)
	}
	if !v.GlobalCurrent || v.GlobalProbes == 0 || v.GlobalStale != 0 || v.GlobalLastWaveOut != v.GlobalLastWave {
		t.Errorf("%s: late orders must join their customers' last rows", v)
	}
	if v.TableCommits == 0 || v.TableAborts == 0 || v.TableAbortedPresent == 0 || v.GlobalUpdatedJoins == 0 || v.GlobalNoneOrders == 0 || v.GlobalStableOrders == 0 {
		t.Errorf("global verdict %s: the run must update the table, committed and aborted (the aborted records in its log), and join updated rows, unchanged rows and no row", v)
	}
	checkEventFaults(t, res, raw, kills, brokerRestarts, "table_topic", "global_orders", "global_seen", "global_missing", "global_duplicates",
		"global_wrong_row", "global_aborted_row", "global_unexpected", "global_updated_joins", "table_commits", "table_aborts", "table_aborted_present",
		"global_probes", "global_probe_waves", "global_current", "global_stale", "table_lag_bound_s")
}

// checkGlobalAtLeastOnce asserts that the global join's at-least-once
// control failed with repeated orders, named in its examples, and for no
// reason but the order checks, through its faults: kills and
// brokerRestarts.
func checkGlobalAtLeastOnce(t *testing.T, res chaos.Result, code, kills, brokerRestarts int) {
	t.Helper()
	if code != 1 || res.Pass {
		t.Errorf("exit %d, pass %v: the at-least-once control must fail", code, res.Pass)
	}
	v := res.GlobalVerdict
	if v == nil {
		t.Fatalf("pipeline %q: no global verdict in %+v", res.Pipeline, res)
	}
	t.Logf("global join verdict: %s, e.g. %v", v, v.GlobalExamples)
	if v.GlobalDuplicates == 0 || !res.Fails(chaos.ProblemGlobalDuplicates) {
		t.Errorf("%s (failed %v): the same chaos under at-least-once must repeat orders", v, res.Failed)
	}
	if !slices.ContainsFunc(v.GlobalExamples, func(e string) bool { return strings.Contains(e, " times") }) {
		t.Errorf("examples %q name no repeat", v.GlobalExamples)
	}
	if v.TableCommits == 0 || v.TableAborts == 0 || v.TableAbortedPresent == 0 {
		t.Errorf("global verdict %s: the control must run through table updates too, aborted records in the table's log", v)
	}
	if res.WorkerKills != kills || res.BrokerRestarts != brokerRestarts || res.FaultsNotInjected != 0 {
		t.Errorf("kills %d, broker restarts %d, faults not injected %d: want %d, %d and 0",
			res.WorkerKills, res.BrokerRestarts, res.FaultsNotInjected, kills, brokerRestarts)
	}
	checkFailsOnly(t, res, chaos.ProblemGlobalDuplicates, chaos.ProblemGlobalMissing, chaos.ProblemLiveDuplicates)
}
