package chaos_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/eosflow/eosflow/tools/chaos"
	"github.com/eosflow/eosflow/tools/kafkatest"
)

// sinkResult is the -o json result of verify --sink.
type sinkResult struct {
	Records          int      `json:"records"`
	Rows             int64    `json:"rows"`
	Missing          int64    `json:"missing"`
	Duplicates       int64    `json:"duplicates"`
	Kills            int      `json:"kills"`
	BrokerRestarts   int      `json:"broker_restarts"`
	PostgresRestarts int      `json:"postgres_restarts"`
	FaultsDuringWork int      `json:"faults_during_work"`
	WorkerFailures   []string `json:"worker_failures"`
	Pass             bool     `json:"pass"`

	NetCuts         int              `json:"net_cuts"`
	Pauses          int              `json:"pauses"`
	CoordinatorCuts int              `json:"coordinator_cuts"`
	NetFaults       []chaos.NetFault `json:"net_faults"`
	Recovery        []chaos.Recovery `json:"recovery"`
}

// verifySink runs `eosctl verify --sink ... -o json` against the database
// in EOS_POSTGRES_URL, skipping t without one.
func verifySink(t *testing.T, args ...string) (sinkResult, int) {
	t.Helper()
	url := os.Getenv("EOS_POSTGRES_URL")
	if url == "" {
		t.Skip("EOS_POSTGRES_URL is not set: run integration/postgres/pg.sh start and export EOS_POSTGRES_URL=$(integration/postgres/pg.sh url)")
	}
	args = append([]string{"verify", "-o", "json", "--postgres-url", url}, args...)
	cmd := exec.Command(eosctl(t), args...)
	cmd.Dir = moduleRoot(t)
	cmd.Env = append(os.Environ(), "EOS_BROKERS=")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	if ee, ok := errors.AsType[*exec.ExitError](err); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	var res sinkResult
	if err := json.Unmarshal(stdout.Bytes(), &res); err != nil {
		t.Fatalf("eosctl %s: exit %d, output is not a result (%v)\nstdout: %s\nstderr: %s", strings.Join(args, " "), code, err, stdout.String(), stderr.String())
	}
	t.Logf("%s: %+v", strings.Join(args[5:], " "), res)
	return res, code
}

// pgRestarts adds database restarts when the server is this test's alone.
func pgRestarts(n string) []string {
	restart := os.Getenv("EOS_POSTGRES_RESTART_CMD")
	if restart == "" || os.Getenv("EOS_POSTGRES_EXCLUSIVE") != "1" {
		return nil
	}
	return []string{"--postgres-restarts", n, "--postgres-restart-cmd", restart}
}

func checkSink(t *testing.T, res sinkResult, code, records, kills int) {
	t.Helper()
	if code != 0 || !res.Pass || res.Missing != 0 || res.Duplicates != 0 || res.Rows != int64(records) {
		t.Errorf("exit %d: %d rows for %d records, %d missing, %d duplicates, worker failures %v; want every record once",
			code, res.Rows, records, res.Missing, res.Duplicates, res.WorkerFailures)
	}
	if res.Kills != kills || res.FaultsDuringWork < kills/2 {
		t.Errorf("%d kills, %d faults while records were missing: want %d kills, most of them during the work", res.Kills, res.FaultsDuringWork, kills)
	}
}

// TestVerifySinkPostgres runs the exactly-once Postgres sink under
// SIGKILLs, SIGTERMs and rebalances on the embedded broker, plus two
// database crashes when the server is the test's alone.
func TestVerifySinkPostgres(t *testing.T) {
	extra := pgRestarts("2")
	res, code := verifySink(t, append([]string{"--sink", "postgres", "--records", "20000", "--workers", "2",
		"--kills", "5", "--terms", "1", "--rebalances", "2", "--broker-restarts", "0", "--duration", "4m"}, extra...)...)
	checkSink(t, res, code, 20000, 5)
	if extra != nil && res.PostgresRestarts != 2 {
		t.Errorf("%d database restarts, want 2", res.PostgresRestarts)
	}
}

// TestVerifySinkPostgresControlFindsDuplicates is the control: Kafka
// offsets committed after the database commit write batches twice under
// the same kills, and verify must say so.
func TestVerifySinkPostgresControlFindsDuplicates(t *testing.T) {
	res, code := verifySink(t, "--sink", "postgres-at-least-once", "--records", "20000", "--workers", "2",
		"--kills", "5", "--terms", "1", "--rebalances", "2", "--broker-restarts", "0", "--duration", "4m")
	if code != 1 || res.Pass || res.Duplicates == 0 {
		t.Errorf("exit %d, pass %v, %d duplicates: the control must fail with duplicates", code, res.Pass, res.Duplicates)
	}
}

// TestVerifySinkPostgresRealBroker is the sink on a real Apache Kafka,
// hard-restarted twice, with database crashes when the server is the
// test's alone.
func TestVerifySinkPostgresRealBroker(t *testing.T) {
	brokers := kafkatest.RealBrokers()
	restart := strings.TrimSpace(os.Getenv(EnvRestartCmd))
	if brokers == nil || restart == "" {
		t.Skipf("set %s and %s (e.g. %q) to run verify --sink against a real cluster",
			kafkatest.EnvBrokers, EnvRestartCmd, "integration/kafka/kafka.sh restart --hard")
	}
	extra := pgRestarts("2")
	res, code := verifySink(t, append([]string{"--sink", "postgres", "--brokers", strings.Join(brokers, ","), "--broker-restart-cmd", restart,
		"--records", "50000", "--workers", "3", "--kills", "6", "--terms", "2", "--rebalances", "2", "--broker-restarts", "2", "--duration", "8m"}, extra...)...)
	checkSink(t, res, code, 50000, 6)
	if res.BrokerRestarts != 2 {
		t.Errorf("%d broker restarts, want 2", res.BrokerRestarts)
	}
}

// TestVerifySinkPostgresNetFaults runs the Postgres sink on the 3-broker
// cluster of integration/kafka/netcluster.sh through one of each network
// cut, a broker paused past the session timeout and a cut of the group's
// coordinator, mixed with kills: every record once, every fault seen in
// the harness's status, and rows written after each.
func TestVerifySinkPostgresNetFaults(t *testing.T) {
	cmd, brokers := netCluster(t, 6*time.Minute)
	res, code := verifySink(t, "--sink", "postgres", "--brokers", brokers, "--net-cmd", cmd, "--records", "15000", "--workers", "2",
		"--kills", "2", "--net-cuts", "3", "--pauses", "1", "--coordinator-cuts", "1", "--cut-for", "6s",
		"--terms", "0", "--rebalances", "0", "--broker-restarts", "0", "--duration", "6m")
	checkSink(t, res, code, 15000, 2)
	if res.NetCuts != 3 || res.Pauses != 1 || res.CoordinatorCuts != 1 {
		t.Errorf("fired %d net cuts, %d pauses, %d coordinator cuts; want 3, 1 and 1", res.NetCuts, res.Pauses, res.CoordinatorCuts)
	}
	checkNetFaults(t, res.NetFaults, res.Recovery, 6*time.Second, 15*time.Second, map[string]int{
		"cut-clients": 1, "cut-peers": 1, "isolate": 1, "pause": 1, "cut-coordinator group": 1})
	if status := harness(t, cmd, "status"); strings.Count(status, "faults: none") != 3 {
		t.Errorf("the cluster is not whole after the run:\n%s", status)
	}
}
