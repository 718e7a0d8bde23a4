package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// lastStable returns the last stable offset of orders-0.
func lastStable(t *testing.T, adm *kadm.Client) int64 {
	t.Helper()
	l, err := adm.ListCommittedOffsets(context.Background(), "orders")
	if err != nil {
		t.Fatal(err)
	}
	o, _ := l.Lookup("orders", 0)
	return o.Offset
}

func TestTxnAbortUnblocksReadCommitted(t *testing.T) {
	c, addr := newCluster(t, kfake.SeedTopics(1, "orders"))
	produceCommitted(t, addr, "orders", "before", 1) // offsets 0, 1
	openTxn(t, addr, "orders", "app-1")              // offset 2, never ended
	produceCommitted(t, addr, "orders", "after", 1)  // offsets 3, 4
	forgetTransactions(c)
	adm := newAdmin(t, addr)
	if got := lastStable(t, adm); got != 2 {
		t.Fatalf("LSO = %d before abort, want 2 (stuck at the open transaction)", got)
	}

	// Nothing proves how it ended (the coordinator forgot it; no marker
	// elsewhere): abort refuses without --force, even when confirmed.
	args := []string{"--brokers", addr, "txn", "abort", "--topic", "orders", "--partition", "0", "--start-offset", "2"}
	_, errOut, code := runCLI(t, strings.NewReader("y\n"), args...)
	if code != exitFailure || !strings.Contains(errOut, "refusing to abort: no evidence proves the transaction aborted") || !strings.Contains(errOut, "--force") {
		t.Fatalf("unproven without --force: exit %d, stderr %s", code, errOut)
	}
	if got := lastStable(t, adm); got != 2 {
		t.Fatalf("LSO = %d after the refusal, want 2", got)
	}
	args = append(args, "--force")
	_, errOut, code = runCLI(t, strings.NewReader("n\n"), args...)
	if code != exitFailure || !strings.Contains(errOut, "will write an ABORT marker to orders-0") || !strings.Contains(errOut, "nothing was written") {
		t.Fatalf("declined: exit %d, stderr %s", code, errOut)
	}
	if got := lastStable(t, adm); got != 2 {
		t.Fatalf("LSO = %d after declining, want 2", got)
	}

	out, errOut, code := runCLI(t, strings.NewReader("y\n"), append([]string{"-o", "json"}, args...)...)
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var res settleJSON
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, out)
	}
	if !res.Aborted || !res.Forced || res.LastStableOffset != 6 {
		t.Errorf("got %+v, want aborted with LSO 6 (after the new marker)", res)
	}
	if got := lastStable(t, adm); got != 6 {
		t.Errorf("LSO = %d after abort, want 6", got)
	}

	// A read_committed consumer now gets both committed records and not
	// the aborted one.
	cl := newClient(t, addr, kgo.ConsumeTopics("orders"), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var values []string
	for len(values) < 2 && ctx.Err() == nil {
		cl.PollFetches(ctx).EachRecord(func(r *kgo.Record) { values = append(values, string(r.Value)) })
	}
	if strings.Join(values, ",") != "done,done" {
		t.Errorf("read_committed got %v, want the two committed records", values)
	}
}

func TestTxnAbortWarnsAndRefuses(t *testing.T) {
	_, addr := newCluster(t, kfake.SeedTopics(1, "orders"))
	openTxn(t, addr, "orders", "app-1")

	_, errOut, code := runCLI(t, strings.NewReader(""), "--brokers", addr, "txn", "abort",
		"--topic", "orders", "--partition", "0", "--start-offset", "0")
	if code != exitFailure || !strings.Contains(errOut, "still tracks") {
		t.Errorf("tracked transaction: exit %d, stderr %s", code, errOut)
	}

	_, errOut, code = runCLI(t, nil, "--brokers", addr, "txn", "abort",
		"--topic", "orders", "--partition", "0", "--start-offset", "5", "--yes")
	if code != exitFailure || !strings.Contains(errOut, "no open transaction starts at offset 5") {
		t.Errorf("wrong offset: exit %d, stderr %s", code, errOut)
	}
}
