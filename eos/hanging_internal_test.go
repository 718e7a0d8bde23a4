package eos

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/eosflow/eosflow/codec"
	"github.com/eosflow/eosflow/config"
	"github.com/eosflow/eosflow/internal/txnrepair"
	"github.com/eosflow/eosflow/tools/kafkatest"
	"github.com/eosflow/eosflow/topology"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest"
	"go.uber.org/zap/zaptest/observer"
)

// An instance with only the least-privilege grants cannot look for its
// hanging transactions on __consumer_offsets; the stall it may then meet
// must say which grants, or which admin commands, would end it, instead
// of blaming an open transaction alone.
func TestHangingRepairNamesMissingGrants(t *testing.T) {
	lit := kmsg.ACLResourcePatternTypeLiteral
	allow := func(r kmsg.ACLResourceType, name string, op kmsg.ACLOperation) kfake.ACL {
		return kfake.ACL{Resource: r, Name: name, Pattern: lit, Operation: op, Allow: true}
	}
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "in", "out"), kfake.EnableSASL(), kfake.EnableACLs(),
		kfake.Superuser(config.SASLScramSHA512, "admin", "admin-secret"),
		kfake.User(config.SASLScramSHA512, "app-user", "app-secret",
			allow(kmsg.ACLResourceTypeTopic, "in", kmsg.ACLOperationRead),
			allow(kmsg.ACLResourceTypeTopic, "out", kmsg.ACLOperationWrite),
			allow(kmsg.ACLResourceTypeGroup, "app", kmsg.ACLOperationRead)))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for _, tc := range []struct {
		user, password string
		denied         bool
	}{{"app-user", "app-secret", true}, {"admin", "admin-secret", false}} {
		t.Run(tc.user, func(t *testing.T) {
			cfg := config.Default()
			cfg.Brokers, cfg.AppID, cfg.InstanceID = c.ListenAddrs(), "app", "1"
			cfg.SASL = config.SASL{Mechanism: config.SASLScramSHA512, Username: tc.user, Password: tc.password}
			r := hangingRunner(t, cfg)
			r.hanging.pid, r.hanging.pidEpoch = 1, 1
			if n := r.hanging.repairHanging(context.Background()); n != 0 {
				t.Fatalf("aborted %d transactions where none hang", n)
			}
			if !tc.denied {
				if r.hanging.denied != "" {
					t.Fatalf("a super user was told: %s", r.hanging.denied)
				}
				return
			}
			for _, want := range []string{"__consumer_offsets", "eosctl txn hanging", "eosctl txn abort"} {
				if !strings.Contains(r.hanging.denied, want) {
					t.Errorf("%q does not name %q", r.hanging.denied, want)
				}
			}
		})
	}
}

