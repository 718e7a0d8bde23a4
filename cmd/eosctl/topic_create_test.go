package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/eosflow/eosflow/eos"
)

// createJSON runs `topic create` with -o json and returns its rows, the
// stderr and the exit code.
func createJSON(t *testing.T, addr string, args ...string) ([]createdTopicJSON, string, int) {
	t.Helper()
	out, errOut, code := runCLI(t, nil, append([]string{"--brokers", addr, "-o", "json", "topic", "create"}, args...)...)
	var got []createdTopicJSON
	if err := json.Unmarshal([]byte(out), &got); err != nil && code != exitUsage {
		t.Fatalf("not JSON: %v\n%s\nstderr %s", err, out, errOut)
	}
	return got, errOut, code
}

func TestTopicCreate(t *testing.T) {
	_, addr := newCluster(t)

	out, errOut, code := runCLI(t, nil, "--brokers", addr, "topic", "create", "orders")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if got := squeeze(out); got != "TOPIC PARTITIONS REPLICAS CONFIGS RESULT\norders 3 1 - created" {
		t.Errorf("want orders with the default 3 partitions and the broker's replication factor 1:\n%s", out)
	}

	got, errOut, code := createJSON(t, addr, "invoices", "invoices-dlq", "invoices",
		"--partitions", "2", "--replication-factor", "1",
		"--topic-config", "retention.ms=1000", "--topic-config", "cleanup.policy=compact,delete")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	wantCfg := map[string]string{"retention.ms": "1000", "cleanup.policy": "compact,delete"}
	if len(got) != 2 {
		t.Fatalf("want one row per distinct topic, got %+v", got)
	}
	for i, name := range []string{"invoices", "invoices-dlq"} {
		r := got[i]
		if r.Topic != name || r.Result != resultCreated || r.Partitions != 2 || r.ReplicationFactor != 1 || r.Error != "" ||
			fmt.Sprint(r.Configs) != fmt.Sprint(wantCfg) {
			t.Errorf("row %d: %+v", i, r)
		}
	}

	details := topicsOn(t, addr)
	for name, parts := range map[string]int{"orders": 3, "invoices": 2, "invoices-dlq": 2} {
		if n := len(details[name].Partitions); n != parts {
			t.Errorf("%s has %d partitions, want %d", name, n, parts)
		}
	}
	rcs, err := newAdmin(t, addr).DescribeTopicConfigs(context.Background(), "invoices")
	if err != nil {
		t.Fatal(err)
	}
	rc, _ := rcs.On("invoices", nil)
	for _, c := range rc.Configs {
		if want, ok := wantCfg[c.Key]; ok && c.Source == kmsg.ConfigSourceDynamicTopicConfig {
			if c.Value == nil || *c.Value != want {
				t.Errorf("%s = %v, want %s", c.Key, c.Value, want)
			}
			delete(wantCfg, c.Key)
		}
	}
	if len(wantCfg) > 0 {
		t.Errorf("configs not set on the topic: %v", wantCfg)
	}
}

func TestTopicCreateExisting(t *testing.T) {
	_, addr := newCluster(t, kfake.SeedTopics(5, "orders"))

	// Without --if-not-exists the existing topic is an error naming it;
	// the new one is still created.
	got, errOut, code := createJSON(t, addr, "orders", "payments")
	if code != exitFailure {
		t.Fatalf("exit %d, want %d: %s", code, exitFailure, errOut)
	}
	for _, want := range []string{`topic "orders" already exists`, "--if-not-exists"} {
		if !strings.Contains(errOut, want) {
			t.Errorf("stderr lacks %q: %s", want, errOut)
		}
	}
	if strings.Contains(errOut, "payments") {
		t.Errorf("stderr blames payments, which was created: %s", errOut)
	}
	if len(got) != 2 || got[0].Result != resultFailed || got[0].Error != errAlreadyExists || got[0].Partitions != 5 ||
		got[1].Topic != "payments" || got[1].Result != resultCreated {
		t.Errorf("rows: %+v", got)
	}
	if _, ok := topicsOn(t, addr)["payments"]; !ok {
		t.Error("payments was not created")
	}

	// With it, existing topics are left as they are and reported with
	// what they have, not what was asked for.
	out, errOut, code := runCLI(t, nil, "--brokers", addr, "topic", "create", "orders", "payments", "refunds", "--if-not-exists", "--partitions", "1")
	if code != exitOK {
		t.Fatalf("--if-not-exists: exit %d: %s", code, errOut)
	}
	want := []string{
		"TOPIC PARTITIONS REPLICAS CONFIGS RESULT",
		"orders 5 1 - exists, left unchanged",
		"payments 3 1 - exists, left unchanged",
		"refunds 1 1 - created",
	}
	if got := squeeze(out); got != strings.Join(want, "\n") {
		t.Errorf("table:\n%s\nwant:\n%s", got, strings.Join(want, "\n"))
	}
	if n := len(topicsOn(t, addr)["orders"].Partitions); n != 5 {
		t.Errorf("orders changed to %d partitions", n)
	}
}

