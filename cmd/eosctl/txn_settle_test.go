package main

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/eosflow/eosflow/tools/kafkatest"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// A transaction on orders-0 and orders-1 whose coordinator committed it,
// but whose marker a restarting broker skipped on orders-0 (the
// coordinator wrote COMMIT on orders-1 only), hangs on orders-0. The
// tools judge it as the runtime does: txn hanging reports it committed
// with its marker missing and advises txn commit, txn abort refuses it
// (aborting would leave half of a committed transaction visible), and txn
// commit completes it, so read_committed sees all of it. The evidence is
// the coordinator one epoch on (CompleteCommit), or, once the producer
// has moved past that, the COMMIT marker on orders-1.
func TestTxnToolsCompleteACommittedTransactionWithAMissingMarker(t *testing.T) {
	for _, tc := range []struct {
		name  string
		bump  int16  // the coordinator's epoch over the transaction's
		state string // and its state
	}{
		{"coordinator one epoch on", 1, "CompleteCommit"},
		{"marker on the other partition", 3, "CompleteAbort"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, addr := newCluster(t, kfake.SeedTopics(2, "orders"))
			pid, epoch := openTxnOnTwo(t, addr, "app-1")
			adm := newAdmin(t, addr)
			// The coordinator's COMMIT, written on orders-1 only.
			writeMarker(t, adm, pid, epoch+1, true, 1)
			kafkatest.CoordinatorSays(c, pid, epoch+tc.bump, tc.state)
			markersAt(c, pid, epoch, epoch+1)
			time.Sleep(20 * time.Millisecond)

			got := hanging(t, addr, exitFailure, "--topic", "orders", "--max-timeout", "10ms")
			if len(got) != 1 || got[0].Partition != 0 || got[0].Outcome != "committed, marker missing" ||
				!strings.Contains(got[0].Settle, "eosctl txn commit --topic orders --partition 0 --start-offset 0") {
				t.Fatalf("txn hanging: got %+v, want orders-0 committed with its marker missing, and txn commit advised", got)
			}
			at := []string{"--brokers", addr, "--topic", "orders", "--partition", "0", "--start-offset", "0", "--yes"}
			_, errOut, code := runCLI(t, nil, append([]string{"txn", "abort"}, at...)...)
			if code != exitFailure || !strings.Contains(errOut, "refusing to abort: the transaction committed") ||
				!strings.Contains(errOut, "eosctl txn commit") {
				t.Fatalf("txn abort of a committed transaction: exit %d, stderr %s", code, errOut)
			}
			if got := lastStable(t, adm); got != 0 {
				t.Fatalf("LSO = %d after the refused abort, want 0: something was written", got)
			}
			out, errOut, code := runCLI(t, nil, append([]string{"-o", "json", "txn", "commit"}, at...)...)
			if code != exitOK {
				t.Fatalf("txn commit: exit %d, stderr %s", code, errOut)
			}
			var res settleJSON
			if err := json.Unmarshal([]byte(out), &res); err != nil {
				t.Fatalf("not JSON: %v\n%s", err, out)
			}
			// At the next epoch, as its coordinator writes it, once the
			// producer is past it; else at its own, so that no live
			// transaction of the next epoch on the partition is ended.
			wantEpoch := epoch
			if tc.bump > 1 {
				wantEpoch = epoch + 1
			}
			if !res.Committed || res.Outcome != "committed" || res.MarkerEpoch != wantEpoch {
				t.Fatalf("txn commit: %+v, want committed at epoch %d", res, wantEpoch)
			}
			if vals := readAllCommitted(t, addr, 2); !slices.Equal(vals, []string{"p0", "p1"}) {
				t.Fatalf("read_committed got %v, want both partitions' records of the committed transaction", vals)
			}
		})
	}
}

