package main

import (
	"bytes"
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/eosflow/eosflow/config"
	"github.com/eosflow/eosflow/tools/chaos"
	"github.com/eosflow/eosflow/tools/verdict"
)

// The runs of verify itself (binary, worker processes, embedded and real
// brokers) are tested in tools/chaos; these cover the command line.

func TestVerifyUsageErrors(t *testing.T) {
	t.Setenv("EOS_BROKERS", "")
	t.Setenv(envWorkerPassword, "")
	t.Setenv(chaos.EnvNetClusterCmd, "")
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"unknown guarantee", []string{"verify", "--guarantee", "twice"}, "exactly-once"},
		{"abort rate", []string{"verify", "--abort-rate", "2"}, "--abort-rate"},
		{"negative kills", []string{"verify", "--kills", "-1"}, "--kills"},
		{"restart command without brokers", []string{"verify", "--broker-restart-cmd", "true"}, "needs --brokers"},
		{"broker restarts without command", []string{"verify", "--brokers", "127.0.0.1:1", "--broker-restarts", "1"}, "--broker-restart-cmd"},
		{"broker restarts on the embedded broker", []string{"verify", "--broker-restarts", "1"},
			"--brokers $(integration/kafka/kafka.sh bootstrap) --broker-restarts 2 --broker-restart-cmd \"integration/kafka/kafka.sh restart --hard\""},
		{"count broker restarts on the embedded broker", []string{"verify", "--pipeline", "count", "--broker-restarts", "2"}, "needs a real Apache Kafka"},
		{"argument", []string{"verify", "now"}, "unknown command"},
		{"net cuts without the harness", []string{"verify", "--brokers", "127.0.0.1:1", "--broker-restarts", "0", "--net-cuts", "1"},
			"--net-cmd \"EOS_KAFKA_PORT=29800 $PWD/integration/kafka/netcluster.sh\""},
		{"pauses on the embedded broker", []string{"verify", "--net-cmd", "true", "--pauses", "1"}, "netcluster.sh start"},
		{"coordinator cuts without the harness", []string{"verify", "--brokers", "127.0.0.1:1", "--broker-restarts", "0", "--coordinator-cuts", "2"},
			chaos.EnvNetClusterCmd + " may stand for --net-cmd"},
		{"negative pauses", []string{"verify", "--pauses", "-1"}, "--pauses"},
		{"negative cut hold", []string{"verify", "--cut-for", "-1s"}, "--cut-for"},
		{"network faults in a scale run", []string{"verify", "--brokers", "127.0.0.1:1", "--broker-restarts", "0", "--net-cmd", "true",
			"--kills", "0", "--terms", "0", "--rebalances", "0", "--abort-rate", "0", "--scale", "1,2", "--pauses", "1"}, "--pauses"},
		{"worker user on the embedded broker", []string{"verify", "--worker-sasl-user", "w"}, "needs --brokers"},
		{"worker user without SASL", []string{"verify", "--brokers", "127.0.0.1:1", "--worker-sasl-user", "w"}, "SASL mechanism"},
		{"worker user without password", []string{"verify", "--brokers", "127.0.0.1:1", "--sasl-mechanism", "SCRAM-SHA-512",
			"--worker-sasl-user", "w"}, envWorkerPassword},
		{"worker without topics", []string{"verify", "worker", "--app", "a", "--instance", "w"}, "required flag"},
		{"unknown sink", []string{"verify", "--sink", "mysql"}, "--sink"},
		{"sink without a database", []string{"verify", "--sink", "postgres", "--postgres-url", ""}, "--postgres-url"},
		{"database restarts without command", []string{"verify", "--sink", "postgres", "--postgres-url", "postgres://x@127.0.0.1:1/x",
			"--broker-restarts", "0", "--postgres-restarts", "1"}, "--postgres-restart-cmd"},
		{"sink with network faults without the harness", []string{"verify", "--sink", "postgres", "--postgres-url", "postgres://x@127.0.0.1:1/x",
			"--broker-restarts", "0", "--net-cmd", "", "--brokers", "127.0.0.1:1", "--pauses", "1"}, "network-namespace harness"},
		{"sink with network faults on the embedded broker", []string{"verify", "--sink", "postgres", "--postgres-url", "postgres://x@127.0.0.1:1/x",
			"--broker-restarts", "0", "--net-cmd", "true", "--pauses", "1"}, "network-namespace harness"},
		{"sink with a negative hold", []string{"verify", "--sink", "postgres", "--postgres-url", "postgres://x@127.0.0.1:1/x",
			"--broker-restarts", "0", "--cut-for", "-1s"}, "not negative"},
		{"sink with negative network faults", []string{"verify", "--sink", "postgres", "--postgres-url", "postgres://x@127.0.0.1:1/x",
			"--broker-restarts", "0", "--net-cuts", "-1"}, "not negative"},
		{"sink broker restarts on the embedded broker", []string{"verify", "--sink", "postgres", "--postgres-url", "postgres://x@127.0.0.1:1/x",
			"--broker-restarts", "1"}, "--brokers"},
		{"unknown pipeline", []string{"verify", "--pipeline", "sum"}, "--pipeline"},
		{"dedup sink without Redis", []string{"verify", "--sink", "redis-dedup", "--redis-url", ""}, "integration/redis/redis.sh start"},
		{"dedup pipeline without the dedup sink", []string{"verify", "--pipeline", "dedup"}, "--sink redis-dedup"},
		{"dedup mode without the dedup sink", []string{"verify", "--dedup-mode", "before"}, "--sink redis-dedup"},
		{"unknown dedup mode", []string{"verify", "--sink", "redis-dedup", "--redis-url", "redis://127.0.0.1:1/0", "--dedup-mode", "twice"}, "--dedup-mode must be one of"},
		{"dedup control with a mode", []string{"verify", "--sink", "redis-dedup-none", "--redis-url", "redis://127.0.0.1:1/0", "--dedup-mode", "after"}, "control"},
		{"dedup sink with another pipeline", []string{"verify", "--sink", "redis-dedup", "--redis-url", "redis://127.0.0.1:1/0", "--pipeline", "count"}, "drop --pipeline"},
		{"dedup worker without Redis", []string{"verify", "worker", "--app", "a", "--instance", "w", "--in", "i", "--out", "o",
			"--brokers", "127.0.0.1:1", "--pipeline", "dedup", "--redis-url", "", "--dedup-prefix", "p:", "--effects-key", "e"}, "Redis URL"},
		{"unknown state", []string{"verify", "--pipeline", "count", "--state", "rocks"}, "--state"},
		{"state without the count pipeline", []string{"verify", "--state", "pebble"}, "--pipeline count"},
		{"count at most once", []string{"verify", "--pipeline", "count", "--guarantee", "at-most-once"}, "at-most-once"},
		{"unknown grouping", []string{"verify", "--pipeline", "count", "--group-by", "partition"}, "--group-by must be key"},
		{"grouping without the count pipeline", []string{"verify", "--group-by", "value"}, "--pipeline count"},
		{"worker with an unknown grouping", []string{"verify", "worker", "--app", "a", "--instance", "w", "--in", "i", "--out", "o",
			"--brokers", "127.0.0.1:1", "--pipeline", "count", "--group-by", "partition"}, "grouping"},
		{"worker with an unknown pipeline", []string{"verify", "worker", "--app", "a", "--instance", "w", "--in", "i", "--out", "o",
			"--brokers", "127.0.0.1:1", "--pipeline", "sum"}, "pipeline"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			code := run(context.Background(), tc.args, nil, &out, &errb)
			if code != exitUsage {
				t.Fatalf("exit %d, want %d; stderr %s", code, exitUsage, errb.String())
			}
			if !strings.Contains(errb.String(), tc.want) {
				t.Fatalf("stderr %q does not mention %q", errb.String(), tc.want)
			}
		})
	}
}

