package main

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
)

func TestTxnDescribe(t *testing.T) {
	_, addr := newCluster(t, kfake.SeedTopics(2, "orders"))
	openTxn(t, addr, "orders", "app-1")

	out, errOut, code := runCLI(t, nil, "--brokers", addr, "txn", "describe", "app-1")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	for _, want := range []string{"app-1", "Ongoing", "1m0s", "orders-0"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}

	out, _, code = runCLI(t, nil, "--brokers", addr, "-o", "json", "txn", "describe", "app-1")
	var got []txnJSON
	if err := json.Unmarshal([]byte(out), &got); err != nil || code != exitOK {
		t.Fatalf("exit %d, err %v:\n%s", code, err, out)
	}
	if len(got) != 1 || got[0].TimeoutMillis != 60000 || len(got[0].Partitions["orders"]) != 1 || got[0].Partitions["orders"][0] != 0 {
		t.Errorf("got %+v", got)
	}
}

func TestTxnDescribeUnknownID(t *testing.T) {
	_, addr := newCluster(t, kfake.SeedTopics(1, "orders"))
	_, errOut, code := runCLI(t, nil, "--brokers", addr, "txn", "describe", "nobody")
	if code != exitFailure || !strings.Contains(errOut, `"nobody"`) || !strings.Contains(errOut, "not found") {
		t.Errorf("exit %d, stderr %s", code, errOut)
	}
}

func TestDescribedJSONAgeOnlyWhenOpen(t *testing.T) {
	now := time.UnixMilli(100_000)
	for _, tc := range []struct {
		state string
		age   int64
	}{
		{"Ongoing", 40_000}, {"PrepareCommit", 40_000}, {"CompleteCommit", -1}, {"Empty", -1},
	} {
		j := describedJSON(kadm.DescribedTransaction{State: tc.state, StartTimestamp: 60_000}, now)
		if j.AgeMillis != tc.age || j.StartTime == nil {
			t.Errorf("%s: age %d, start %v; want age %d and a start time", tc.state, j.AgeMillis, j.StartTime, tc.age)
		}
	}
}