// A transaction that an instance of this app left open on a partition it
// writes, and that its coordinator no longer tracks (it moved to a newer
// epoch without writing the partition a marker: markers a restarting
// broker skipped), hangs: read_committed readers of the partition, and
// restores of a changelog, wait for it for good. repairHanging commits
// it where the coordinator, one epoch on in CompleteCommit, proves it
// committed, and leaves it open, noted as unproven, where nothing proves
// its outcome. A transaction that is merely open, whose
// coordinator still tracks it, is left alone, and so is one of another
// app's producer.
func TestAbortHangingOrphanedTransactionOfTheApp(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "in", "out"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx := context.Background()
	var otherCl *kgo.Client
	open := func(txnID string) (int64, int16) {
		cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.TransactionalID(txnID), kgo.DefaultProduceTopic("out"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(cl.Close)
		if txnID == "other-app:gone" {
			otherCl = cl
		}
		if err := cl.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte(txnID)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
		id, epoch, err := cl.ProducerID(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return id, epoch
	}
	gonePID, goneEpoch := open("app:gone")
	otherPID, _ := open("other-app:gone")
	donePID, doneEpoch := open("app:committed")

	cfg := config.Default()
	cfg.Brokers, cfg.AppID, cfg.InstanceID = c.ListenAddrs(), "app", "1"
	r := hangingRunner(t, cfg)
	r.hanging.pid, r.hanging.pidEpoch = gonePID+otherPID+donePID+1, 1 // another producer
	lso := func() (stable, end int64) {
		adm := kadm.NewClient(r.admin)
		s, err1 := adm.ListCommittedOffsets(ctx, "out")
		e, err2 := adm.ListEndOffsets(ctx, "out")
		if err1 != nil || err2 != nil {
			t.Fatal(err1, err2)
		}
		so, _ := s.Lookup("out", 0)
		eo, _ := e.Lookup("out", 0)
		return so.Offset, eo.Offset
	}

	if n := r.hanging.repairHanging(ctx); n != 0 {
		t.Fatalf("aborted %d transactions that their coordinators still track", n)
	}
	// The coordinators now say both producers moved on, as after skipped
	// markers; only the app's own is aborted.
	described := 0
	c.ControlKey(int16(kmsg.DescribeTransactions), func(kr kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		described++
		req := kr.(*kmsg.DescribeTransactionsRequest)
		resp := req.ResponseKind().(*kmsg.DescribeTransactionsResponse)
		for _, id := range req.TransactionalIDs {
			st := kmsg.NewDescribeTransactionsResponseTransactionState()
			st.TransactionalID, st.State, st.TimeoutMillis, st.StartTimestamp = id, "Empty", 60000, -1
			st.ProducerID, st.ProducerEpoch = gonePID, goneEpoch+3
			switch id {
			case "other-app:gone":
				st.ProducerID = otherPID
			case "app:committed":
				st.ProducerID, st.ProducerEpoch, st.State = donePID, doneEpoch+1, "CompleteCommit"
			}
			resp.TransactionStates = append(resp.TransactionStates, st)
		}
		return resp, nil, true
	})
	if s, e := lso(); s != 0 || e != 3 {
		t.Fatalf("out's last stable offset %d, end %d: want 0 and 3, held back by the three open transactions", s, e)
	}
	if n := r.hanging.repairHanging(ctx); n != 1 {
		t.Fatalf("ended %d transactions, want the app's orphan whose coordinator proves it committed", n)
	}
	if described == 0 {
		t.Fatal("the coordinators were never asked: the test proves nothing")
	}
	// The orphans wrote offsets 0 and 2, the other app's open transaction
	// offset 1. Nothing proves how app:gone's ended (its coordinator is
	// three epochs on): it stays open and holds the last stable offset.
	assertLeftOpen(t, r, "out", 0, 0)
	if len(r.hanging.unproven) != 1 || r.hanging.unproven[0].TransactionalID != "app:gone" {
		t.Fatalf("unproven %v, want app:gone's transaction alone", r.hanging.unproven)
	}
	// An operator who learned that app:gone's aborted ends it; once the
	// other app's transaction is gone too, read_committed sees the
	// committed orphan's record, and not the others'.
	if _, err := kadm.NewClient(r.admin).WriteTxnMarkers(ctx, kadm.TxnMarkers{ProducerID: gonePID, ProducerEpoch: goneEpoch,
		Topics: kadm.TopicsSet{"out": {0: {}}}}); err != nil {
		t.Fatal(err)
	}
	if st, _ := lso(); st != 1 {
		t.Fatalf("out's last stable offset is %d after the repair and the operator's abort, want 1: an orphan still holds it back, or the other app's transaction was ended too", st)
	}
	if err := otherCl.AbortBufferedRecords(ctx); err != nil {
		t.Fatal(err)
	}
	if err := otherCl.EndTransaction(ctx, kgo.TryAbort); err != nil {
		t.Fatal(err)
	}
	got := readCommittedOut(t, c, 5*time.Second)
	if len(got) != 1 || got[0] != "app:committed" {
		t.Fatalf("read_committed got %q, want only the record of the transaction its coordinator committed", got)
	}
}

// hangingRunner is a Runner of an in → out pipeline with cfg, an admin
// client and a test logger, enough to call abortHanging.
func hangingRunner(t *testing.T, cfg config.Config) *Runner {
	t.Helper()
	top := topology.New()
	topology.To(topology.Source(top, "in", codec.Bytes()), "out", codec.Bytes())
	r, err := New(cfg, top)
	if err != nil {
		t.Fatal(err)
	}
	r.log = zaptest.NewLogger(t)
	r.hanging.log = r.log
	opts, err := cfg.KgoOpts()
	if err != nil {
		t.Fatal(err)
	}
	if r.admin, err = kgo.NewClient(opts...); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.admin.Close)
	return r
}

// A transaction of this instance's own previous session that a partition
// still holds open after InitProducerId (a restarting broker skipped its
// marker) is completed only with the outcome that the coordinator, asked
// before InitProducerId, proved: one epoch on under transaction version
// 2, committing (COMMIT) or aborting (ABORT). Aborting a committed one
// would drop, say, the input offsets of outputs that are visible, so the
// batch would run again. Without proof it stays open, the session waits
// (a HangingError naming it) rather than write into it, and nothing is
// guessed. The proof outlives a session whose repair did not happen: the
// next session's coordinator answer (Empty, after InitProducerId) proves
// nothing, and must not erase it.
func TestAbortHangingOwnTransactionCommittedByItsCoordinator(t *testing.T) {
	for _, tc := range []struct {
		name    string
		state   string // the coordinator's answer; "" for none
		bump    int16  // its epoch over the open transaction's
		v1      bool   // transaction.version 1 (no epoch bump per EndTxn)
		rebuild bool   // a second session describes again before the repair
		visible bool
		// unproven: nothing proves the outcome, so it must stay open
		unproven bool
	}{
		{name: "complete commit one epoch on", state: "CompleteCommit", bump: 1, visible: true},
		{name: "prepare commit one epoch on", state: "PrepareCommit", bump: 1, visible: true},
		{name: "proof kept across a rebuild", state: "CompleteCommit", bump: 1, rebuild: true, visible: true},
		{name: "complete abort one epoch on", state: "CompleteAbort", bump: 1},
		{name: "prepare abort one epoch on", state: "PrepareAbort", bump: 1},
		{name: "complete commit two epochs on", state: "CompleteCommit", bump: 2, unproven: true},
		{name: "complete commit one epoch on under version 1", state: "CompleteCommit", bump: 1, v1: true, unproven: true},
		{name: "ongoing at its own epoch", state: "Ongoing", bump: 0, unproven: true},
		{name: "no answer", state: "", unproven: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, cl, pid, epoch := openTxnOnKfake(t, "app:1")
			ctx := context.Background()
			if tc.v1 {
				downgradeTxnVersion(t, cl)
			}

			cfg := config.Default()
			cfg.Brokers, cfg.AppID, cfg.InstanceID = c.ListenAddrs(), "app", "1"
			r := hangingRunner(t, cfg)
			asked, state, coordEpoch := 0, tc.state, epoch+tc.bump
			c.ControlKey(int16(kmsg.DescribeTransactions), func(kr kmsg.Request) (kmsg.Response, error, bool) {
				c.KeepControl()
				req := kr.(*kmsg.DescribeTransactionsRequest)
				resp := req.ResponseKind().(*kmsg.DescribeTransactionsResponse)
				for _, id := range req.TransactionalIDs {
					st := kmsg.NewDescribeTransactionsResponseTransactionState()
					st.TransactionalID, st.TimeoutMillis, st.StartTimestamp = id, 60000, -1
					if id != "app:1" || state == "" {
						st.ErrorCode = kerr.TransactionalIDNotFound.Code
					} else {
						asked++
						st.State, st.ProducerID, st.ProducerEpoch = state, pid, coordEpoch
					}
					resp.TransactionStates = append(resp.TransactionStates, st)
				}
				return resp, nil, true
			})
			r.hanging.noteOwnTxn(ctx)
			if tc.state != "" && asked == 0 {
				t.Fatal("the coordinator was never asked: the test proves nothing")
			}
			r.hanging.pid, r.hanging.pidEpoch = pid, coordEpoch+1 // after InitProducerId
			if tc.rebuild {
				// The first session's repair failed; the next one finds
				// the coordinator moved on by its InitProducerId.
				state, coordEpoch = "Empty", r.hanging.pidEpoch
				r.hanging.noteOwnTxn(ctx)
				r.hanging.pidEpoch++
			}
			if tc.unproven {
				if n := r.hanging.repairHanging(ctx); n != 0 {
					t.Fatalf("ended %d transactions whose outcome nothing proves, want 0", n)
				}
				assertLeftOpen(t, r, "out", 0, 0)
				var herr *HangingError
				if err := r.hanging.ownUnproven(); !errors.As(err, &herr) || !isRebuildable(err) || !strings.Contains(err.Error(), `"app:1"`) ||
					!strings.Contains(err.Error(), "eosctl txn hanging --topic out --partition 0") {
					t.Fatalf("the session goes on, or waits without naming the transaction and the command: %v", err)
				}
				return
			}
			if n := r.hanging.repairHanging(ctx); n != 1 {
				t.Fatalf("ended %d transactions, want the one left open", n)
			}
			if err := r.hanging.ownUnproven(); err != nil {
				t.Fatalf("the session waits after the repair completed the transaction: %v", err)
			}
			adm := kadm.NewClient(r.admin)
			so, err := adm.ListCommittedOffsets(ctx, "out")
			if err != nil {
				t.Fatal(err)
			}
			if o, _ := so.Lookup("out", 0); o.Offset != 2 {
				t.Fatalf("out's last stable offset is %d, want 2 (record and marker): the transaction still hangs", o.Offset)
			}
			got := len(readCommittedOut(t, c, 2*time.Second))
			if visible := got == 1; visible != tc.visible {
				t.Fatalf("read_committed sees %d records, want the transaction visible=%v", got, tc.visible)
			}
		})
	}
}