// On the embedded broker --broker-restarts defaults to 0, so a plain
// `eosctl verify` runs; against --brokers the default stays 1.
func TestVerifyBrokerRestartsDefault(t *testing.T) {
	for _, tc := range []struct {
		name     string
		brokers  bool
		env, arg string
		want     int
	}{
		{"embedded", false, "", "", 0},
		{"embedded, asked for none", false, "", "--broker-restarts=0", 0},
		{"--brokers", true, "", "", 1},
		{"EOS_BROKERS", false, "127.0.0.1:1", "", 1},
		{"--brokers, asked for 3", true, "", "--broker-restarts=3", 3},
		{"--brokers, asked for none", true, "", "--broker-restarts=0", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("EOS_BROKERS", tc.env)
			g := &globals{brokersSet: tc.brokers}
			cmd := newVerifyCmd(g)
			var args []string
			if tc.arg != "" {
				args = []string{tc.arg}
			}
			if err := cmd.Flags().Parse(args); err != nil {
				t.Fatal(err)
			}
			var o chaos.Options
			o.BrokerRestarts, _ = cmd.Flags().GetInt("broker-restarts")
			if err := brokerRestartsDefault(cmd, g, &o); err != nil {
				t.Fatal(err)
			}
			if o.BrokerRestarts != tc.want {
				t.Fatalf("--broker-restarts %d, want %d", o.BrokerRestarts, tc.want)
			}
		})
	}
}

func TestVerifyWorkerIsHidden(t *testing.T) {
	var out, errb bytes.Buffer
	if code := run(context.Background(), []string{"verify", "--help"}, nil, &out, &errb); code != exitOK {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	if !strings.Contains(out.String(), "--broker-restart-cmd") || strings.Contains(out.String(), "Available Commands") {
		t.Fatalf("help should list verify's flags and hide the worker:\n%s", out.String())
	}
	for _, want := range []string{"--pipeline", "--state", "--group-by", "repartition", "count_gaps", "count_repeats", "count_final_mismatch", "changelog_mismatch",
		"--sink redis-dedup", "--dedup-mode", "--redis-url", "effects_missing", "effects_extra_runs", "one per SIGKILL"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("help does not mention %q", want)
		}
	}
}

