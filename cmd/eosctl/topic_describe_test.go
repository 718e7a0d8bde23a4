package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kfake"
)

func TestTopicDescribe(t *testing.T) {
	_, addr := newCluster(t, kfake.NumBrokers(3), kfake.SeedTopics(1, "audit"))
	if _, errOut, code := runCLI(t, nil, "--brokers", addr, "topic", "create", "orders", "--partitions", "2",
		"--replication-factor", "3", "--topic-config", "retention.ms=1000"); code != exitOK {
		t.Fatalf("create: exit %d: %s", code, errOut)
	}

	out, errOut, code := runCLI(t, nil, "--brokers", addr, "-o", "json", "topic", "describe", "orders", "audit")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var got []describedTopicJSON
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, out)
	}
	if len(got) != 2 || got[0].Topic != "orders" || got[1].Topic != "audit" {
		t.Fatalf("want orders then audit, as asked: %+v", got)
	}
	o := got[0]
	if o.ID == "" || o.ReplicationFactor != 3 || len(o.Partitions) != 2 {
		t.Errorf("orders: %+v", o)
	}
	for i, p := range o.Partitions {
		if p.Partition != int32(i) || p.Leader < 0 || len(p.Replicas) != 3 || len(p.ISR) != 3 || p.Error != "" {
			t.Errorf("orders partition %d: %+v", i, p)
		}
	}
	// Only what differs from Kafka's defaults: the config set at create.
	if len(o.Configs) != 1 || o.Configs[0] != (topicConfigJSON{Name: "retention.ms", Value: "1000", Source: "DYNAMIC_TOPIC_CONFIG"}) {
		t.Errorf("orders configs: %+v", o.Configs)
	}
	if a := got[1]; len(a.Partitions) != 1 || a.Configs == nil || len(a.Configs) != 0 {
		t.Errorf("audit: want one partition and an empty config list, got %+v", a)
	}

	out, errOut, code = runCLI(t, nil, "--brokers", addr, "topic", "describe", "orders")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	parts, cfgs, ok := strings.Cut(squeeze(out), "\n\n")
	if !ok {
		t.Fatalf("want a partitions table and a configs table:\n%s", out)
	}
	lines := strings.Split(parts, "\n")
	if len(lines) != 3 || lines[0] != "TOPIC PARTITION LEADER REPLICAS ISR NOTE" ||
		!strings.HasPrefix(lines[1], "orders 0 ") || !strings.HasPrefix(lines[2], "orders 1 ") {
		t.Errorf("partitions table:\n%s", parts)
	}
	if cfgs != "TOPIC CONFIG VALUE SOURCE\norders retention.ms 1000 DYNAMIC_TOPIC_CONFIG" {
		t.Errorf("configs table:\n%s", cfgs)
	}
}

func TestTopicDescribeUnknown(t *testing.T) {
	_, addr := newCluster(t, kfake.SeedTopics(1, "orders"))
	for _, tc := range []struct {
		names    []string
		shown    []string // topics described on stdout
		notFound string   // what stderr must name
	}{
		{[]string{"nope"}, nil, `topic "nope" does not exist`},
		{[]string{"orders", "nope", "gone"}, []string{"orders"}, `topics "nope", "gone" do not exist`},
	} {
		t.Run(strings.Join(tc.names, " "), func(t *testing.T) {
			out, errOut, code := runCLI(t, nil, append([]string{"--brokers", addr, "-o", "json", "topic", "describe"}, tc.names...)...)
			if code != exitFailure {
				t.Fatalf("exit %d, want %d: %s", code, exitFailure, errOut)
			}
			if !strings.Contains(errOut, tc.notFound) || !strings.Contains(errOut, "eosctl topic list") {
				t.Errorf("stderr lacks %q and the way to list topics: %s", tc.notFound, errOut)
			}
			if strings.Contains(errOut, `"orders"`) {
				t.Errorf("stderr blames orders, which exists: %s", errOut)
			}
			var got []describedTopicJSON
			if err := json.Unmarshal([]byte(out), &got); err != nil {
				t.Fatalf("not JSON: %v\n%s", err, out)
			}
			var shown []string
			for _, d := range got {
				shown = append(shown, d.Topic)
			}
			if strings.Join(shown, ",") != strings.Join(tc.shown, ",") {
				t.Errorf("described %v, want %v", shown, tc.shown)
			}
		})
	}
}

// Describing a topic must not create it, even where the broker creates
// topics on first use (as `eosctl dev broker` does).
func TestTopicDescribeDoesNotAutoCreate(t *testing.T) {
	_, addr := newCluster(t, kfake.AllowAutoTopicCreation())
	if _, errOut, code := runCLI(t, nil, "--brokers", addr, "topic", "describe", "nope"); code != exitFailure || !strings.Contains(errOut, `"nope"`) {
		t.Errorf("exit %d, stderr %s", code, errOut)
	}
	if _, ok := topicsOn(t, addr)["nope"]; ok {
		t.Error("describe created the topic on a broker that creates topics on first use")
	}
}

func TestTopicDescribeUsage(t *testing.T) {
	for _, args := range [][]string{
		{},
		{"orders", "my topic"},
	} {
		_, errOut, code := runCLI(t, nil, append([]string{"--brokers", "127.0.0.1:1", "topic", "describe"}, args...)...)
		if code != exitUsage {
			t.Errorf("%q: exit %d, want %d; stderr %s", args, code, exitUsage, errOut)
		}
	}
}

func TestPartitionNote(t *testing.T) {
	for _, tc := range []struct {
		p    partitionDetailJSON
		want string
	}{
		{partitionDetailJSON{Leader: 1, Replicas: []int32{1, 2, 3}, ISR: []int32{1, 2, 3}}, ""},
		{partitionDetailJSON{Leader: 1, Replicas: []int32{1, 2, 3}, ISR: []int32{1}}, "under-replicated: 1 of 3 replicas in sync"},
		{partitionDetailJSON{Leader: -1, Replicas: []int32{1, 2}, ISR: []int32{}, OfflineReplicas: []int32{1, 2}, Error: "LEADER_NOT_AVAILABLE"},
			"no leader: cannot be read or written; under-replicated: 0 of 2 replicas in sync; offline replicas 1,2; LEADER_NOT_AVAILABLE"},
	} {
		if got := partitionNote(tc.p); got != tc.want {
			t.Errorf("%+v: got %q, want %q", tc.p, got, tc.want)
		}
	}
}
