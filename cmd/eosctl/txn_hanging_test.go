package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/eosflow/eosflow/tools/kafkatest"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// hanging runs `txn hanging` with JSON output and returns what it found.
func hanging(t *testing.T, addr string, wantCode int, args ...string) []hangingJSON {
	t.Helper()
	out, errOut, code := runCLI(t, nil, append([]string{"--brokers", addr, "-o", "json", "txn", "hanging"}, args...)...)
	if code != wantCode {
		t.Fatalf("exit %d, want %d: %s", code, wantCode, errOut)
	}
	var got []hangingJSON
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, out)
	}
	return got
}

func TestTxnHangingIgnoresTransactionsTheCoordinatorTracks(t *testing.T) {
	_, addr := newCluster(t, kfake.SeedTopics(2, "orders"))
	openTxn(t, addr, "orders", "app-1")
	time.Sleep(20 * time.Millisecond)

	// Younger than the broker's transaction.max.timeout.ms (15m): not a
	// candidate at all.
	if got := hanging(t, addr, exitOK, "--topic", "orders"); len(got) != 0 {
		t.Errorf("default max timeout: got %+v", got)
	}
	// Old enough, but the coordinator lists the partition in the
	// transaction, so it will finish it: not hanging.
	if got := hanging(t, addr, exitOK, "--topic", "orders", "--max-timeout", "1ms"); len(got) != 0 {
		t.Errorf("tracked transaction reported as hanging: %+v", got)
	}
}

func TestTxnHangingFindsForgottenTransaction(t *testing.T) {
	c, addr := newCluster(t, kfake.SeedTopics(2, "orders"), kfake.SeedTopics(1, "other"))
	produceCommitted(t, addr, "orders", "finished", 1)
	openTxn(t, addr, "orders", "app-1")
	time.Sleep(20 * time.Millisecond)
	forgetTransactions(c)

	for _, scope := range [][]string{
		{"--topic", "orders"},
		{"--topic", "orders", "--partition", "0"},
		{"--broker", "0"},
		{},
	} {
		got := hanging(t, addr, exitFailure, append(scope, "--max-timeout", "10ms")...)
		if len(got) != 1 {
			t.Fatalf("%v: want one hanging transaction, got %+v", scope, got)
		}
		h := got[0]
		if h.Topic != "orders" || h.Partition != 0 || h.CurrentTxnStartOffset != 2 || h.AgeMillis < 10 ||
			!strings.Contains(h.Reason, "no transactional id") {
			t.Errorf("%v: got %+v", scope, h)
		}
	}
	// Not old enough yet for a larger limit.
	if got := hanging(t, addr, exitOK, "--topic", "orders", "--max-timeout", "1h"); len(got) != 0 {
		t.Errorf("--max-timeout 1h: got %+v", got)
	}
	// Other partitions are clean.
	if got := hanging(t, addr, exitOK, "--topic", "orders", "--partition", "1", "--max-timeout", "1ms"); len(got) != 0 {
		t.Errorf("partition 1: got %+v", got)
	}

	out, errOut, code := runCLI(t, nil, "--brokers", addr, "txn", "hanging", "--topic", "orders", "--max-timeout", "10ms")
	// Nothing proves how it ended: it is reported unknown, and the only
	// abort offered is a forced one, with the risk named.
	if code != exitFailure || !strings.Contains(out, "unknown") ||
		!strings.Contains(errOut, "eosctl txn abort --force --topic orders --partition 0 --start-offset 2") ||
		!strings.Contains(errOut, "drops its records even if it committed") {
		t.Errorf("exit %d, stdout:\n%s\nstderr: %s", code, out, errOut)
	}
}

