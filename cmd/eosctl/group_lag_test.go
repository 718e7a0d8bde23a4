package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
)

func TestGroupLagSeparatesLSOFromHWM(t *testing.T) {
	_, addr := newCluster(t, kfake.SeedTopics(2, "orders"))
	produceCommitted(t, addr, "orders", "done", 3) // orders-0 offsets 0-5: 3 records, 3 markers
	adm := newAdmin(t, addr)
	var os kadm.Offsets
	os.AddOffset("orders", 0, 2, -1)
	if err := adm.CommitAllOffsets(context.Background(), "pipe", os); err != nil {
		t.Fatal(err)
	}

	lag := func() groupLagJSON {
		t.Helper()
		out, errOut, code := runCLI(t, nil, "--brokers", addr, "-o", "json", "group", "lag", "pipe")
		if code != exitOK {
			t.Fatalf("exit %d: %s", code, errOut)
		}
		var got groupLagJSON
		if err := json.Unmarshal([]byte(out), &got); err != nil {
			t.Fatalf("not JSON: %v\n%s", err, out)
		}
		if len(got.Partitions) != 2 {
			t.Fatalf("want both partitions of orders, got %+v", got.Partitions)
		}
		return got
	}

	got := lag()
	p := got.Partitions[0]
	if p.Committed != 2 || p.HighWatermark != 6 || p.LastStableOffset != 6 || p.LagHWM != 4 || p.LagLSO != 4 || p.OpenTransaction {
		t.Errorf("without open transaction: %+v", p)
	}
	if q := got.Partitions[1]; q.Committed != -1 || q.LagHWM != 0 {
		t.Errorf("uncommitted empty partition: %+v", q)
	}

	openTxn(t, addr, "orders", "app-1") // offset 6, never ended
	got = lag()
	p = got.Partitions[0]
	if p.HighWatermark != 7 || p.LastStableOffset != 6 || p.LagHWM != 5 || p.LagLSO != 4 || !p.OpenTransaction {
		t.Errorf("with open transaction: %+v", p)
	}
	if got.TotalHWM != 5 || got.TotalLSO != 4 {
		t.Errorf("totals: hwm %d, lso %d", got.TotalHWM, got.TotalLSO)
	}

	out, _, _ := runCLI(t, nil, "--brokers", addr, "group", "lag", "pipe")
	if !strings.Contains(out, "LSO 1 behind HWM") {
		t.Errorf("table does not flag the open transaction:\n%s", out)
	}
}

func TestGroupLagUnknownGroup(t *testing.T) {
	_, addr := newCluster(t, kfake.SeedTopics(1, "orders"))
	_, errOut, code := runCLI(t, nil, "--brokers", addr, "group", "lag", "nobody")
	if code != exitFailure || !strings.Contains(errOut, `group "nobody" has no committed offsets`) {
		t.Errorf("exit %d, stderr %s", code, errOut)
	}
}