// assertLeftOpen fails t unless r's last repair left the transaction
// that starts at start on topic/partition open, and noted it as unproven:
// the partition's last stable offset is still held there.
func assertLeftOpen(t *testing.T, r *Runner, topic string, partition int32, start int64) {
	t.Helper()
	if !slices.ContainsFunc(r.hanging.unproven, func(h HangingTxn) bool {
		return h.Topic == topic && h.Partition == partition && h.StartOffset == start
	}) {
		t.Fatalf("the repair did not note the unproven transaction at %s/%d offset %d: %v", topic, partition, start, r.hanging.unproven)
	}
	so, err := kadm.NewClient(r.admin).ListCommittedOffsets(context.Background(), topic)
	if err != nil {
		t.Fatal(err)
	}
	if o, _ := so.Lookup(topic, partition); o.Offset != start {
		t.Fatalf("%s/%d's last stable offset is %d, want %d: a transaction whose outcome nothing proves was ended", topic, partition, o.Offset, start)
	}
}

// downgradeTxnVersion finalizes transaction.version 0 on cl's cluster.
func downgradeTxnVersion(t *testing.T, cl *kgo.Client) {
	t.Helper()
	req := kmsg.NewPtrUpdateFeaturesRequest()
	fu := kmsg.NewUpdateFeaturesRequestFeatureUpdate()
	fu.Feature, fu.MaxVersionLevel, fu.AllowDowngrade, fu.UpgradeType = "transaction.version", 0, true, 2
	req.FeatureUpdates = append(req.FeatureUpdates, fu)
	resp, err := req.RequestWith(context.Background(), cl)
	if err != nil {
		t.Fatal(err)
	}
	if resp.ErrorCode != 0 {
		t.Fatalf("downgrading transaction.version: %v", kerr.ErrorForCode(resp.ErrorCode))
	}
	for _, r := range resp.Results {
		if r.ErrorCode != 0 {
			t.Fatalf("downgrading %s: %v", r.Feature, kerr.ErrorForCode(r.ErrorCode))
		}
	}
}

