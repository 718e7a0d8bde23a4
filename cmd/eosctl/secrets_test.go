package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eosflow/eosflow/config"
	"github.com/eosflow/eosflow/state"
	"github.com/eosflow/eosflow/tools/conformance"
	"github.com/eosflow/eosflow/tools/kafkatest"
	"github.com/eosflow/eosflow/tools/leak"
)

// envRunEosctl makes the test binary run as eosctl (see TestMain), so a
// test can run eosctl as a process of its own and capture everything it
// writes, including what goes to the process's stdout and stderr directly
// rather than through the command's streams.
const envRunEosctl = "EOSCTL_TEST_RUN_AS_EOSCTL"

// TestMain runs the tests, or, when envRunEosctl is set, eosctl itself
// with the process's arguments.
func TestMain(m *testing.M) {
	if os.Getenv(envRunEosctl) == "1" {
		os.Exit(run(context.Background(), os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

// eosctlProcess runs eosctl as a child process with args and env (on top
// of an environment without EOS_* variables) and returns its stdout,
// stderr and exit code.
func eosctlProcess(t *testing.T, env []string, args ...string) (string, string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], args...)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "EOS_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	// Under -race a process that exits 0 sleeps a second first, for late
	// reports from other goroutines; eosctl's have ended by then.
	cmd.Env = append(append(cmd.Env, envRunEosctl+"=1", "GORACE="+strings.TrimSpace(os.Getenv("GORACE")+" atexit_sleep_ms=0")), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("eosctl %v: %v", args, err)
	}
	return stdout.String(), stderr.String(), code
}

// The SASL password is never printed by eosctl: every command that talks
// to the cluster, run as a process with the password given through
// EOS_SASL_PASSWORD, --sasl-password, the EOS_* variables alone or a
// --config file, in table and JSON output, with the commands that fail
// (wrong password, unknown topic, unreachable broker, bad config files,
// usage errors), keeps it out of its stdout and stderr. The demo runs the
// runtime with its debug log on stderr.
func TestPasswordNeverLeaksFromEosctl(t *testing.T) {
	pw, wrong := leak.Secret(t), leak.Secret(t)
	cluster, addr := newCluster(t, kfake.BrokerConfigs(devConfigs), kfake.EnableSASL(), kfake.EnableACLs(),
		kfake.Superuser(config.SASLScramSHA256, "admin", pw), kfake.User(config.SASLScramSHA256, "app", pw))
	env := &kafkatest.Env{Brokers: []string{addr}, Fake: cluster, SASL: config.SASL{Mechanism: config.SASLScramSHA256, Username: "admin", Password: pw}}

	// Something for every command to show: a stateful app with a
	// changelog, a group and committed offsets, and an open transaction.
	env.CreateTopics(t, 2, "in", "out")
	conformance.Seed(t, env, "in", 50)
	cfg := env.Config("orders", "worker-0", config.ExactlyOnce)
	cfg.StateDir = t.TempDir()
	x := conformance.Start(t, cfg, conformance.CountTopology("in", "out", state.Memory()))
	x.WaitCommitted(t, 50, 60*time.Second)
	x.Stop()
	if err := x.Wait(t, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	// A timeout longer than the test, so the transaction stays open.
	open := env.Client(t, kgo.TransactionalID("orders:open"), kgo.TransactionTimeout(10*time.Minute))
	if err := open.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := open.ProduceSync(context.Background(), &kgo.Record{Topic: "out", Value: []byte("pending")}).FirstErr(); err != nil {
		t.Fatal(err)
	}

	dir := t.TempDir()
	writeFile := func(name, body string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	yaml := func(password, extra string) string {
		return fmt.Sprintf("brokers: [%q]\napp_id: orders\ninstance_id: worker-0\nstate_dir: %q\nsasl:\n  mechanism: SCRAM-SHA-256\n  username: admin\n  password: %q\n%s",
			addr, cfg.StateDir, password, extra)
	}
	good := writeFile("pipeline.yaml", yaml(pw, ""))

	saslFlags := []string{"--brokers", addr, "--sasl-mechanism", config.SASLScramSHA256, "--sasl-user", "admin"}
	credentials := []struct {
		name    string
		env     []string
		args    []string
		formats []string
	}{
		{"EOS_SASL_PASSWORD", []string{"EOS_SASL_PASSWORD=" + pw, "EOS_APP_ID=orders"}, saslFlags, []string{"table", "json"}},
		{"--sasl-password", []string{"EOS_APP_ID=orders"}, append(append([]string{}, saslFlags...), "--sasl-password", pw), []string{"json"}},
		{"EOS_* only", []string{"EOS_BROKERS=" + addr, "EOS_SASL_MECHANISM=" + config.SASLScramSHA256, "EOS_SASL_USERNAME=admin", "EOS_SASL_PASSWORD=" + pw, "EOS_APP_ID=orders"}, nil, []string{"json"}},
		{"--config", nil, []string{"--config", good}, []string{"table", "json"}},
	}
	commands := []struct {
		args []string
		want string // in stdout when it works
	}{
		{[]string{"topic", "list"}, "in"},
		{[]string{"topic", "describe", "in", "out"}, "out"},
		{[]string{"group", "lag", "orders"}, "in"},
		{[]string{"txn", "list"}, "orders:open"},
		{[]string{"txn", "describe", "orders:open"}, "orders:open"},
		{[]string{"txn", "hanging", "--topic", "out"}, ""},
		{[]string{"txn", "producers", "--topic", "out"}, "out"},
		{[]string{"app", "describe", "orders"}, "orders-counts-changelog"},
		{[]string{"doctor", "--principal", "User:app", "--input-topic", "in", "--output-topic", "out", "--store", "counts"}, "acl"},
		{[]string{"doctor", "--acls", "--principal", "User:app", "--input-topic", "in", "--output-topic", "out", "--store", "counts"}, "kafka-acls.sh"},
	}
	ran := 0
	for _, c := range credentials {
		for _, cmd := range commands {
			for _, format := range c.formats {
				args := append(append(append([]string{}, c.args...), "-o", format), cmd.args...)
				what := fmt.Sprintf("%s, %s, -o %s", c.name, strings.Join(cmd.args, " "), format)
				stdout, stderr, code := eosctlProcess(t, c.env, args...)
				ran++
				if code != exitOK && code != exitFailure || !strings.Contains(stdout, cmd.want) ||
					strings.Contains(stderr, "authentication failed") || strings.Contains(stderr, "do not answer") {
					t.Errorf("%s: exit %d, want its output (with %q) after logging in:\nstdout: %s\nstderr: %s",
						what, code, cmd.want, leak.Mask(stdout, pw), leak.Mask(stderr, pw))
				}
				if format == "json" && !json.Valid([]byte(stdout)) {
					t.Errorf("%s: stdout is not JSON: %s", what, leak.Mask(stdout, pw))
				}
				leak.Check(t, what+": stdout", stdout, pw)
				checkStream(t, what+": stderr", stderr, pw)
			}
		}
	}

	// Commands that change the cluster, and the runtime's own debug log
	// through the demo.
	for _, tc := range []struct {
		name string
		env  []string
		args []string
		want string // in stdout
	}{
		{"topic create", []string{"EOS_SASL_PASSWORD=" + pw}, append(append([]string{}, saslFlags...), "topic", "create", "scratch", "--partitions", "1"), "scratch"},
		{"topic delete", []string{"EOS_SASL_PASSWORD=" + pw}, append(append([]string{}, saslFlags...), "topic", "delete", "scratch", "--yes"), "scratch"},
		{"demo -v", []string{"EOS_SASL_PASSWORD=" + pw, "EOS_LOG_LEVEL=debug"},
			append(append([]string{}, saslFlags...), "demo", "-v", "--records", "400", "--restarts", "1"), "VERDICT: PASS"},
	} {
		stdout, stderr, code := eosctlProcess(t, tc.env, tc.args...)
		if code != exitOK || !strings.Contains(stdout, tc.want) {
			t.Errorf("%s: exit %d, want %q in:\nstdout: %s\nstderr: %s", tc.name, code, tc.want, leak.Mask(stdout, pw), leak.Mask(stderr, pw))
		}
		leak.Check(t, tc.name+": stdout", stdout, pw)
		if tc.name == "demo -v" {
			if !strings.Contains(stderr, "DEBUG") || !strings.Contains(stderr, "starting") {
				t.Errorf("demo -v logged no runtime debug lines on stderr: %s", leak.Mask(stderr, pw))
			}
			leak.Check(t, tc.name+": its debug log", stderr, pw)
		} else {
			checkStream(t, tc.name+": stderr", stderr, pw)
		}
	}

	// Failures: each must fail, saying so on stderr, without the password
	// it was given (the right one or a wrong one).
	for _, tc := range []struct {
		name string
		env  []string
		args []string
		code int
		want string // in stderr
	}{
		{"wrong password in EOS_SASL_PASSWORD", []string{"EOS_SASL_PASSWORD=" + wrong}, append(append([]string{}, saslFlags...), "--timeout", "3s", "-o", "json", "txn", "list"), exitFailure, "--sasl"},
		{"wrong password in --config", nil, []string{"--config", writeFile("wrong.yaml", yaml(wrong, "")), "--timeout", "3s", "-o", "json", "topic", "list"}, exitFailure, "sasl"},
		{"wrong password, doctor", nil, []string{"--config", writeFile("wrong-doctor.yaml", yaml(wrong, "")), "--timeout", "3s", "doctor"}, exitFailure, "sasl"},
		{"unknown topic", []string{"EOS_SASL_PASSWORD=" + pw}, append(append([]string{}, saslFlags...), "-o", "json", "topic", "describe", "nope"), exitFailure, "nope"},
		{"unknown group", nil, []string{"--config", good, "app", "describe", "nosuchapp"}, exitFailure, "nosuchapp"},
		{"unreachable broker", []string{"EOS_SASL_PASSWORD=" + pw}, []string{"--brokers", "127.0.0.1:1", "--sasl-mechanism", config.SASLScramSHA256, "--sasl-user", "admin", "--timeout", "2s", "txn", "list"}, exitFailure, "127.0.0.1:1"},
		{"config that does not parse", nil, []string{"--config", writeFile("bad.yaml", yaml(pw, "commit_interval: soon\n")), "doctor"}, exitFailure, "commit_interval"},
		{"config with the password misspelt", nil, []string{"--config", writeFile("typo.yaml", strings.Replace(yaml(pw, ""), "password:", "pasword:", 1)), "doctor"}, exitFailure, "pasword"},
		{"config with the password as a list", nil, []string{"--config", writeFile("list.yaml", strings.Replace(yaml(pw, ""), "password: \""+pw+"\"", "password: [\""+pw+"\"]", 1)), "topic", "list"}, exitFailure, "sasl.password"},
		{"config with an unknown mechanism", nil, []string{"--config", writeFile("mech.yaml", strings.Replace(yaml(pw, ""), "SCRAM-SHA-256", "SCRAM-SHA-1", 1)), "topic", "list"}, exitFailure, "SCRAM-SHA-1"},
		{"config failing validation, doctor", nil, []string{"--config", writeFile("invalid.yaml", yaml(pw, "commit_interval: 20s\ntransaction_timeout: 10s\n")), "-o", "json", "doctor"}, exitFailure, ""},
		{"unknown flag", []string{"EOS_SASL_PASSWORD=" + pw}, []string{"--sasl-password", pw, "topic", "list", "--bogus"}, exitUsage, "--bogus"},
		{"bad --timeout", nil, []string{"--sasl-password", pw, "--timeout", "-1s", "topic", "list"}, exitUsage, "--timeout"},
	} {
		stdout, stderr, code := eosctlProcess(t, tc.env, tc.args...)
		if code != tc.code || !strings.Contains(stderr+stdout, tc.want) {
			t.Errorf("%s: exit %d, want %d and %q in:\nstdout: %s\nstderr: %s", tc.name, code, tc.code, tc.want, leak.Mask(stdout, pw, wrong), leak.Mask(stderr, pw, wrong))
		}
		leak.Check(t, tc.name+": stdout and stderr", stdout+stderr, pw, wrong)
	}

	// --help lists the flags with their defaults, not with the values
	// given.
	stdout, stderr, _ := eosctlProcess(t, []string{"EOS_SASL_PASSWORD=" + pw}, "--sasl-password", pw, "topic", "list", "--help")
	if !strings.Contains(stdout, "--sasl-password") {
		t.Errorf("--help lists no --sasl-password: %s", leak.Mask(stdout, pw))
	}
	leak.Check(t, "--help", stdout+stderr, pw)

	// Negative control: an output that does hold the password, because
	// it was given as a topic name, is caught by the same capture and
	// check.
	_, stderr, _ = eosctlProcess(t, []string{"EOS_SASL_PASSWORD=" + pw}, append(append([]string{}, saslFlags...), "topic", "describe", pw)...)
	if leak.Find(stderr, pw) == nil {
		t.Errorf("the check misses the password in the error of `topic describe <password>`: %s", stderr)
	}
	t.Logf("%d command runs checked", ran)
}

// checkStream is leak.Check for a stream that may rightly be empty.
func checkStream(t *testing.T, what, out string, secrets ...string) {
	t.Helper()
	if out != "" {
		leak.Check(t, what, out, secrets...)
	}
}
