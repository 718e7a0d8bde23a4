package txnrepair

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap/zaptest"
)

// searchCluster is an embedded cluster of brokers with topic out, where
// txnID has a transaction open on out/0 with one record in it, and a
// Finder over it. It returns the open transaction's producer.
type searchCluster struct {
	c     *kfake.Cluster
	f     *Finder
	adm   *kadm.Client
	txn   *kgo.Client
	pid   int64
	epoch int16
}

func newSearchCluster(t *testing.T, brokers int, txnID string) *searchCluster {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(brokers), kfake.SeedTopics(1, "out"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	sc := &searchCluster{c: c}
	client := func(opts ...kgo.Opt) *kgo.Client {
		cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(c.ListenAddrs()...)}, opts...)...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(cl.Close)
		return cl
	}
	admin := client()
	sc.adm = kadm.NewClient(admin)
	read := func(topic string, partition int32, offset int64) (*kgo.Client, error) {
		return kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(c.ListenAddrs()...)}, ReaderOpts(topic, partition, offset)...)...)
	}
	sc.f = NewFinder(admin, read, zaptest.NewLogger(t))
	sc.txn = client(kgo.TransactionalID(txnID), kgo.DefaultProduceTopic("out"))
	ctx := context.Background()
	if err := sc.txn.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := sc.txn.ProduceSync(ctx, &kgo.Record{Value: []byte("open")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if sc.pid, sc.epoch, err = sc.txn.ProducerID(ctx); err != nil {
		t.Fatal(err)
	}
	return sc
}

// open describes out's producers and returns those with a transaction
// open.
func (sc *searchCluster) open(t *testing.T) []kadm.DescribedProducer {
	t.Helper()
	described, err := sc.adm.DescribeProducers(context.Background(), kadm.TopicsSet{"out": {0: {}}})
	if err != nil {
		t.Fatal(err)
	}
	var open []kadm.DescribedProducer
	described.EachProducer(func(p kadm.DescribedProducer) {
		if p.CurrentTxnStartOffset >= 0 {
			open = append(open, p)
		}
	})
	if len(open) != 1 {
		t.Fatalf("out/0 has open transactions %+v, want the test's one", open)
	}
	return open
}

// coordinatorSays makes the coordinators describe every transactional id
// at the open producer id, at epoch in state, and counts the answers.
func (sc *searchCluster) coordinatorSays(epoch int16, state string) *int {
	asked := 0
	sc.c.ControlKey(int16(kmsg.DescribeTransactions), func(kr kmsg.Request) (kmsg.Response, error, bool) {
		sc.c.KeepControl()
		asked++
		req := kr.(*kmsg.DescribeTransactionsRequest)
		resp := req.ResponseKind().(*kmsg.DescribeTransactionsResponse)
		for _, id := range req.TransactionalIDs {
			st := kmsg.NewDescribeTransactionsResponseTransactionState()
			st.TransactionalID, st.State, st.TimeoutMillis, st.StartTimestamp = id, state, 60000, -1
			st.ProducerID, st.ProducerEpoch = sc.pid, epoch
			resp.TransactionStates = append(resp.TransactionStates, st)
		}
		return resp, nil, true
	})
	return &asked
}

// A transaction whose coordinator has moved on (a later epoch, not
// preparing) hangs at once; one epoch on in CompleteCommit, the
// coordinator proves it committed. The app's facts limit the search to
// its own transactional ids; no facts judge every id. Once a marker ends
// it after all, StillOpen drops it.
func TestFindHangingCoordinatorMovedOn(t *testing.T) {
	sc := newSearchCluster(t, 1, "app:2")
	ctx := context.Background()
	open := sc.open(t)
	if got, err := sc.f.FindHanging(ctx, Facts{AppID: "app"}, open); err != nil || len(got) != 0 {
		t.Fatalf("a transaction its coordinator tracks: %+v, %v; want none", got, err)
	}
	asked := sc.coordinatorSays(sc.epoch+1, "CompleteCommit")
	for _, tc := range []struct {
		appID string
		want  int
	}{{"app", 1}, {"", 1}, {"other", 0}} {
		*asked = 0
		got, err := sc.f.FindHanging(ctx, Facts{AppID: tc.appID}, open)
		if err != nil || len(got) != tc.want {
			t.Fatalf("app %q: %+v, %v; want %d", tc.appID, got, err, tc.want)
		}
		if (*asked > 0) != (tc.want > 0) {
			t.Fatalf("app %q: coordinators described %d times; another app's ids must not be, the app's must", tc.appID, *asked)
		}
		if tc.want == 0 {
			continue
		}
		h := got[0]
		if h.TxnID != "app:2" || h.Current != sc.epoch+1 || h.Verdict.Outcome != Committed || !strings.Contains(h.Reason, "writes it no marker") {
			t.Fatalf("app %q: got %+v, want app:2's transaction, proven committed by its coordinator one epoch on", tc.appID, h)
		}
	}
	left, err := sc.f.FindHanging(ctx, Facts{AppID: "app", ActsOn: func(Hanging) bool { return false }}, open)
	if err != nil || len(left) != 1 || left[0].Verdict.Proven() || !strings.Contains(left[0].Reason, "left to an operator") {
		t.Fatalf("a caller that does not act on it: %+v, %v; want it listed unproven, its proof in the reason", left, err)
	}
	got, _ := sc.f.FindHanging(ctx, Facts{AppID: "app"}, open)
	if still, err := StillOpen(ctx, sc.adm, got); err != nil || len(still) != 1 {
		t.Fatalf("StillOpen before any marker: %+v, %v; want the transaction", still, err)
	}
	// The coordinator was only slow: its marker comes now.
	if err := sc.txn.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	if still, err := StillOpen(ctx, sc.adm, got); err != nil || len(still) != 0 {
		t.Fatalf("StillOpen after the marker: %+v, %v; want none", still, err)
	}
}

// A transaction of an instance that runs again (in the group, its
// coordinator in a new session) that no evidence decides is left to that
// instance; of one that does not run, it is reported, unproven. The group
// is asked only where that decides.
func TestFindHangingLeavesARunningInstanceItsTransaction(t *testing.T) {
	sc := newSearchCluster(t, 1, "app:2")
	ctx := context.Background()
	open := sc.open(t)
	sc.coordinatorSays(sc.epoch+2, "Empty")
	for _, tc := range []struct {
		running map[string]bool
		want    int
	}{{map[string]bool{"2": true}, 0}, {map[string]bool{"3": true}, 1}} {
		asked := 0
		facts := Facts{AppID: "app", Instances: func(context.Context) map[string]bool { asked++; return tc.running }}
		got, err := sc.f.FindHanging(ctx, facts, open)
		if err != nil || len(got) != tc.want || asked != 1 {
			t.Fatalf("running %v: %+v, %v, group asked %d times; want %d, asked once", tc.running, got, err, asked, tc.want)
		}
		if tc.want == 1 && got[0].Verdict.Proven() {
			t.Fatalf("verdict %+v: nothing proves how it ended", got[0].Verdict)
		}
	}
}

// A transaction whose producer id no coordinator lists hangs only once
// its producer last wrote longer ago than any transaction may stay open,
// and only when every coordinator answered the listing: a producer id
// that a coordinator which failed to answer might list is not judged.
func TestFindHangingUnlistedProducer(t *testing.T) {
	sc := newSearchCluster(t, 2, "app:2")
	ctx := context.Background()
	open := sc.open(t)
	failOn := int32(-1)
	answers, failed := 0, 0
	sc.c.ControlKey(int16(kmsg.ListTransactions), func(kr kmsg.Request) (kmsg.Response, error, bool) {
		sc.c.KeepControl()
		answers++
		resp := kr.ResponseKind().(*kmsg.ListTransactionsResponse)
		if sc.c.CurrentNode() == failOn {
			failed++
			resp.ErrorCode = kerr.UnknownServerError.Code
		}
		return resp, nil, true // lists nothing: the producer id is forgotten
	})
	later := time.Now().Add(time.Hour)
	if got, err := sc.f.FindHanging(ctx, Facts{AppID: "app", Now: time.Now()}, open); err != nil || len(got) != 0 {
		t.Fatalf("a young transaction no coordinator lists: %+v, %v; want none", got, err)
	}
	got, err := sc.f.FindHanging(ctx, Facts{AppID: "app", Now: later}, open)
	if err != nil || len(got) != 1 || got[0].TxnID != "" || got[0].Current != sc.epoch+2 || !strings.Contains(got[0].Reason, "no transactional id") {
		t.Fatalf("an old transaction no coordinator lists: %+v, %v; want it, at current epoch %d", got, err, sc.epoch+2)
	}
	if answers < 2 {
		t.Fatalf("%d brokers answered the listing: want both, the test proves nothing", answers)
	}
	failOn = 0 // the first broker
	got, err = sc.f.FindHanging(ctx, Facts{AppID: "app", Now: later}, open)
	if failed == 0 || !errors.Is(err, kerr.UnknownServerError) || len(got) != 0 {
		t.Fatalf("a listing one coordinator failed (%d failures): %+v, %v; want none and the error", failed, got, err)
	}
}