// The coordinator's answer proves a commit only while it still describes
// the previous session's last transaction: a session asks for it before
// its InitProducerId, which moves the coordinator on to a new epoch.
func TestSessionReadsOwnTransactionBeforeInitProducerID(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "in", "out"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var (
		mu    sync.Mutex
		order []string
	)
	note := func(what string) {
		mu.Lock()
		defer mu.Unlock()
		if !slices.Contains(order, what) {
			order = append(order, what)
		}
	}
	c.ControlKey(int16(kmsg.InitProducerID), func(kr kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		if id := kr.(*kmsg.InitProducerIDRequest).TransactionalID; id != nil && *id == "app:1" {
			note("InitProducerId")
		}
		return nil, nil, false
	})
	c.ControlKey(int16(kmsg.DescribeTransactions), func(kr kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		if slices.Contains(kr.(*kmsg.DescribeTransactionsRequest).TransactionalIDs, "app:1") {
			note("DescribeTransactions")
		}
		return nil, nil, false
	})
	cfg := config.Default()
	cfg.Brokers, cfg.AppID, cfg.InstanceID = c.ListenAddrs(), "app", "1"
	r := hangingRunner(t, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	for ctx.Err() == nil {
		mu.Lock()
		n := len(order)
		mu.Unlock()
		if n == 2 {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil && !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if !slices.Equal(order, []string{"DescribeTransactions", "InitProducerId"}) {
		t.Fatalf("requests for app:1 came in the order %v, want DescribeTransactions first", order)
	}
}

// A transaction another instance of the app left open is its own to end
// while that instance runs again and its coordinator has moved on to a
// new session (Empty or Ongoing): only it knows, from before its
// InitProducerId, whether the transaction committed, and an abort from
// here could drop the offsets of a committed batch.
func TestAbortHangingLeavesALiveInstanceItsOwnTransaction(t *testing.T) {
	c, _, pid, epoch := openTxnOnKfake(t, "app:2")
	ctx := context.Background()
	kafkatest.CoordinatorSays(c, pid, epoch+2, "Empty")
	cfg := config.Default()
	cfg.Brokers, cfg.AppID, cfg.InstanceID = c.ListenAddrs(), "app", "1"
	r := hangingRunner(t, cfg)
	r.hanging.pid, r.hanging.pidEpoch = pid+1, 1

	member, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.ConsumerGroup("app"), kgo.InstanceID("2"), kgo.ConsumeTopics("in"))
	if err != nil {
		t.Fatal(err)
	}
	defer member.Close()
	jctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	for !r.hanging.groupInstances(jctx)["2"] {
		if jctx.Err() != nil {
			t.Fatal("instance 2 never joined the group: the test proves nothing")
		}
		pctx, pcancel := context.WithTimeout(jctx, 200*time.Millisecond)
		member.PollFetches(pctx) // joins on the first poll
		pcancel()
	}
	if n := r.hanging.repairHanging(ctx); n != 0 {
		t.Fatalf("ended %d transactions of a running instance, want 0: it decides them itself", n)
	}
}

// openTxnOnKfake starts a cluster with topics in and out, and leaves a
// transaction of txnID open on out with one record in it, as a producer
// that died (or whose marker was skipped) leaves it.
func openTxnOnKfake(t *testing.T, txnID string) (c *kfake.Cluster, cl *kgo.Client, pid int64, epoch int16) {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "in", "out"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	ctx := context.Background()
	cl, err = kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.TransactionalID(txnID), kgo.DefaultProduceTopic("out"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	if err := cl.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("batch")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if pid, epoch, err = cl.ProducerID(ctx); err != nil {
		t.Fatal(err)
	}
	return c, cl, pid, epoch
}

// readCommittedOut reads out from its start as a read_committed consumer
// until a record arrives or wait passes, and returns the values read.
func readCommittedOut(t *testing.T, c *kfake.Cluster, wait time.Duration) []string {
	t.Helper()
	rd := committedReader(t, c)
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	var got []string
	for len(got) == 0 && ctx.Err() == nil {
		rd.PollFetches(ctx).EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
	}
	return got
}

// A transaction left open on one partition (its marker skipped by a
// restarting broker), whose producer has since ended a later transaction,
// so that its coordinator no longer says how this one ended, gets the
// marker the coordinator wrote on the transaction's other partitions:
// COMMIT keeps the records (say, the input offsets of outputs that are
// visible), ABORT drops them, and with no marker of that transaction
// anywhere it stays open, noted as unproven. This holds whether the
// repair runs in another instance or in the producer's own next session.
// Always aborting fails the COMMIT cases, and so does reading any epoch
// but the next one as the marker's.
func TestAbortHangingFollowsTheMarkerOnItsOtherPartitions(t *testing.T) {
	for _, tc := range []struct {
		name    string
		marker  string // written by the coordinator on out/1; "" for none
		own     bool   // the repairing instance is the producer's own
		after   int    // records other producers write to out/1 after the marker
		fail    bool   // the first repair's reads fail: it must leave the transaction
		visible bool
		// unproven: no marker of this transaction; it must stay open
		unproven bool
		// rolled: no coordinator lists the producer id (its
		// transactional id has a new one), last written this long ago
		rolled time.Duration
	}{
		{name: "commit elsewhere, another instance repairs", marker: "COMMIT", visible: true},
		{name: "abort elsewhere, another instance repairs", marker: "ABORT"},
		{name: "no marker anywhere, another instance repairs", unproven: true},
		{name: "commit elsewhere, own next session repairs", marker: "COMMIT", own: true, visible: true},
		{name: "abort elsewhere, own next session repairs", marker: "ABORT", own: true},
		{name: "a later transaction's commit elsewhere", marker: "COMMIT-LATER", unproven: true},
		{name: "commit far back elsewhere", marker: "COMMIT", after: 3000, visible: true},
		{name: "reads fail, then succeed", marker: "COMMIT", fail: true, visible: true},
		{name: "producer id rolled over, commit elsewhere", marker: "COMMIT", rolled: 20 * time.Minute, visible: true},
		{name: "producer id rolled over, no marker anywhere", rolled: 20 * time.Minute, unproven: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(2, "in", "out"))
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			ctx := context.Background()
			txnID := "app:2"
			if tc.own {
				txnID = "app:1"
			}
			cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.TransactionalID(txnID),
				kgo.DefaultProduceTopic("out"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
			if err != nil {
				t.Fatal(err)
			}
			defer cl.Close()
			if err := cl.BeginTransaction(); err != nil {
				t.Fatal(err)
			}
			if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("hanging"), Partition: 0}, &kgo.Record{Value: []byte("elsewhere"), Partition: 1}).FirstErr(); err != nil {
				t.Fatal(err)
			}
			pid, epoch, err := cl.ProducerID(ctx)
			if err != nil {
				t.Fatal(err)
			}

			cfg := config.Default()
			cfg.Brokers, cfg.AppID, cfg.InstanceID = c.ListenAddrs(), "app", "1"
			r := hangingRunner(t, cfg)
			adm := kadm.NewClient(r.admin)
			markerEpoch := epoch + 1
			if tc.marker == "COMMIT-LATER" {
				markerEpoch++ // the marker of the next transaction, not this one's
			}
			if tc.marker != "" {
				resp, err := adm.WriteTxnMarkers(ctx, kadm.TxnMarkers{ProducerID: pid, ProducerEpoch: markerEpoch,
					Commit: tc.marker != "ABORT", Topics: kadm.TopicsSet{"out": {1: {}}}})
				if err != nil {
					t.Fatal(err)
				}
				resp.EachPartition(func(p kadm.TxnMarkersPartitionResponse) {
					if p.Err != nil {
						t.Fatal(p.Err)
					}
				})
			}
			if tc.after > 0 {
				// Records of others after the marker: the search reads
				// back over them in growing windows.
				other, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.DefaultProduceTopic("out"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
				if err != nil {
					t.Fatal(err)
				}
				recs := make([]*kgo.Record, tc.after)
				for i := range recs {
					recs[i] = &kgo.Record{Value: []byte("other"), Partition: 1}
				}
				err = other.ProduceSync(ctx, recs...).FirstErr()
				other.Close()
				if err != nil {
					t.Fatal(err)
				}
			}
			// The coordinator has ended a later transaction of the
			// producer (an abort): it says nothing of this one.
			kafkatest.CoordinatorSays(c, pid, epoch+2, "CompleteAbort")
			if tc.rolled > 0 {
				c.ControlKey(int16(kmsg.ListTransactions), func(kr kmsg.Request) (kmsg.Response, error, bool) {
					c.KeepControl()
					return kr.ResponseKind(), nil, true
				})
			}
			// Partitions report their producers as Kafka's do: out/0
			// still holds the transaction open; out/1 has the marker's
			// epoch, or holds the transaction open too without one.
			described := 0
			c.ControlKey(int16(kmsg.DescribeProducers), func(kr kmsg.Request) (kmsg.Response, error, bool) {
				c.KeepControl()
				described++
				req := kr.(*kmsg.DescribeProducersRequest)
				resp := req.ResponseKind().(*kmsg.DescribeProducersResponse)
				for _, rt := range req.Topics {
					st := kmsg.NewDescribeProducersResponseTopic()
					st.Topic = rt.Topic
					for _, p := range rt.Partitions {
						sp := kmsg.NewDescribeProducersResponseTopicPartition()
						sp.Partition = p
						if rt.Topic == "out" {
							ap := kmsg.NewDescribeProducersResponseTopicPartitionActiveProducer()
							ap.ProducerID, ap.ProducerEpoch, ap.LastSequence, ap.CurrentTxnStartOffset = pid, int32(epoch), 0, 0
							if tc.rolled > 0 {
								ap.LastTimestamp = time.Now().Add(-tc.rolled).UnixMilli()
							}
							if p == 1 && tc.marker != "" {
								ap.ProducerEpoch, ap.CurrentTxnStartOffset = int32(markerEpoch), -1
							}
							sp.ActiveProducers = append(sp.ActiveProducers, ap)
						}
						st.Partitions = append(st.Partitions, sp)
					}
					resp.Topics = append(resp.Topics, st)
				}
				return resp, nil, true
			})
			if tc.own {
				r.hanging.pid, r.hanging.pidEpoch = pid, epoch+3 // after InitProducerId; nothing proved before it
			} else {
				r.hanging.pid, r.hanging.pidEpoch = pid+1, 1
			}
			if tc.fail {
				// Fetches fail while the first repair searches: it cannot
				// tell a commit from nothing, and must not abort.
				var failing atomic.Bool
				var failed atomic.Int32
				failing.Store(true)
				c.ControlKey(int16(kmsg.Fetch), func(kr kmsg.Request) (kmsg.Response, error, bool) {
					c.KeepControl()
					if !failing.Load() {
						return nil, nil, false
					}
					failed.Add(1)
					return nil, errors.New("injected fetch failure"), true
				})
				if n := r.hanging.repairHanging(ctx); n != 0 {
					t.Fatalf("ended %d transactions while it could not read how they ended, want 0", n)
				}
				if failed.Load() == 0 {
					t.Fatal("no fetch failed: the test proves nothing")
				}
				failing.Store(false)
			}
			if tc.unproven {
				if n := r.hanging.repairHanging(ctx); n != 0 {
					t.Fatalf("ended %d transactions whose outcome no marker proves, want 0", n)
				}
				if described == 0 {
					t.Fatal("the partitions' producers were never described: the test proves nothing")
				}
				assertLeftOpen(t, r, "out", 0, 0)
				return
			}
			if n := r.hanging.repairHanging(ctx); n != 1 {
				t.Fatalf("ended %d transactions, want 1", n)
			}
			if described == 0 {
				t.Fatal("the partitions' producers were never described: the test proves nothing")
			}
			// A proven outcome is written at the next epoch: a later
			// search reads it as this transaction's.
			if got, wantEpoch := lastMarkerEpoch(t, c, "out", 0), epoch+1; got != wantEpoch {
				t.Fatalf("the repair's marker on out/0 has epoch %d, want %d (open transaction at %d)", got, wantEpoch, epoch)
			}
			rd, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.ConsumeTopics("out"),
				kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchIsolationLevel(kgo.ReadCommitted()))
			if err != nil {
				t.Fatal(err)
			}
			defer rd.Close()
			end, err := adm.ListEndOffsets(ctx, "out")
			if err != nil {
				t.Fatal(err)
			}
			// Read until each partition's last stable offset is its end:
			// the repair's markers are in.
			stable, err := adm.ListCommittedOffsets(ctx, "out")
			if err != nil {
				t.Fatal(err)
			}
			stable.Each(func(o kadm.ListedOffset) {
				if e, _ := end.Lookup(o.Topic, o.Partition); o.Offset != e.Offset {
					t.Fatalf("out/%d is stable up to %d of %d: a transaction still hangs", o.Partition, o.Offset, e.Offset)
				}
			})
			// A visible record is waited for; an invisible one is given
			// 2s to show up wrongly, after the partitions are stable.
			var got []string
			wait := 2 * time.Second
			if tc.visible {
				wait = 15 * time.Second
			}
			rctx, cancel := context.WithTimeout(ctx, wait)
			defer cancel()
			for rctx.Err() == nil && !(tc.visible && slices.Contains(got, "hanging")) {
				rd.PollFetches(rctx).EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
			}
			if visible := slices.Contains(got, "hanging"); visible != tc.visible {
				t.Fatalf("read_committed got %q: want the hanging partition's record visible=%v", got, tc.visible)
			}
		})
	}
}