func TestVerifyTableCounts(t *testing.T) {
	r := chaos.Result{
		Verdict:  verdict.Verdict{RecordsIn: 10, RecordsOut: 12},
		Counts:   &verdict.Counts{CountKeys: 3, CountRepeats: 2, CountFinalMismatch: 1, ChangelogRead: 9},
		Pipeline: "count", State: "pebble", Changelog: "app-counts-changelog", AbortedRecords: -1,
	}
	var b bytes.Buffer
	if err := verifyTable(r).write(&b); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"count (pebble state)", "count gaps", "count repeats", "count final mismatch", "changelog mismatch", "app-counts-changelog"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, b.String())
		}
	}
	if strings.Contains(b.String(), "out of order") {
		t.Errorf("the count table shows the per-record checks it does not make:\n%s", b.String())
	}
}

func TestVerifyTableGroupedCounts(t *testing.T) {
	r := chaos.Result{
		Counts:   &verdict.Counts{CountKeys: 3},
		Pipeline: "count", State: "memory", GroupBy: "value", Repartition: "app-by-value-repartition", AbortedRecords: -1,
	}
	var b bytes.Buffer
	if err := verifyTable(r).write(&b); err != nil {
		t.Fatal(err)
	}
	if want := "count (memory state, by value through app-by-value-repartition)"; !strings.Contains(b.String(), want) {
		t.Errorf("table lacks %q:\n%s", want, b.String())
	}
}

func TestVerifyTable(t *testing.T) {
	r := chaos.Result{
		Verdict:     verdict.Verdict{RecordsIn: 10, RecordsOut: 11, Duplicates: 1},
		WorkerKills: 3, BrokerRestarts: 1, AbortedTransactions: 4, AbortedRecords: -1,
		RestartToFirstCommit: chaos.RestartLatency{Restarts: 3, Count: 3, Median: 800 * time.Millisecond, Max: 1500 * time.Millisecond},
		WorkerCrashes:        1, WorkerFailures: []chaos.WorkerFailure{{Worker: "worker-1", Pid: 42, Exit: 1, Error: "exit status 1: eos: fenced"}},
	}
	var b bytes.Buffer
	if err := verifyTable(r).write(&b); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"records out", "duplicates", "worker kills", "broker restarts", "aborted transactions",
		"worker failures", "worker-1", "eos: fenced", "restart → first commit", "median 800ms, max 1.5s"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, b.String())
		}
	}
	if strings.Contains(b.String(), "aborted records") {
		t.Errorf("aborted records shown though not measured:\n%s", b.String())
	}
}

func TestProgressBarOnlyOnTerminals(t *testing.T) {
	var b bytes.Buffer
	bar := newProgressBar(&b)
	if bar != nil {
		t.Fatal("a progress bar on a buffer")
	}
	bar.update(chaos.Progress{Records: 10, Consumed: 5}) // nil-safe
	bar.clear()
	if b.Len() != 0 {
		t.Fatalf("wrote %q", b.String())
	}
}

// TestVerifyWorkerLogin checks that --worker-sasl-user replaces verify's
// own user in what the workers get, and that its password is passed last
// in their environment, so an inherited EOS_SASL_PASSWORD cannot win.
func TestVerifyWorkerLogin(t *testing.T) {
	g := &globals{}
	cfg := config.Default()
	cfg.TLS = config.TLS{Enabled: true, CAFile: "/ca.pem"}
	cfg.SASL = config.SASL{Mechanism: config.SASLScramSHA512, Username: "admin", Password: "admin-secret"}

	args, env, err := g.workerFlags(cfg, workerLogin{})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(args, "admin") || !slices.Equal(env, []string{"EOS_SASL_PASSWORD=admin-secret"}) {
		t.Fatalf("without a worker user: args %q, env %q; want verify's own login", args, env)
	}

	t.Setenv(envWorkerPassword, "worker-secret")
	args, env, err = g.workerFlags(cfg, workerLogin{user: "worker"})
	if err != nil {
		t.Fatal(err)
	}
	i := slices.Index(args, "--sasl-user")
	if i < 0 || args[i+1] != "worker" || slices.Contains(args, "admin") {
		t.Fatalf("args %q: want --sasl-user worker and no admin", args)
	}
	for _, want := range []string{"--tls", "--tls-ca", "--sasl-mechanism"} {
		if !slices.Contains(args, want) {
			t.Errorf("args %q lack %s", args, want)
		}
	}
	if !slices.Equal(env, []string{"EOS_SASL_PASSWORD=worker-secret"}) {
		t.Fatalf("env %q: want the worker's password only", env)
	}
	if strings.Contains(strings.Join(args, " "), "secret") {
		t.Fatalf("a password reached the workers' flags: %q", args)
	}
}