func TestTxnHangingCoordinatorViews(t *testing.T) {
	for _, tc := range []struct {
		name   string
		state  func(s *kmsg.DescribeTransactionsResponseTransactionState, pid int64)
		reason string
	}{
		{"unknown id", func(s *kmsg.DescribeTransactionsResponseTransactionState, pid int64) {
			s.ErrorCode = kerr.TransactionalIDNotFound.Code
		}, "does not know"},
		{"not in a transaction", func(s *kmsg.DescribeTransactionsResponseTransactionState, pid int64) {
			s.State, s.ProducerID = "CompleteAbort", pid
		}, "CompleteAbort"},
		{"partition missing", func(s *kmsg.DescribeTransactionsResponseTransactionState, pid int64) {
			s.State, s.ProducerID = "Ongoing", pid
		}, "does not include this partition"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, addr := newCluster(t, kfake.SeedTopics(1, "orders"))
			cl := openTxn(t, addr, "orders", "app-1")
			pid, _, err := cl.ProducerID(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			time.Sleep(20 * time.Millisecond)
			c.ControlKey(int16(kmsg.DescribeTransactions), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
				c.KeepControl()
				req := kreq.(*kmsg.DescribeTransactionsRequest)
				resp := req.ResponseKind().(*kmsg.DescribeTransactionsResponse)
				for _, id := range req.TransactionalIDs {
					s := kmsg.NewDescribeTransactionsResponseTransactionState()
					s.TransactionalID = id
					tc.state(&s, pid)
					resp.TransactionStates = append(resp.TransactionStates, s)
				}
				return resp, nil, true
			})
			got := hanging(t, addr, exitFailure, "--topic", "orders", "--max-timeout", "10ms")
			if len(got) != 1 || got[0].TransactionalID != "app-1" || !strings.Contains(got[0].Reason, tc.reason) {
				t.Errorf("got %+v, want reason with %q", got, tc.reason)
			}
		})
	}
}

func TestTxnHangingUsesBrokerMaxTimeout(t *testing.T) {
	c, addr := newCluster(t, kfake.SeedTopics(1, "orders"),
		kfake.BrokerConfigs(map[string]string{"transaction.max.timeout.ms": "70000"}))
	openTxn(t, addr, "orders", "app-1")
	forgetTransactions(c)
	// 70s from the broker, so a fresh transaction is not a candidate.
	if got := hanging(t, addr, exitOK, "--topic", "orders"); len(got) != 0 {
		t.Errorf("got %+v", got)
	}
	_, errOut, _ := runCLI(t, nil, "--brokers", addr, "txn", "hanging", "--topic", "orders")
	if !strings.Contains(errOut, "longer ago than 1m10s") {
		t.Errorf("want the broker's limit in the message: %s", errOut)
	}
}

func TestTxnHangingBadScope(t *testing.T) {
	_, addr := newCluster(t, kfake.SeedTopics(1, "orders"))
	if _, errOut, code := runCLI(t, nil, "--brokers", addr, "txn", "hanging", "--partition", "0"); code != exitUsage {
		t.Errorf("--partition without --topic: exit %d: %s", code, errOut)
	}
	if _, errOut, code := runCLI(t, nil, "--brokers", addr, "txn", "hanging", "--broker", "9"); code != exitFailure || !strings.Contains(errOut, "broker 9") {
		t.Errorf("unknown broker: exit %d: %s", code, errOut)
	}
}

// A transaction whose coordinator has moved its transactional id to a
// later epoch, and is not preparing, hangs however young it is: the
// coordinator ended it and writes its partition no marker. The runtime's
// repair judges it so too; --max-timeout ages only transactions that no
// coordinator tracks. While the coordinator prepares, its marker may still
// come, and nothing is reported.
func TestTxnHangingCoordinatorMovedOnWithoutWaiting(t *testing.T) {
	for _, tc := range []struct {
		state string
		want  int
	}{{"CompleteCommit", 1}, {"PrepareCommit", 0}} {
		t.Run(tc.state, func(t *testing.T) {
			c, addr := newCluster(t, kfake.SeedTopics(1, "orders"))
			cl := openTxn(t, addr, "orders", "app-1")
			pid, epoch, err := cl.ProducerID(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			kafkatest.CoordinatorSays(c, pid, epoch+1, tc.state)
			code := exitOK
			if tc.want > 0 {
				code = exitFailure
			}
			got := hanging(t, addr, code, "--topic", "orders")
			if len(got) != tc.want {
				t.Fatalf("got %+v, want %d hanging", got, tc.want)
			}
			if tc.want > 0 && (got[0].TransactionalID != "app-1" || got[0].Outcome != "committed, marker missing" ||
				!strings.Contains(got[0].Reason, "writes it no marker")) {
				t.Fatalf("got %+v, want app-1's transaction, committed with its marker missing", got[0])
			}
		})
	}
}