// A transaction whose every marker a restarting broker skipped leaves no
// marker anywhere to read, but its coordinator logged the decision in
// __transaction_state before sending any: the repair follows the log
// (PrepareCommit at the next epoch: COMMIT; PrepareAbort: ABORT), and
// leaves it open, noted as unproven, when the log has nothing that
// decides that transaction.
func TestAbortHangingReadsTheTransactionLog(t *testing.T) {
	for _, tc := range []struct {
		name    string
		states  []kmsg.TransactionState // logged at the next epoch, after Ongoing at the open one
		other   bool                    // logged for another transactional id
		v1      bool                    // logged for a producer on transaction version 1
		later   bool                    // logged two epochs on (a later transaction's)
		visible bool
		// unproven: nothing logged decides it; it must stay open
		unproven bool
	}{
		{name: "prepare and complete commit", states: []kmsg.TransactionState{kmsg.TransactionStatePrepareCommit, kmsg.TransactionStateCompleteCommit}, visible: true},
		{name: "prepare commit only", states: []kmsg.TransactionState{kmsg.TransactionStatePrepareCommit}, visible: true},
		{name: "prepare abort", states: []kmsg.TransactionState{kmsg.TransactionStatePrepareAbort, kmsg.TransactionStateCompleteAbort}},
		{name: "another id's commit", states: []kmsg.TransactionState{kmsg.TransactionStatePrepareCommit}, other: true, unproven: true},
		{name: "commit of a producer on version 1", states: []kmsg.TransactionState{kmsg.TransactionStatePrepareCommit}, v1: true, unproven: true},
		{name: "commit two epochs on", states: []kmsg.TransactionState{kmsg.TransactionStatePrepareCommit}, later: true, unproven: true},
		{name: "nothing logged", unproven: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, _, pid, epoch := openTxnOnKfake(t, "app:2")
			ctx := context.Background()
			cfg := config.Default()
			cfg.Brokers, cfg.AppID, cfg.InstanceID = c.ListenAddrs(), "app", "1"
			r := hangingRunner(t, cfg)
			adm := kadm.NewClient(r.admin)
			const parts = 50
			if _, err := adm.CreateTopic(ctx, parts, 1, nil, "__transaction_state"); err != nil {
				t.Fatal(err)
			}
			logged := func(id string, e int16, st kmsg.TransactionState) *kgo.Record {
				k := kmsg.NewTxnMetadataKey()
				k.TransactionalID = id
				v := kmsg.NewTxnMetadataValue()
				v.Version, v.ProducerID, v.ProducerEpoch, v.State, v.TimeoutMillis, v.ClientTransactionVersion = 1, pid, e, st, 60000, 2
				if tc.v1 {
					v.ClientTransactionVersion = 1
				}
				return &kgo.Record{Topic: "__transaction_state", Partition: txnrepair.TxnLogPartition("app:2", parts), Key: k.AppendTo(nil), Value: v.AppendTo(nil)}
			}
			id := "app:2"
			if tc.other {
				id = "app:3"
			}
			recs := []*kgo.Record{logged(id, epoch, kmsg.TransactionStateOngoing)}
			next := epoch + 1
			if tc.later {
				next++
			}
			for _, st := range tc.states {
				recs = append(recs, logged(id, next, st))
			}
			// The producer's next transaction, aborted: the coordinator
			// now says nothing of the open one.
			recs = append(recs, logged(id, epoch+1, kmsg.TransactionStateOngoing), logged(id, epoch+2, kmsg.TransactionStatePrepareAbort),
				logged(id, epoch+2, kmsg.TransactionStateCompleteAbort))
			w, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
			if err != nil {
				t.Fatal(err)
			}
			err = w.ProduceSync(ctx, recs...).FirstErr()
			w.Close()
			if err != nil {
				t.Fatal(err)
			}
			kafkatest.CoordinatorSays(c, pid, epoch+2, "CompleteAbort")
			r.hanging.pid, r.hanging.pidEpoch = pid+1, 1 // another instance repairs
			if tc.unproven {
				if n := r.hanging.repairHanging(ctx); n != 0 {
					t.Fatalf("ended %d transactions whose outcome nothing logged proves, want 0", n)
				}
				assertLeftOpen(t, r, "out", 0, 0)
				return
			}
			if n := r.hanging.repairHanging(ctx); n != 1 {
				t.Fatalf("ended %d transactions, want the one left open", n)
			}
			wait := 2 * time.Second // for a record that must not show
			if tc.visible {
				wait = 15 * time.Second // returns when it shows
			}
			got := readCommittedOut(t, c, wait)
			if visible := len(got) == 1; visible != tc.visible {
				t.Fatalf("read_committed got %q: want the transaction visible=%v", got, tc.visible)
			}
		})
	}
}

