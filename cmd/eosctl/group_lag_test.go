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

// groupLagJSONOf runs `group lag GROUP -o json` and decodes it.
func groupLagJSONOf(t *testing.T, addr, group string) groupLagJSON {
	t.Helper()
	out, errOut, code := runCLI(t, nil, "--brokers", addr, "-o", "json", "group", "lag", group)
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var got groupLagJSON
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, out)
	}
	return got
}

// produceTxn writes perPartition[p] records to each partition p of topic
// in one transaction of txnID, and commits or aborts it: the marker ending
// it takes one more offset on each partition.
func produceTxn(t *testing.T, addr, topic, txnID string, perPartition map[int32]int, commit bool) {
	t.Helper()
	cl := newClient(t, addr, kgo.TransactionalID(txnID), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := cl.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	for p, n := range perPartition {
		for range n {
			if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Partition: p, Value: []byte("v")}).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := cl.EndTransaction(ctx, kgo.TransactionEndTry(commit)); err != nil {
		t.Fatal(err)
	}
}

// consumeAndCommit reads want records of topic read_committed in group
// and commits what it read, as a pipeline does: the offset after the last
// record of each partition.
func consumeAndCommit(t *testing.T, addr, group, topic string, want int) {
	t.Helper()
	cl := newClient(t, addr, kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic), kgo.DisableAutoCommit(),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for got := 0; got < want; {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %d of %d records", got, want)
		}
		got += fs.NumRecords()
	}
	if err := cl.CommitUncommittedOffsets(ctx); err != nil {
		t.Fatal(err)
	}
}

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
		got := groupLagJSONOf(t, addr, "pipe")
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

// A group that read everything committed trails the LSO by the commit
// marker after its last record: that is lag 0, as are aborted records; the
// HWM lag still counts them and an open transaction. Records it has not
// read count, with the markers between them.
func TestGroupLagCaughtUpOnTransactionalTopic(t *testing.T) {
	_, addr := newCluster(t, kfake.SeedTopics(2, "orders"))
	produceTxn(t, addr, "orders", "up", map[int32]int{0: 3, 1: 2}, true) // orders-0: 0-2, marker 3; orders-1: 0-1, marker 2
	consumeAndCommit(t, addr, "pipe", "orders", 5)
	produceTxn(t, addr, "orders", "up", map[int32]int{1: 2}, false) // orders-1: aborted 3-4, marker 5
	openTxn(t, addr, "orders", "app-1")                             // orders-0: 4, open

	got := groupLagJSONOf(t, addr, "pipe")
	if len(got.Partitions) != 2 {
		t.Fatalf("partitions: %+v", got.Partitions)
	}
	if p := got.Partitions[0]; p.Committed != 3 || p.LastStableOffset != 4 || p.HighWatermark != 5 || p.LagLSO != 0 || p.LagHWM != 2 || !p.OpenTransaction {
		t.Errorf("orders-0, caught up under an open transaction: %+v", p)
	}
	if p := got.Partitions[1]; p.Committed != 2 || p.LastStableOffset != 6 || p.HighWatermark != 6 || p.LagLSO != 0 || p.LagHWM != 4 {
		t.Errorf("orders-1, caught up before an aborted transaction: %+v", p)
	}
	if got.TotalLSO != 0 || got.TotalHWM != 6 {
		t.Errorf("totals: lso %d, hwm %d; want 0 and 6", got.TotalLSO, got.TotalHWM)
	}
	out, _, _ := runCLI(t, nil, "--brokers", addr, "group", "lag", "pipe")
	if !strings.Contains(squeeze(out), "orders 1 2 6 6 0 4 caught up: 4 transaction marker(s) or aborted record(s) after the commit") {
		t.Errorf("table does not say why the lag is 0:\n%s", out)
	}

	produceTxn(t, addr, "orders", "up", map[int32]int{1: 3}, true) // orders-1: 6-8, marker 9
	got = groupLagJSONOf(t, addr, "pipe")
	if p := got.Partitions[1]; p.LastStableOffset != 10 || p.LagLSO != 8 || p.LagHWM != 8 {
		t.Errorf("orders-1, 3 records behind: %+v, want lag 8 (3 records, 3 markers, 2 aborted records)", p)
	}
}
