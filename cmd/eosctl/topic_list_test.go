package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kfake"
)

func TestTopicList(t *testing.T) {
	_, addr := newCluster(t, kfake.NumBrokers(3), kfake.SeedTopics(4, "orders"), kfake.SeedTopics(1, "audit"))
	// kfake marks a topic internal by this config, as Kafka does
	// __consumer_offsets and __transaction_state.
	internal := "true"
	if _, err := newAdmin(t, addr).CreateTopic(context.Background(), 2, 1,
		map[string]*string{"kfake.is_internal": &internal}, "__internal"); err != nil {
		t.Fatal(err)
	}

	out, errOut, code := runCLI(t, nil, "--brokers", addr, "topic", "list")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	want := "TOPIC PARTITIONS REPLICAS\naudit 1 3\norders 4 3"
	if got := squeeze(out); got != want {
		t.Errorf("table:\n%s\nwant:\n%s", got, want)
	}

	for _, tc := range []struct {
		args []string
		want string // topic:partitions:replicas:internal, sorted by topic
	}{
		{nil, "audit:1:3:false orders:4:3:false"},
		{[]string{"--internal"}, "__internal:2:1:true audit:1:3:false orders:4:3:false"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			out, errOut, code := runCLI(t, nil, append([]string{"--brokers", addr, "-o", "json", "topic", "list"}, tc.args...)...)
			if code != exitOK {
				t.Fatalf("exit %d: %s", code, errOut)
			}
			var got []listedTopicJSON
			if err := json.Unmarshal([]byte(out), &got); err != nil {
				t.Fatalf("not JSON: %v\n%s", err, out)
			}
			var rows []string
			for _, r := range got {
				rows = append(rows, fmt.Sprintf("%s:%d:%d:%t", r.Topic, r.Partitions, r.ReplicationFactor, r.Internal))
			}
			if strings.Join(rows, " ") != tc.want {
				t.Errorf("got %s, want %s", strings.Join(rows, " "), tc.want)
			}
		})
	}
}

func TestTopicListEmpty(t *testing.T) {
	_, addr := newCluster(t)
	out, errOut, code := runCLI(t, nil, "--brokers", addr, "topic", "list")
	if code != exitOK || strings.TrimSpace(out) != "TOPIC  PARTITIONS  REPLICAS" {
		t.Errorf("exit %d, stdout %q, stderr %s", code, out, errOut)
	}
	out, _, _ = runCLI(t, nil, "--brokers", addr, "-o", "json", "topic", "list")
	if strings.TrimSpace(out) != "[]" {
		t.Errorf("JSON of no topics: %q, want []", out)
	}
}

func TestTopicListErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"--brokers", "127.0.0.1:1", "topic", "list", "orders"}, exitUsage, "unknown command"},
		{[]string{"--brokers", "127.0.0.1:1", "topic", "list", "--pattern", "x"}, exitUsage, "unknown flag"},
		{[]string{"--brokers", "127.0.0.1:1", "topic", "list"}, exitFailure, "check --brokers"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			_, errOut, code := runCLI(t, nil, tc.args...)
			if code != tc.code || !strings.Contains(errOut, tc.want) {
				t.Errorf("exit %d, want %d; stderr %s (want %q)", code, tc.code, errOut, tc.want)
			}
		})
	}
}