// lastMarkerEpoch returns the producer epoch of the last control record
// on topic/partition, or -1 when there is none.
func lastMarkerEpoch(t *testing.T, c *kfake.Cluster, topic string, partition int32) int16 {
	t.Helper()
	ctx := context.Background()
	adm, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	defer adm.Close()
	ends, err := kadm.NewClient(adm).ListEndOffsets(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	end, _ := ends.Lookup(topic, partition)
	rd, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.KeepControlRecords(),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {partition: kgo.NewOffset().AtStart()}}))
	if err != nil {
		t.Fatal(err)
	}
	defer rd.Close()
	rctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	epoch, next := int16(-1), int64(0)
	for next < end.Offset && rctx.Err() == nil {
		rd.PollFetches(rctx).EachRecord(func(r *kgo.Record) {
			next = r.Offset + 1
			if r.Attrs.IsControl() {
				epoch = r.ProducerEpoch
			}
		})
	}
	if next < end.Offset {
		t.Fatalf("read %s/%d to %d of %d", topic, partition, next, end.Offset)
	}
	return epoch
}

// A session whose own earlier transaction hangs with no proof of its
// outcome writes nothing (Kafka would join its next transaction to the
// hanging one), waits for proof, each rebuild looking again, and past
// recovery_timeout Run returns a *HangingError naming the transaction and
// the commands that settle it; the transaction is still open. The
// restarting instance's InitProducerId is answered here one epoch on
// without the embedded broker ending the open transaction, as a broker
// that skipped its markers leaves it.
func TestRunWaitsForProofOfItsOwnHangingTransaction(t *testing.T) {
	c, _, pid, epoch := openTxnOnKfake(t, "app:1")
	var inits atomic.Int32
	c.ControlKey(int16(kmsg.InitProducerID), func(kr kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		req := kr.(*kmsg.InitProducerIDRequest)
		if req.TransactionalID == nil || *req.TransactionalID != "app:1" {
			return nil, nil, false
		}
		inits.Add(1)
		resp := req.ResponseKind().(*kmsg.InitProducerIDResponse)
		resp.ProducerID, resp.ProducerEpoch = pid, epoch+1
		return resp, nil, true
	})
	cfg := config.Default()
	cfg.Brokers, cfg.AppID, cfg.InstanceID = c.ListenAddrs(), "app", "1"
	cfg.ConnectTimeout, cfg.RecoveryTimeout = 2*time.Second, 4*time.Second
	top := topology.New()
	topology.To(topology.Source(top, "in", codec.Bytes()), "out", codec.Bytes())
	r, err := New(cfg, top, Logger(zaptest.NewLogger(t)))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err = r.Run(ctx)
	var herr *HangingError
	if !errors.As(err, &herr) || len(herr.Hanging) != 1 || herr.Hanging[0].Topic != "out" || herr.Hanging[0].StartOffset != 0 {
		t.Fatalf("Run returned %v, want a *HangingError naming out/0's transaction at offset 0", err)
	}
	for _, want := range []string{`"app:1"`, "eosctl txn hanging --topic out --partition 0", "eosctl txn commit", "eosctl txn abort"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%q does not name %q", err, want)
		}
	}
	if inits.Load() < 2 {
		t.Fatalf("InitProducerId answered %d times: the session did not wait and look again", inits.Load())
	}
	so, lerr := kadm.NewClient(newPlainClient(t, c)).ListCommittedOffsets(context.Background(), "out")
	if lerr != nil {
		t.Fatal(lerr)
	}
	if o, _ := so.Lookup("out", 0); o.Offset != 0 {
		t.Fatalf("out/0's last stable offset is %d, want 0: the unproven transaction was ended", o.Offset)
	}
}

