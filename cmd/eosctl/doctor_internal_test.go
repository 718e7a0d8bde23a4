package main

import (
	"context"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
)

// createTopic creates topic with partitions and configs (key, value pairs).
func createTopic(t *testing.T, addr, topic string, partitions int32, kv ...string) {
	t.Helper()
	configs := map[string]*string{}
	for i := 0; i+1 < len(kv); i += 2 {
		configs[kv[i]] = &kv[i+1]
	}
	if _, err := newAdmin(t, addr).CreateTopic(context.Background(), partitions, 1, configs, topic); err != nil {
		t.Fatal(err)
	}
}

func TestDoctorChecksChangelogCleanupPolicy(t *testing.T) {
	for _, tc := range []struct {
		policy   string
		wantCode int
		status   string
		detail   string
	}{
		{"compact", exitOK, statusOK, "orders-counts-changelog: cleanup.policy=compact"},
		{"compact,delete", exitOK, statusOK, "orders-counts-changelog: cleanup.policy=compact,delete"},
		{"delete", exitFailure, statusFail, `orders-counts-changelog (store "counts") has cleanup.policy=delete`},
	} {
		t.Run(tc.policy, func(t *testing.T) {
			_, addr := newCluster(t, kfake.BrokerConfigs(devConfigs))
			createTopic(t, addr, "orders-counts-changelog", 2, "cleanup.policy", tc.policy)
			res := doctor(t, addr, tc.wantCode, "--config", writeConfig(t, addr, ""))
			f, ok := findingWith(res, tc.status, tc.detail)
			if !ok || f.Check != "changelog" {
				t.Fatalf("want %s %q: %+v", tc.status, tc.detail, res.Findings)
			}
			if tc.status == statusFail && !strings.Contains(f.Fix, "kafka-configs.sh --bootstrap-server "+addr+" --alter --entity-type topics --entity-name orders-counts-changelog --add-config cleanup.policy=compact") {
				t.Errorf("fix: %q", f.Fix)
			}
			if _, ok := findingWith(res, statusOK, "orders-counts-changelog: 2 partitions, each with a leader"); !ok {
				t.Errorf("want the partitions checked: %+v", res.Findings)
			}
		})
	}
}

func TestDoctorChecksInternalTopics(t *testing.T) {
	_, addr := newCluster(t, kfake.BrokerConfigs(devConfigs))
	createTopic(t, addr, "orders", 2)
	createTopic(t, addr, "orders-by-region-repartition", 2, "cleanup.policy", "compact")
	createTopic(t, addr, "orders-by-user-repartition", 2, "cleanup.policy", "delete")
	createTopic(t, addr, "orders-odd-changelog", 3, "cleanup.policy", "compact")
	createTopic(t, addr, "orders-strict-changelog", 2, "cleanup.policy", "compact", "min.insync.replicas", "2")
	createTopic(t, addr, "orders-eos-offsets", 2, "cleanup.policy", "delete")
	createTopic(t, addr, "orders-eu-x-changelog", 2, "cleanup.policy", "delete") // app orders-eu's, once it has a group
	createTopic(t, addr, "orders-eu-eos-offsets", 2, "cleanup.policy", "delete") // app orders-eu's
	var eu kadm.Offsets
	eu.AddOffset("orders", 0, 0, -1)
	if err := newAdmin(t, addr).CommitAllOffsets(context.Background(), "orders-eu", eu); err != nil {
		t.Fatal(err)
	}
	res := doctor(t, addr, exitFailure, "--config", writeConfig(t, addr, ""), "--input-topic", "orders")
	for _, want := range []struct{ status, detail, fix string }{
		{statusFail, `orders-by-region-repartition (node "by-region") has cleanup.policy=compact`, "--entity-name orders-by-region-repartition --add-config cleanup.policy=delete"},
		{statusOK, "orders-by-user-repartition: cleanup.policy=delete", ""},
		{statusWarn, "orders-odd-changelog has 3 partitions, which no known input of the app has (orders has 2)", "--input-topic"},
		{statusFail, "orders-strict-changelog: min.insync.replicas=2 exceeds its 1 replica(s)", "--add-config min.insync.replicas=1"},
		{statusWarn, "orders-eos-offsets has cleanup.policy=delete", "--entity-name orders-eos-offsets --add-config cleanup.policy=compact"},
		{statusOK, "orders-eos-offsets: 2 partitions, each with a leader", ""},
	} {
		f, ok := findingWith(res, want.status, want.detail)
		if !ok || !strings.Contains(f.Fix, want.fix) {
			t.Errorf("want %s %q with fix %q: %+v", want.status, want.detail, want.fix, res.Findings)
		}
	}
	for _, f := range res.Findings {
		if strings.Contains(f.Detail, "orders-eu-x-changelog") || strings.Contains(f.Detail, "orders-eu-eos-offsets") {
			t.Errorf("a topic of app orders-eu was checked as one of orders: %+v", f)
		}
	}
}
