package integration

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/eosflow/eosflow/config"
	"github.com/eosflow/eosflow/tools/chaos"
)

// EnvScaleFull selects the full-length form of TestManyInstances: each
// step runs a minute once settled, with twice the input rate.
const EnvScaleFull = "EOS_SCALE_FULL"

// rebalanceBound is the longest a healthy scale step may take, from its
// processes starting or stopping until every partition commits again.
// Healthy steps took 6 to 20 seconds on a 2-core machine shared with
// other clusters (load average 14 to 25); the bound stays under the 45 seconds a consumer-protocol
// group keeps a departed static member's partitions when the member does
// not leave for good (group.consumer.session.timeout.ms), so a scale-down
// that forgets to leave fails here.
const rebalanceBound = 40 * time.Second

// Many instances: the counting pipeline on 24 partitions of the 3-broker
// cluster, in worker processes of two sessions each (workers: 2) started
// and stopped in waves, 1 → 6 → 2 processes, while the input arrives at a
// steady rate; once under the classic group protocol (static membership,
// cooperative-sticky) and once under KIP-848's consumer protocol. Each
// step must settle — every partition assigned to exactly that step's
// members, then committing again — within rebalanceBound, and the output
// must hold every key's counts 1, 2, … n once and in order, with the
// changelog ending at n. The steps' times and pauses are logged.
func TestManyInstances(t *testing.T) {
	env, _ := clusterEnv(t)
	exe := eosctlBinary(t)
	full := os.Getenv(EnvScaleFull) != ""
	dwell, rate := 5*time.Second, 1000
	if full {
		dwell, rate = time.Minute, 2000
	}
	for _, protocol := range []config.GroupProtocol{config.GroupProtocolClassic, config.GroupProtocolConsumer} {
		t.Run(string(protocol), func(t *testing.T) {
			o := chaos.Options{
				Exe: exe, Brokers: env.Brokers, Base: config.Default(),
				Pipeline: chaos.PipelineCount, Partitions: 24, Keys: 1000,
				Scale: []int{1, 6, 2}, ProcessWorkers: 2, GroupProtocol: protocol,
				InputRate: rate, Records: 10_000_000, ScaleDwell: dwell, SettleTimeout: 2 * time.Minute,
				Duration: 15 * time.Minute, LogDir: t.TempDir(),
				Events: func(line string) { t.Log(line) },
			}
			start := time.Now()
			res, err := chaos.Run(context.Background(), o)
			if err != nil {
				t.Fatalf("the run could not be carried out: %v", err)
			}
			t.Logf("%s: %d records in %s, %d worker starts, %d aborted records hidden from read_committed",
				protocol, res.RecordsIn, time.Since(start).Round(time.Second), res.WorkerStarts, res.AbortedRecords)
			for i, s := range res.Steps {
				t.Logf("%s step %d: %s", protocol, i+1, s)
			}
			if !res.Pass {
				t.Fatalf("failed %v: %v", res.Failed, res.Problems)
			}
			if res.Counts == nil || !res.Counts.OK() || !res.Verdict.OK() || res.LiveDuplicates != 0 || res.RecordsIn == 0 {
				t.Fatalf("verdict %v, counts %v, live duplicates %d: want every key counted once, in order", res.Verdict, res.Counts, res.LiveDuplicates)
			}
			if len(res.Steps) != 3 {
				t.Fatalf("%d steps began, want 3", len(res.Steps))
			}
			for i, s := range res.Steps {
				want := []int{1, 6, 2}[i]
				if !s.Settled || s.Processes != want || s.Members != 2*want || s.Partitions != 24 || s.Committing != 24 {
					t.Errorf("step %d: %+v; want %d processes, %d members, all 24 partitions committing", i+1, s, want, 2*want)
				}
				if s.Rebalance > rebalanceBound {
					t.Errorf("step %d took %s to commit on every partition again; a healthy one takes well under %s", i+1, s.Rebalance, rebalanceBound)
				}
			}
			if res.GroupProtocolSeen != string(protocol) || res.ProcessWorkers != 2 {
				t.Errorf("the group ran the %q protocol with %d sessions per process; want %q and 2", res.GroupProtocolSeen, res.ProcessWorkers, protocol)
			}
		})
	}
}