// newPlainClient is a client of c.
func newPlainClient(t *testing.T, c *kfake.Cluster) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// A repair that cannot see a partition's producers (leaderless after a
// broker restart, say) cannot rule out that one of this instance's own
// transactions hangs there: the session waits and looks again instead of
// writing, and goes on once a look succeeds. A missing grant is not such
// a failure: it is named (see TestHangingRepairNamesMissingGrants), and
// the session goes on.
func TestSessionWaitsWhileItCannotLookForItsHangingTransactions(t *testing.T) {
	c, _, pid, epoch := openTxnOnKfake(t, "app:2")
	cfg := config.Default()
	cfg.Brokers, cfg.AppID, cfg.InstanceID = c.ListenAddrs(), "app", "1"
	cfg.ConnectTimeout = time.Second
	r := hangingRunner(t, cfg)
	r.hanging.pid, r.hanging.pidEpoch = pid+1, 1
	var failing atomic.Bool
	failing.Store(true)
	failed := failDescribeProducers(c, kerr.NotLeaderForPartition.Code, func() bool { return failing.Load() })
	ctx := context.Background()
	r.hanging.repairHanging(ctx)
	if failed.Load() == 0 {
		t.Fatal("no DescribeProducers failed: the test proves nothing")
	}
	err := r.hanging.ownUnproven()
	if err == nil || !isRebuildable(err) || !strings.Contains(err.Error(), "NOT_LEADER") {
		t.Fatalf("a session that could not look goes on, or waits without saying why: %v", err)
	}
	failing.Store(false)
	r.hanging.repairHanging(ctx)
	if err := r.hanging.ownUnproven(); err != nil {
		t.Fatalf("the session still waits after a look succeeded: %v (epoch %d)", err, epoch)
	}
}