// Where the evidence proves an abort, txn abort needs no --force, txn
// commit refuses; where nothing proves either, txn commit refuses even
// with the question answered, and txn abort without --force too.
func TestTxnToolsFollowTheProvenOutcome(t *testing.T) {
	c, addr := newCluster(t, kfake.SeedTopics(2, "orders"))
	pid, epoch := openTxnOnTwo(t, addr, "app-1")
	adm := newAdmin(t, addr)
	at := []string{"--brokers", addr, "--topic", "orders", "--partition", "0", "--start-offset", "0"}

	// No evidence yet: the coordinator has moved on and wrote nothing.
	kafkatest.CoordinatorSays(c, pid, epoch+3, "CompleteAbort")
	_, errOut, code := runCLI(t, strings.NewReader("y\n"), append([]string{"txn", "commit"}, at...)...)
	if code != exitFailure || !strings.Contains(errOut, "refusing to commit: no evidence proves the transaction committed") {
		t.Fatalf("unproven commit: exit %d, stderr %s", code, errOut)
	}
	_, errOut, code = runCLI(t, strings.NewReader("y\n"), append([]string{"txn", "abort"}, at...)...)
	if code != exitFailure || !strings.Contains(errOut, "refusing to abort: no evidence") {
		t.Fatalf("unproven abort without --force: exit %d, stderr %s", code, errOut)
	}

	// The coordinator's ABORT on orders-1 proves it aborted.
	writeMarker(t, adm, pid, epoch+1, false, 1)
	markersAt(c, pid, epoch, epoch+1)
	_, errOut, code = runCLI(t, nil, append([]string{"txn", "commit", "--yes"}, at...)...)
	if code != exitFailure || !strings.Contains(errOut, "refusing to commit: the transaction aborted") {
		t.Fatalf("commit of an aborted transaction: exit %d, stderr %s", code, errOut)
	}
	_, errOut, code = runCLI(t, nil, append([]string{"txn", "abort", "--yes"}, at...)...)
	if code != exitOK || !strings.Contains(errOut, "the transaction aborted") {
		t.Fatalf("abort of an aborted transaction: exit %d, stderr %s", code, errOut)
	}
	if vals := readAllCommitted(t, addr, 0); len(vals) != 0 {
		t.Fatalf("read_committed got %v, want nothing of the aborted transaction", vals)
	}
}

// openTxnOnTwo begins a transaction as txnID with one record on each of
// orders-0 ("p0") and orders-1 ("p1"), and never ends it.
func openTxnOnTwo(t *testing.T, addr, txnID string) (int64, int16) {
	t.Helper()
	cl := newClient(t, addr, kgo.TransactionalID(txnID), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	ctx := context.Background()
	if err := cl.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "orders", Partition: 0, Value: []byte("p0")},
		&kgo.Record{Topic: "orders", Partition: 1, Value: []byte("p1")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	pid, epoch, err := cl.ProducerID(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return pid, epoch
}

// writeMarker writes a COMMIT (commit) or ABORT marker of pid at epoch
// to orders/partition, as a coordinator does.
func writeMarker(t *testing.T, adm *kadm.Client, pid int64, epoch int16, commit bool, partition int32) {
	t.Helper()
	resp, err := adm.WriteTxnMarkers(context.Background(), kadm.TxnMarkers{ProducerID: pid, ProducerEpoch: epoch,
		Commit: commit, Topics: kadm.TopicsSet{"orders": {partition: {}}}})
	if err != nil {
		t.Fatal(err)
	}
	resp.EachPartition(func(p kadm.TxnMarkersPartitionResponse) {
		if p.Err != nil {
			t.Fatal(p.Err)
		}
	})
}

// markersAt makes DescribeProducers report pid as Kafka does after its
// coordinator wrote a marker at marker on orders-1 and none on orders-0:
// orders-0 holds the transaction of epoch open, orders-1 none.
func markersAt(c *kfake.Cluster, pid int64, epoch, marker int16) {
	c.ControlKey(int16(kmsg.DescribeProducers), func(kr kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		req := kr.(*kmsg.DescribeProducersRequest)
		resp := req.ResponseKind().(*kmsg.DescribeProducersResponse)
		for _, rt := range req.Topics {
			st := kmsg.NewDescribeProducersResponseTopic()
			st.Topic = rt.Topic
			for _, p := range rt.Partitions {
				sp := kmsg.NewDescribeProducersResponseTopicPartition()
				sp.Partition = p
				if rt.Topic == "orders" {
					ap := kmsg.NewDescribeProducersResponseTopicPartitionActiveProducer()
					ap.ProducerID, ap.ProducerEpoch, ap.CurrentTxnStartOffset = pid, int32(epoch), 0
					ap.LastTimestamp = time.Now().Add(-time.Minute).UnixMilli()
					if p == 1 {
						ap.ProducerEpoch, ap.CurrentTxnStartOffset = int32(marker), -1
					}
					sp.ActiveProducers = append(sp.ActiveProducers, ap)
				}
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
		}
		return resp, nil, true
	})
}

// readAllCommitted reads orders read_committed until it has want records
// (then 1 s more, for any that must not be there) or 10 s pass.
func readAllCommitted(t *testing.T, addr string, want int) []string {
	t.Helper()
	cl := newClient(t, addr, kgo.ConsumeTopics("orders"), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var vals []string
	for ctx.Err() == nil && len(vals) < want {
		cl.PollFetches(ctx).EachRecord(func(r *kgo.Record) { vals = append(vals, string(r.Value)) })
	}
	more, cancelMore := context.WithTimeout(context.Background(), time.Second)
	defer cancelMore()
	cl.PollFetches(more).EachRecord(func(r *kgo.Record) { vals = append(vals, string(r.Value)) })
	slices.Sort(vals)
	return vals
}