func TestTopicCreateBrokerRefuses(t *testing.T) {
	_, addr := newCluster(t)
	got, errOut, code := createJSON(t, addr, "orders", "--replication-factor", "3")
	if code != exitFailure {
		t.Fatalf("exit %d, want %d: %s", code, exitFailure, errOut)
	}
	for _, want := range []string{`"orders"`, "INVALID_REPLICATION_FACTOR", "--replication-factor"} {
		if !strings.Contains(errOut, want) {
			t.Errorf("stderr lacks %q: %s", want, errOut)
		}
	}
	if len(got) != 1 || got[0].Result != resultFailed || !strings.Contains(got[0].Error, "INVALID_REPLICATION_FACTOR") {
		t.Errorf("rows: %+v", got)
	}
	if _, ok := topicsOn(t, addr)["orders"]; ok {
		t.Error("orders was created")
	}
}

// The topic flag is --topic-config because --config stays the pipeline's
// config file, which create needs for the cluster's address and security.
func TestTopicCreateWithPipelineConfig(t *testing.T) {
	_, addr := newCluster(t)
	cfg := filepath.Join(t.TempDir(), "p.yaml")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf("brokers: [%q]\n", addr)), 0o600); err != nil {
		t.Fatal(err)
	}
	_, errOut, code := runCLI(t, nil, "--config", cfg, "topic", "create", "orders", "--topic-config", "retention.ms=1000")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if _, ok := topicsOn(t, addr)["orders"]; !ok {
		t.Error("orders was not created on the --config file's brokers")
	}
}

func TestTopicCreateUsage(t *testing.T) {
	for _, args := range [][]string{
		{},
		{"my topic"},
		{"orders", ""},
		{"orders", "--partitions", "0"},
		{"orders", "--partitions", "-2"},
		{"orders", "--partitions", "many"},
		{"orders", "--replication-factor", "0"},
		{"orders", "--replication-factor", "-3"},
		{"orders", "--replication-factor", "40000"},
		{"orders", "--topic-config", "retention.ms"},
		{"orders", "--topic-config", "=1000"},
		{"orders", "--topic-config", "retention.ms=1", "--topic-config", "retention.ms=2"},
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			// No broker is contacted: the command line is wrong.
			_, errOut, code := runCLI(t, nil, append([]string{"--brokers", "127.0.0.1:1", "topic", "create"}, args...)...)
			if code != exitUsage || !strings.Contains(errOut, "--help") {
				t.Errorf("exit %d, want %d; stderr %s", code, exitUsage, errOut)
			}
		})
	}
}

func TestTopicCreateUnreachable(t *testing.T) {
	_, errOut, code := runCLI(t, nil, "--brokers", "127.0.0.1:1", "topic", "create", "orders")
	if code != exitFailure || !strings.Contains(errOut, "check --brokers") {
		t.Errorf("exit %d, stderr %s", code, errOut)
	}
}

// A pipeline that finds topics missing names the command that creates
// them; run as printed, it must create exactly those topics on the
// pipeline's brokers.
func TestMissingTopicsErrorCommandCreatesThem(t *testing.T) {
	for _, tc := range []struct {
		name       string
		topics     []string
		brokers    bool // the error carries the brokers; else EOS_BROKERS is used
		wantPrefix string
	}{
		{"two with brokers", []string{"invoices", "orders-dlq"}, true, "eos: topics invoices, orders-dlq do not exist; create them with: eosctl topic create invoices orders-dlq --brokers 127.0.0.1:"},
		{"one from EOS_BROKERS", []string{"invoices"}, false, "eos: topic invoices does not exist; create it with: eosctl topic create invoices"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, addr := newCluster(t, kfake.SeedTopics(1, "orders"))
			me := &eos.MissingTopicsError{Topics: tc.topics}
			if tc.brokers {
				me.Brokers = []string{addr}
				t.Setenv("EOS_BROKERS", "127.0.0.1:1") // must not be what the command uses
			} else {
				t.Setenv("EOS_BROKERS", addr)
			}
			err := error(me)
			if !errors.Is(err, eos.ErrMissingTopics) {
				t.Fatalf("%v does not match ErrMissingTopics", err)
			}
			msg := err.Error()
			if !strings.HasPrefix(msg, tc.wantPrefix) {
				t.Errorf("message:\n%s\nwant it to start with:\n%s", msg, tc.wantPrefix)
			}
			_, command, ok := strings.Cut(msg, " with: ")
			args := strings.Fields(command)
			if !ok || len(args) < 2 || args[0] != "eosctl" {
				t.Fatalf("message does not end with the eosctl command: %s", msg)
			}
			if _, errOut, code := runCLI(t, nil, args[1:]...); code != exitOK {
				t.Fatalf("%s: exit %d: %s", command, code, errOut)
			}
			details := topicsOn(t, addr)
			for _, name := range tc.topics {
				if _, ok := details[name]; !ok {
					t.Errorf("%s: %s was not created", command, name)
				}
			}
			if len(details) != len(tc.topics)+1 {
				t.Errorf("%s: want only %v added to orders, got %v", command, tc.topics, details.Names())
			}
		})
	}
}

// Words a shell would split or expand are quoted, so the command can be
// pasted as printed.
func TestMissingTopicsErrorQuotesForTheShell(t *testing.T) {
	err := &eos.MissingTopicsError{Topics: []string{"orders", "my topic"}, Brokers: []string{"[::1]:9092", "kafka-1:9092"}}
	want := `eos: topics orders, my topic do not exist; create them with: eosctl topic create orders 'my topic' --brokers '[::1]:9092,kafka-1:9092'`
	if got := err.Error(); got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
}