// failDescribeProducers makes c answer every DescribeProducers with code
// on each partition while fail says so, and counts the answers it failed.
func failDescribeProducers(c *kfake.Cluster, code int16, fail func() bool) *atomic.Int32 {
	var failed atomic.Int32
	c.ControlKey(int16(kmsg.DescribeProducers), func(kr kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		if !fail() {
			return nil, nil, false
		}
		failed.Add(1)
		req := kr.(*kmsg.DescribeProducersRequest)
		resp := req.ResponseKind().(*kmsg.DescribeProducersResponse)
		for _, rt := range req.Topics {
			st := kmsg.NewDescribeProducersResponseTopic()
			st.Topic = rt.Topic
			for _, p := range rt.Partitions {
				sp := kmsg.NewDescribeProducersResponseTopicPartition()
				sp.Partition, sp.ErrorCode = p, code
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
		}
		return resp, nil, true
	})
	return &failed
}

// A look that fails for a moment (a topic just created is not yet known
// to every broker) is retried in place before the session gives up to a
// client rebuild, which under a consumer-protocol group costs a rejoin; a
// look that keeps failing still stops the session from writing.
func TestSessionLooksAgainInPlaceBeforeRebuilding(t *testing.T) {
	c, _, pid, _ := openTxnOnKfake(t, "app:2")
	cfg := config.Default()
	cfg.Brokers, cfg.AppID, cfg.InstanceID = c.ListenAddrs(), "app", "1"
	cfg.ConnectTimeout = 500 * time.Millisecond
	r := hangingRunner(t, cfg)
	r.hanging.pid, r.hanging.pidEpoch = pid+1, 1
	core, logs := observer.New(zapcore.WarnLevel)
	r.log = zap.New(core)
	r.hanging.log = r.log
	blind := func() int { return logs.FilterMessageSnippet("cannot look yet").Len() }
	var always atomic.Bool
	failed := failDescribeProducers(c, kerr.NotLeaderForPartition.Code, func() bool { return always.Load() || blind() == 0 })
	if err := r.hanging.lookBeforeWriting(context.Background()); err != nil {
		t.Fatalf("a failed look ended the session instead of looking again: %v", err)
	}
	if blind() != 1 || failed.Load() == 0 {
		t.Fatalf("%d looks could not see, %d describes failed; want 1 look: the test proves nothing", blind(), failed.Load())
	}
	always.Store(true)
	err := r.hanging.lookBeforeWriting(context.Background())
	if err == nil || !isRebuildable(err) || blind() != 1+blindLooks {
		t.Fatalf("a look that keeps failing: %v after %d blind looks; want a rebuild after %d more", err, blind(), blindLooks)
	}
}

// committedReader reads out from its start as a read_committed consumer,
// closed when the test ends.
func committedReader(t *testing.T, c *kfake.Cluster) *kgo.Client {
	t.Helper()
	rd, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.ConsumeTopics("out"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rd.Close)
	return rd
}

// A transaction of another instance of the app whose coordinator no
// longer tracks it at its own epoch (the id is Empty, not in a
// transaction, or unknown to its coordinator) hangs once its producer
// last wrote longer ago than any transaction may stay open: the repair
// notes it as waiting for proof, so that a stall names it, and ends
// nothing, as nothing proves its outcome. A younger one is not claimed:
// its coordinator may still end it. This is the rule `eosctl txn hanging`
// reports by (txnrepair.Coordinators.Classify).
func TestRepairNotesAnOrphanItsCoordinatorNoLongerTracks(t *testing.T) {
	for _, tc := range []struct {
		name    string
		state   string // "" for an id its coordinator does not know
		age     time.Duration
		claimed bool
	}{
		{"not in a transaction, old", "Empty", 20 * time.Minute, true},
		{"unknown id, old", "", 20 * time.Minute, true},
		{"not in a transaction, young", "Empty", time.Minute, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, _, pid, epoch := openTxnOnKfake(t, "app:2")
			ctx := context.Background()
			asked := 0
			c.ControlKey(int16(kmsg.DescribeTransactions), func(kr kmsg.Request) (kmsg.Response, error, bool) {
				c.KeepControl()
				asked++
				req := kr.(*kmsg.DescribeTransactionsRequest)
				resp := req.ResponseKind().(*kmsg.DescribeTransactionsResponse)
				for _, id := range req.TransactionalIDs {
					st := kmsg.NewDescribeTransactionsResponseTransactionState()
					st.TransactionalID, st.State, st.TimeoutMillis, st.StartTimestamp = id, tc.state, 60000, -1
					st.ProducerID, st.ProducerEpoch = pid, epoch
					if tc.state == "" {
						st.ErrorCode = kerr.TransactionalIDNotFound.Code
					}
					resp.TransactionStates = append(resp.TransactionStates, st)
				}
				return resp, nil, true
			})
			lastWrote(c, pid, epoch, time.Now().Add(-tc.age))
			cfg := config.Default()
			cfg.Brokers, cfg.AppID, cfg.InstanceID = c.ListenAddrs(), "app", "1"
			r := hangingRunner(t, cfg)
			r.hanging.pid, r.hanging.pidEpoch = pid+1, 1
			if n := r.hanging.repairHanging(ctx); n != 0 {
				t.Fatalf("ended %d transactions whose outcome nothing proves, want 0", n)
			}
			if asked == 0 {
				t.Fatal("the coordinator was never asked: the test proves nothing")
			}
			if !tc.claimed {
				if len(r.hanging.unproven) != 0 {
					t.Fatalf("a young transaction was claimed hanging: %v", r.hanging.unproven)
				}
				return
			}
			assertLeftOpen(t, r, "out", 0, 0)
			if r.hanging.unproven[0].TransactionalID != "app:2" {
				t.Fatalf("unproven %v, want app:2's transaction", r.hanging.unproven)
			}
		})
	}
}

// lastWrote makes c describe out/0's producers as pid at epoch holding a
// transaction open from offset 0, last written at when.
func lastWrote(c *kfake.Cluster, pid int64, epoch int16, when time.Time) {
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
				if rt.Topic == "out" && p == 0 {
					ap := kmsg.NewDescribeProducersResponseTopicPartitionActiveProducer()
					ap.ProducerID, ap.ProducerEpoch, ap.CurrentTxnStartOffset, ap.LastTimestamp = pid, int32(epoch), 0, when.UnixMilli()
					sp.ActiveProducers = append(sp.ActiveProducers, ap)
				}
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
		}
		return resp, nil, true
	})
}

// The runtime completes on its own only a transaction whose coordinator
// has moved to a later epoch, or whose producer id no coordinator lists:
// the other kinds hang by an age read from record timestamps, and a
// marker for one could land on its live producer's next transaction.
func TestOnlyMovedOnOrUnlistedTransactionsCompleteUnattended(t *testing.T) {
	p := kadm.DescribedProducer{Topic: "out", ProducerID: 7, ProducerEpoch: 3}
	for _, tc := range []struct {
		name string
		h    txnrepair.Hanging
		want bool
	}{
		{"no coordinator lists the producer id", txnrepair.Hanging{DescribedProducer: p}, true},
		{"its coordinator moved on", txnrepair.Hanging{DescribedProducer: p, TxnID: "app:2",
			Coordinator: &kadm.DescribedTransaction{ProducerID: 7, ProducerEpoch: 4, State: "Empty"}}, true},
		{"its coordinator is at its epoch, not in a transaction", txnrepair.Hanging{DescribedProducer: p, TxnID: "app:2",
			Coordinator: &kadm.DescribedTransaction{ProducerID: 7, ProducerEpoch: 3, State: "CompleteCommit"}}, false},
		{"its coordinator does not know the id", txnrepair.Hanging{DescribedProducer: p, TxnID: "app:2"}, false},
	} {
		if got := unattended(tc.h); got != tc.want {
			t.Errorf("%s: unattended = %v, want %v", tc.name, got, tc.want)
		}
	}
}
