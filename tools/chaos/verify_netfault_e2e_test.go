package chaos_test

import (
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/eosflow/eosflow/tools/chaos"
)

// netStatusWord is the word the harness's status shows for each action.
var netStatusWord = map[string]string{
	"cut-clients": "cut-from-clients", "cut-peers": "cut-from-peers", "isolate": "isolated", "pause": "paused",
	"cut-coordinator txn": "cut-from-clients", "cut-coordinator group": "cut-from-clients",
}

// TestVerifyNetFaults runs verify on the 3-broker cluster of
// integration/kafka/netcluster.sh through network faults mixed with
// kills: 20,000 records, 5 kills, 3 network cuts (one each of
// cut-clients, cut-peers and isolate), 3 broker pauses past the session
// and transaction timeouts and 2 coordinator cuts (the transaction and
// the group coordinator), exactly once, no worker stopping on its own.
// Every fault must have shown in the harness's status and the group must
// have progressed after each. As root, start the cluster with
// `EOS_KAFKA_PORT=29800 integration/kafka/netcluster.sh start`, then run
// with EOS_KAFKA_NETCLUSTER_CMD="EOS_KAFKA_PORT=29800 $PWD/integration/kafka/netcluster.sh"
// and -timeout 10m (about 6 minutes on a 2-core machine).
func TestVerifyNetFaults(t *testing.T) {
	cmd, brokers := netCluster(t, 8*time.Minute)
	begin := time.Now()
	res, _, code := verify(t, "--brokers", brokers, "--net-cmd", cmd, "--records", "20000", "--workers", "3",
		"--kills", "5", "--net-cuts", "3", "--pauses", "3", "--coordinator-cuts", "2",
		"--terms", "0", "--rebalances", "0", "--broker-restarts", "0", "--duration", "7m")
	took := time.Since(begin)
	if code != 0 || !res.Pass {
		t.Fatalf("exit %d, problems %v", code, res.Problems)
	}
	checkExactlyOnce(t, res, 20000, 5, 0)
	if res.WorkerCrashes != 0 || len(res.WorkerFailures) != 0 {
		t.Errorf("%d workers stopped on their own: %+v", res.WorkerCrashes, res.WorkerFailures)
	}
	if res.NetCuts != 3 || res.Pauses != 3 || res.CoordinatorCuts != 2 {
		t.Errorf("fired %d net cuts, %d pauses, %d coordinator cuts; want 3, 3 and 2", res.NetCuts, res.Pauses, res.CoordinatorCuts)
	}
	checkNetFaults(t, res.NetFaults, res.Recovery, 12*time.Second, 15*time.Second, map[string]int{
		"cut-clients": 1, "cut-peers": 1, "isolate": 1, "pause": 3, "cut-coordinator txn": 1, "cut-coordinator group": 1})
	if took > 8*time.Minute {
		t.Errorf("the run took %s, more than the 8 minutes it must fit in", took.Round(time.Second))
	}
	status := harness(t, cmd, "status")
	if strings.Count(status, "faults: none") != 3 {
		t.Errorf("the cluster is not whole after the run:\n%s", status)
	}
}

// checkNetFaults asserts that every network fault showed in the status,
// held at least its hold (cuts) or pause, was followed by progress, and
// that each action ran as often as want says.
func checkNetFaults(t *testing.T, fs []chaos.NetFault, recovery []chaos.Recovery, cutFor, pauseFor time.Duration, want map[string]int) {
	t.Helper()
	actions := map[string]int{}
	for _, f := range fs {
		actions[f.Action]++
		hold := cutFor
		if f.Action == "pause" {
			hold = pauseFor
		}
		switch {
		case !f.Fired:
			t.Errorf("%s on broker %d did not fire: %s", f.Action, f.Node, f.Error)
		case !strings.Contains(f.Status, "faults: ") || !strings.Contains(f.Status, netStatusWord[f.Action]):
			t.Errorf("%s on broker %d: the status before it was undone is %q", f.Action, f.Node, f.Status)
		case time.Duration(f.HeldMs)*time.Millisecond < hold:
			t.Errorf("%s on broker %d held %dms, less than %s", f.Action, f.Node, f.HeldMs, hold)
		case f.RecoveryMs < 0:
			t.Errorf("%s on broker %d: no recovery measured", f.Action, f.Node)
		}
		t.Logf("%s on broker %d %s: held %dms, %d committed meanwhile, progress %dms after", f.Action, f.Node, f.Key, f.HeldMs, f.ConsumedDuring, f.RecoveryMs)
	}
	for action, n := range want {
		if actions[action] != n {
			t.Errorf("%s ran %d times, want %d", action, actions[action], n)
		}
	}
	if len(actions) != len(want) || len(recovery) != len(want) {
		t.Errorf("actions %v and recoveries %+v, want the actions %v", actions, recovery, want)
	}
}

// netCluster is the harness named by EOS_KAFKA_NETCLUSTER_CMD and its
// bootstrap list, for a test that takes up to need (skipped without the
// harness, failed without the time); every broker is made whole again
// when t ends.
func netCluster(t *testing.T, need time.Duration) (cmd, brokers string) {
	t.Helper()
	cmd = strings.TrimSpace(os.Getenv(chaos.EnvNetClusterCmd))
	if cmd == "" {
		t.Skipf("set %s to the network-namespace harness, e.g. %q, after starting it", chaos.EnvNetClusterCmd,
			"EOS_KAFKA_PORT=29800 $PWD/integration/kafka/netcluster.sh")
	}
	if dl, ok := t.Deadline(); ok && time.Until(dl) < need+time.Minute {
		t.Fatalf("this network-fault verify needs up to %s; run go test with a -timeout that leaves %s", need, need+time.Minute)
	}
	brokers = harness(t, cmd, "bootstrap")
	wholeAfter(t, cmd)
	return cmd, brokers
}

// wholeAfter heals and resumes every broker when t ends: whatever becomes
// of a run (a timeout, a failure, a panic), it leaves no broker cut or
// SIGSTOPped behind for the next test.
func wholeAfter(t *testing.T, cmd string) {
	t.Cleanup(func() {
		for _, arg := range []string{"heal", "resume"} {
			if out, err := exec.Command("bash", "-c", cmd+" "+arg).CombinedOutput(); err != nil {
				t.Errorf("cleanup: %s %s: %v\n%s", cmd, arg, err, out)
			}
		}
	})
}

// harness runs the network-namespace harness with arg and returns its
// output.
func harness(t *testing.T, cmd, arg string) string {
	t.Helper()
	out, err := exec.Command("bash", "-c", cmd+" "+arg).Output()
	if err != nil {
		t.Fatalf("%s %s: %v", cmd, arg, err)
	}
	return strings.TrimSpace(string(out))
}
