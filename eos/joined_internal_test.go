package eos

import (
	"context"
	"errors"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/eosflow/eosflow/codec"
	"github.com/eosflow/eosflow/config"
	"github.com/eosflow/eosflow/internal/txnrepair"
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

// skipMarkerOnce makes the coordinator answer the first EndTxn that
// commit matches as done, at the next epoch, without ending it anywhere:
// as after a broker restart that made it skip the marker of out/0, the
// partition keeps the transaction open while the producer moves on. The
// next produce's connection then breaks, as the restart breaks it. It
// returns the count of EndTxns skipped and of connections broken.
func skipMarkerOnce(c *kfake.Cluster, commit bool) (skipped, broken *atomic.Int32) {
	skipped, broken = new(atomic.Int32), new(atomic.Int32)
	c.ControlKey(int16(kmsg.EndTxn), func(kr kmsg.Request) (kmsg.Response, error, bool) {
		req := kr.(*kmsg.EndTxnRequest)
		if req.Commit != commit {
			return nil, nil, false
		}
		skipped.Add(1)
		resp := req.ResponseKind().(*kmsg.EndTxnResponse)
		resp.ProducerID, resp.ProducerEpoch = req.ProducerID, req.ProducerEpoch+1
		c.ControlKey(int16(kmsg.Produce), func(kmsg.Request) (kmsg.Response, error, bool) {
			broken.Add(1)
			return nil, errors.New("the broker restarted"), true
		})
		return resp, nil, true
	})
	return skipped, broken
}

// joinRun runs an in→out pipeline over the values in, in batches of
// batchRecords, with opts, until it returns or wait passes.
func joinRun(t *testing.T, c *kfake.Cluster, batchRecords int, wait time.Duration, in []string, opts ...Option) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	return joinRunner(t, c, batchRecords, in, nil, opts...).Run(ctx)
}

// joinRunner is a Runner of an in→out pipeline over the values in, in
// batches of batchRecords, with opts; peek, if not nil, sees every
// record it processes.
func joinRunner(t *testing.T, c *kfake.Cluster, batchRecords int, in []string, peek func(*Runner, []byte), opts ...Option) *Runner {
	t.Helper()
	pl := newPlainClient(t, c)
	for _, v := range in {
		if err := pl.ProduceSync(context.Background(), &kgo.Record{Topic: "in", Value: []byte(v)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	cfg := config.Default()
	cfg.Brokers, cfg.AppID, cfg.InstanceID = c.ListenAddrs(), "app", "1"
	cfg.ConnectTimeout, cfg.RecoveryTimeout, cfg.MaxBatchRecords = 2*time.Second, 4*time.Second, batchRecords
	top := topology.New()
	var r *Runner
	src := topology.Source(top, "in", codec.Bytes())
	if peek != nil {
		src = topology.Peek(src, "peek", func(_ context.Context, _ []byte, v []byte) { peek(r, v) })
	}
	topology.To(src, "out", codec.Bytes())
	r, err := New(cfg, top, append(opts, Logger(zaptest.NewLogger(t)))...)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// committedOut is every value a read_committed consumer reads from out
// within wait.
func committedOut(t *testing.T, c *kfake.Cluster, wait time.Duration) map[string]int {
	t.Helper()
	rd := committedReader(t, c)
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	got := map[string]int{}
	for ctx.Err() == nil {
		rd.PollFetches(ctx).EachRecord(func(r *kgo.Record) { got[string(r.Value)]++ })
	}
	return got
}

// stableOut is out/0's last stable offset and end offset.
func stableOut(t *testing.T, c *kfake.Cluster) (stable, end int64) {
	t.Helper()
	adm := kadm.NewClient(newPlainClient(t, c))
	s, err1 := adm.ListCommittedOffsets(context.Background(), "out")
	e, err2 := adm.ListEndOffsets(context.Background(), "out")
	if err1 != nil || err2 != nil {
		t.Fatal(err1, err2)
	}
	so, _ := s.Lookup("out", 0)
	eo, _ := e.Lookup("out", 0)
	return so.Offset, eo.Offset
}

// A batch aborted (its offset commit failed) whose marker a restarting
// broker skipped on out/0 leaves its records open there; the batch's
// redo, at the producer's next epoch, joins that transaction. Committing
// the redo would commit the aborted records too: every output twice.
// Nothing here proves how the older one ended (this instance did not ask
// for that abort, and no marker was written), so the redo ends neither
// way: Run stops with a HangingError naming out/0 from offset 0, and no
// record is visible twice.
func TestJoinedToAnUnprovenAbortEndsNeitherWay(t *testing.T) {
	c := joinCluster(t, "in", "out")
	failed := c.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.TxnOffsetCommit}})
	skipped, broken := skipMarkerOnce(c, false)
	err := joinRun(t, c, 100, 20*time.Second, []string{"a", "b", "c"})
	if failed.Hits() != 1 || skipped.Load() != 1 || broken.Load() != 1 {
		t.Fatalf("offset commits failed %d, markers skipped %d, connections broken %d; want 1 each: the test proves nothing", failed.Hits(), skipped.Load(), broken.Load())
	}
	for v, n := range committedOut(t, c, 2*time.Second) {
		if n > 1 {
			t.Errorf("%q is visible %d times: the redo committed the aborted batch it joined", v, n)
		}
	}
	var herr *HangingError
	if !errors.As(err, &herr) || !hangsOnOutAndMirror(herr.Hanging) {
		t.Fatalf("Run returned %v, want a *HangingError naming out/0's transaction from offset 0 (and the same one on the offsets mirror)", err)
	}
	if !strings.Contains(err.Error(), "eosctl txn hanging --topic out --partition 0") {
		t.Errorf("%q does not name the command that inspects it", err)
	}
	if stable, _ := stableOut(t, c); stable != 0 {
		t.Fatalf("out/0's last stable offset is %d, want 0: the joined transaction was ended", stable)
	}
}

// A batch that committed, with its marker on out/0 skipped by a
// restarting broker, is joined by the next batch. When that one must
// abort (here BeforeCommit vetoes it), its abort would drop the committed
// batch's records: the runtime ends neither, and Run's error names the
// transaction, the partition and the commands that settle it. This
// instance's own EndTxn answer is the proof that the older one committed.
func TestJoinedToACommitDoesNotAbort(t *testing.T) {
	c := joinCluster(t, "in", "out")
	skipped, broken := skipMarkerOnce(c, true)
	var batches atomic.Int32
	vetoed := errors.New("vetoed")
	veto := BeforeCommit(func(context.Context, BatchInfo) error {
		if batches.Add(1) == 2 {
			// Its records are written (joined) before it is vetoed.
			waitOutEnd(t, c, 6)
			return vetoed
		}
		return nil
	})
	err := joinRun(t, c, 3, 20*time.Second, []string{"a", "b", "c", "d", "e", "f"}, veto)
	if skipped.Load() != 1 || broken.Load() != 1 || batches.Load() != 2 {
		t.Fatalf("markers skipped %d, connections broken %d, batches %d; want 1, 1, 2: the test proves nothing", skipped.Load(), broken.Load(), batches.Load())
	}
	if err == nil || errors.Is(err, vetoed) || !strings.Contains(err.Error(), "committed") {
		t.Fatalf("Run returned %v, want an error naming the committed transaction it joined", err)
	}
	for _, want := range []string{`"app:1"`, "out/0 from offset 0", "eosctl txn hanging --topic out --partition 0", "eosctl txn commit"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%q does not name %q", err, want)
		}
	}
	if stable, end := stableOut(t, c); stable != 0 || end != 6 {
		t.Fatalf("out/0's last stable offset is %d and its end %d, want 0 and 6: the joined transaction was ended", stable, end)
	}
}

// waitOutEnd waits until out/0's end offset is at least end.
func waitOutEnd(t *testing.T, c *kfake.Cluster, end int64) {
	adm := kadm.NewClient(newPlainClient(t, c))
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		e, err := adm.ListEndOffsets(context.Background(), "out")
		if o, _ := e.Lookup("out", 0); err == nil && o.Offset >= end {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Errorf("out/0 did not reach offset %d", end)
}

// A batch that a rebalance aborts (this instance asks for the abort, and
// keeps the coordinator's answer as proof) has its marker on out/0
// skipped by a restarting broker; its redo joins it there. The redo is
// aborted instead of committed, which ends both, and redone again: every
// input is in the output once. Committing it would expose the aborted
// batch's output too.
func TestJoinedToAnAbortIsAbortedAndRedone(t *testing.T) {
	c := joinCluster(t, "in", "out")
	skipped, broken := skipMarkerOnce(c, false)
	var seen atomic.Int32
	r := joinRunner(t, c, 100, []string{"a", "b", "c"}, func(r *Runner, _ []byte) {
		if seen.Add(1) == 2 {
			// A revoke lands once the first record's output is
			// written: the batch stops after this one and aborts.
			waitOutEnd(t, c, 1)
			r.contexts.revokes.Add(1)
			r.contexts.callbacks.Add(1)
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	waitCommitted(t, c, 3, 20*time.Second)
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run returned %v", err)
	}
	if skipped.Load() != 1 || broken.Load() != 1 {
		t.Fatalf("markers skipped %d, connections broken %d; want 1 each: the test proves nothing", skipped.Load(), broken.Load())
	}
	got := committedOut(t, c, time.Second)
	for _, v := range []string{"a", "b", "c"} {
		if got[v] != 1 {
			t.Errorf("%q is in the output %d times, want once (all: %v)", v, got[v], got)
		}
	}
}

// waitCommitted waits until a read_committed consumer reads n records
// from out.
func waitCommitted(t *testing.T, c *kfake.Cluster, n int, wait time.Duration) {
	t.Helper()
	deadline := time.Now().Add(wait)
	for time.Now().Before(deadline) {
		got := committedOut(t, c, 200*time.Millisecond)
		total := 0
		for _, k := range got {
			total += k
		}
		if total >= n {
			return
		}
	}
	t.Errorf("fewer than %d records committed to out within %s", n, wait)
}

// disconnects counts the connections a client closes.
type disconnects struct{ n atomic.Int32 }

func (d *disconnects) OnBrokerDisconnect(kgo.BrokerMetadata, net.Conn) { d.n.Add(1) }

// The join check is armed by a request that fails on the wire, as when a
// broker restarts under it, and not by the client reaping a connection
// it left idle, which every quiet pipeline does.
func TestJoinGuardArmsOnABrokenConnectionOnly(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "out"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	g, gone := &joinGuard{}, &disconnects{}
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.ConnIdleTimeout(100*time.Millisecond), kgo.WithHooks(g, gone))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx := context.Background()
	if err := cl.Ping(ctx); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for gone.n.Load() == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if gone.n.Load() == 0 {
		t.Fatal("no idle connection was reaped: the test proves nothing")
	}
	if g.suspected() {
		t.Fatal("reaping an idle connection armed the join check")
	}
	// A client that keeps its connections, whose produce connection has
	// served a request: the broker closing a new connection at its first
	// request is taken for a SASL refusal, and not retried.
	g = &joinGuard{}
	cl, err = kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.DefaultProduceTopic("out"), kgo.WithHooks(g))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("a")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	var broken atomic.Int32
	c.ControlKey(int16(kmsg.Produce), func(kmsg.Request) (kmsg.Response, error, bool) {
		broken.Add(1)
		return nil, errors.New("the broker restarted"), true
	})
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("b")}).FirstErr(); err != nil {
		t.Fatal(err) // the client retries on a new connection
	}
	if broken.Load() != 1 {
		t.Fatalf("%d connections broken, want 1: the test proves nothing", broken.Load())
	}
	if !g.suspected() {
		t.Fatal("a request failed on a broken connection, and the join check is not armed")
	}
}

// A pipeline whose brokers stay up looks for joined transactions only
// when its session starts: its batches send no request for it.
func TestJoinCheckCostsHealthyBatchesNothing(t *testing.T) {
	c := joinCluster(t, "in", "out")
	var described atomic.Int32
	c.ControlKey(int16(kmsg.DescribeProducers), func(kmsg.Request) (kmsg.Response, error, bool) {
		described.Add(1)
		return nil, nil, false
	})
	r := joinRunner(t, c, 1, []string{"a", "b", "c", "d"}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	waitCommitted(t, c, 4, 20*time.Second)
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run returned %v", err)
	}
	if n := r.counts.committed.Load(); n < 4 {
		t.Fatalf("%d batches committed, want 4 or more: the test proves nothing", n)
	}
	if n := described.Load(); n != 1 {
		t.Fatalf("producers described %d times, want once (the session's start)", n)
	}
}

// What a transaction may do given the older ones it joined: commit only
// over committed ones, abort over an aborted one, and end neither way
// when it joined a committed one and must abort, or joined both kinds.
func TestDecideJoined(t *testing.T) {
	joined := func(outcomes ...txnrepair.Outcome) []joinedTxn {
		var js []joinedTxn
		for i, o := range outcomes {
			js = append(js, joinedTxn{DescribedProducer: kadm.DescribedProducer{Topic: "out", Partition: int32(i)}, older: 3,
				verdict: txnrepair.Verdict{Outcome: o, Where: "test"}})
		}
		return js
	}
	for _, tc := range []struct {
		name         string
		joined       []joinedTxn
		commit, want bool
		fails        bool
	}{
		{"none, commit", nil, true, true, false},
		{"none, abort", nil, false, false, false},
		{"committed, commit", joined(txnrepair.Committed), true, true, false},
		{"committed, abort", joined(txnrepair.Committed), false, false, true},
		{"aborted, commit", joined(txnrepair.Aborted), true, false, false},
		{"aborted, abort", joined(txnrepair.Aborted), false, false, false},
		{"committed and aborted", joined(txnrepair.Committed, txnrepair.Aborted), true, false, true},
		{"unproven, commit", joined(txnrepair.Unknown), true, true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := &Runner{cfg: config.Default(), log: zaptest.NewLogger(t)}
			r.cfg.AppID, r.cfg.InstanceID = "app", "1"
			g := joinGuardOf(r, producerEpoch{7, 4})
			may, err := g.decideJoined(tc.joined, tc.commit)
			if (err != nil) != tc.fails || err == nil && may != tc.want {
				t.Fatalf("decideJoined = %v, %v; want %v, failing %v", may, err, tc.want, tc.fails)
			}
			if err != nil && !strings.Contains(err.Error(), "eosctl txn hanging --topic out --partition 0") {
				t.Fatalf("%q does not name the command that inspects it", err)
			}
		})
	}
}

// The EndTxn answers kept as proof are bounded to the recent ones.
func TestOwnEndProofsAreBounded(t *testing.T) {
	r := &Runner{hanging: &hangingRepair{}}
	for e := range int16(ownEndedKept + 10) {
		r.hanging.noteOwnEnd(txnEpoch{1, e}, txnrepair.Committed)
	}
	if len(r.hanging.ownTxns) != ownEndedKept || len(r.hanging.ownEnded) != ownEndedKept {
		t.Fatalf("kept %d proofs (%d in order), want %d", len(r.hanging.ownTxns), len(r.hanging.ownEnded), ownEndedKept)
	}
	if _, ok := r.hanging.ownTxns[txnEpoch{1, 9}]; ok {
		t.Fatal("an old proof was kept")
	}
	if v := r.hanging.ownTxns[txnEpoch{1, ownEndedKept + 9}]; v.Outcome != txnrepair.Committed {
		t.Fatalf("the newest proof is %v", v)
	}
}

// BenchmarkProduceResult measures what keeping each partition's first
// written offset (for the join check) adds to a produced record's result:
// on a 2-core machine, 15 ns untracked and 37 ns tracked, no allocation.
func BenchmarkProduceResult(b *testing.B) {
	for _, track := range []bool{false, true} {
		b.Run(map[bool]string{false: "untracked", true: "tracked"}[track], func(b *testing.B) {
			p := &produceErrs{track: track}
			recs := make([]*kgo.Record, 8)
			for i := range recs {
				recs[i] = &kgo.Record{Topic: "out", Partition: int32(i), ProducerID: 1, Offset: int64(i)}
			}
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				p.sent()
				p.record(recs[i%len(recs)], nil)
			}
		})
	}
}

// A request of the session that fails while the check looks (a broker
// dying just then) arms the next batch's check: the End that follows may
// be the one whose marker that broker skips. A look that saw everything
// clears only what came before it.
func TestJoinCheckStaysArmedByAFailureDuringItsLook(t *testing.T) {
	c := joinCluster(t, "in", "out")
	cfg := config.Default()
	cfg.Brokers, cfg.AppID, cfg.InstanceID = c.ListenAddrs(), "app", "1"
	r := hangingRunner(t, cfg)
	g := joinGuardOf(r, producerEpoch{id: 9, epoch: 3})
	var failNow atomic.Bool
	var looked atomic.Int32
	c.ControlKey(int16(kmsg.DescribeProducers), func(kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		if looked.Add(1) == 1 && failNow.Load() {
			g.OnBrokerE2E(kgo.BrokerMetadata{}, 0, kgo.BrokerE2E{ReadErr: errors.New("connection reset by peer")})
		}
		return nil, nil, false
	})
	ctx := context.Background()
	g.suspect.Store(true)
	if may, err := g.check(ctx, nil, func() map[topicPartition]int64 { return nil }, true); err != nil || !may {
		t.Fatalf("a look with nothing joined: may commit %v, %v", may, err)
	}
	if g.suspected() {
		t.Fatal("a look that saw everything, with no failure during it, left the check armed")
	}
	looked.Store(0)
	failNow.Store(true)
	g.suspect.Store(true)
	if _, err := g.check(ctx, nil, func() map[topicPartition]int64 { return nil }, true); err != nil {
		t.Fatal(err)
	}
	if looked.Load() == 0 {
		t.Fatal("the check did not look: the test proves nothing")
	}
	if !g.suspected() {
		t.Fatal("a request that failed during the look was forgotten: the next batch's check would not run")
	}
}

// The look describes the topics the batch wrote that the topology does
// not name (ToTopicFunc's): a join there would otherwise go unseen while
// the look counted as having seen every partition.
func TestJoinLookDescribesTopicsTheBatchWrote(t *testing.T) {
	c := joinCluster(t, "in", "out", "chosen")
	cfg := config.Default()
	cfg.Brokers, cfg.AppID, cfg.InstanceID = c.ListenAddrs(), "app", "1"
	r := hangingRunner(t, cfg)
	var mu sync.Mutex
	asked := map[string]bool{}
	c.ControlKey(int16(kmsg.DescribeProducers), func(kr kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		mu.Lock()
		defer mu.Unlock()
		for _, rt := range kr.(*kmsg.DescribeProducersRequest).Topics {
			asked[rt.Topic] = true
		}
		return nil, nil, false
	})
	g := joinGuardOf(r, producerEpoch{id: 9, epoch: 3})
	g.lookJoined(context.Background(), map[topicPartition]int64{{"chosen", 0}: 5})
	mu.Lock()
	defer mu.Unlock()
	if !asked["chosen"] || !asked["out"] {
		t.Fatalf("the look described %v; want the topology's out and the batch's chosen", asked)
	}
}

// joinCluster is a one-broker kfake cluster with topics of one partition,
// closed when the test ends.
func joinCluster(t *testing.T, topics ...string) *kfake.Cluster {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, topics...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// A check that cannot describe the partitions before the batch's end is
// due (the brokers restarting) ends the batch as asked instead of
// stopping Run: its coordinator would abort an open transaction at
// transaction_timeout anyway. It says so, and stays armed for the next
// batch.
func TestJoinCheckThatCannotLookEndsAsAsked(t *testing.T) {
	c := joinCluster(t, "in", "out")
	cfg := config.Default()
	cfg.Brokers, cfg.AppID, cfg.InstanceID = c.ListenAddrs(), "app", "1"
	cfg.ConnectTimeout = 300 * time.Millisecond
	r := hangingRunner(t, cfg)
	core, logs := observer.New(zapcore.WarnLevel)
	r.log = zap.New(core)
	failed := failDescribeProducers(c, kerr.NotLeaderForPartition.Code, func() bool { return true })
	g := joinGuardOf(r, producerEpoch{id: 9, epoch: 3})
	g.suspect.Store(true)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	for _, commit := range []bool{true, false} {
		may, err := g.check(ctx, nil, func() map[topicPartition]int64 { return nil }, commit)
		if err != nil || may != commit {
			t.Fatalf("asked to commit %v: may commit %v, %v; want it ended as asked", commit, may, err)
		}
	}
	if failed.Load() == 0 {
		t.Fatal("no describe failed: the test proves nothing")
	}
	if !g.suspected() {
		t.Fatal("the check was disarmed without a look that saw every partition")
	}
	if logs.FilterMessageSnippet("could not look whether this batch joined").Len() != 2 {
		t.Fatalf("the blind ends were not logged: %v", logs.All())
	}
}

// An EndTxn answer is kept as proof only when no request failed since the
// check before End: a broker away while End retried may have had its
// coordinator time the transaction out and abort it meanwhile.
func TestEndAnswerIsNoProofAfterAFailedRequest(t *testing.T) {
	c := joinCluster(t, "in", "out")
	cfg := config.Default()
	cfg.Brokers, cfg.AppID, cfg.InstanceID = c.ListenAddrs(), "app", "1"
	r := hangingRunner(t, cfg)
	ctx := context.Background()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.TransactionalID("app:1"), kgo.DefaultProduceTopic("out"))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	if err := cl.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := cl.ProduceSync(ctx, &kgo.Record{Value: []byte("a")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	id, epoch, err := cl.ProducerID(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	if _, after, _ := cl.ProducerID(ctx); after != epoch+1 {
		t.Skipf("the epoch went from %d to %d over EndTxn: not transaction version 2, nothing to prove", epoch, after)
	}
	g := joinGuardOf(r, producerEpoch{id: id, epoch: epoch})
	g.suspect.Store(true)
	g.ended(ctx, cl, true, true)
	if v, ok := r.hanging.ownTxns[txnEpoch{id, epoch}]; ok {
		t.Fatalf("a commit answered after a failed request was kept as proof: %+v", v)
	}
	g.suspect.Store(false)
	g.ended(ctx, cl, true, true)
	if v := r.hanging.ownTxns[txnEpoch{id, epoch}]; v.Outcome != txnrepair.Committed {
		t.Fatalf("a commit answered with no failed request is not kept as proof: %+v", v)
	}
}

// A transaction that a failed request dooms sends nothing more (see
// doom.go). Here the produces of the transaction after the first one
// fail for four seconds, as if its broker restarted: the client re-sends
// a record whose request broke until it learns the outcome, so the old
// code delivered them once the outage ended, where they could have
// joined an older transaction whose marker the restart skipped. The
// doomed transaction's records are abandoned with its client instead:
// none arrives after the outage, and every value is written once.
func TestADoomedTransactionSendsNothingMore(t *testing.T) {
	c := joinCluster(t, "in", "out")
	var ended, broken, late atomic.Int32
	var outageEnd atomic.Int64
	var doomed atomic.Int32 // the producer epoch of the transaction the outage dooms
	doomed.Store(-1)
	c.ControlKey(int16(kmsg.EndTxn), func(kmsg.Request) (kmsg.Response, error, bool) {
		ended.Add(1)
		return nil, nil, false
	})
	c.ControlKey(int16(kmsg.Produce), func(kr kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		epoch := produceEpoch(kr.(*kmsg.ProduceRequest))
		if ended.Load() == 1 && doomed.CompareAndSwap(-1, epoch) {
			outageEnd.Store(time.Now().Add(4 * time.Second).UnixNano())
		}
		switch {
		case epoch != doomed.Load():
			return nil, nil, false
		case time.Now().UnixNano() < outageEnd.Load():
			broken.Add(1)
			return nil, errors.New("the broker restarted"), true
		}
		late.Add(1) // a produce of the doomed transaction, after the outage
		return nil, nil, false
	})
	r := joinRunner(t, c, 3, []string{"a", "b", "c", "d", "e", "f"}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	waitCommitted(t, c, 6, 20*time.Second)
	time.Sleep(time.Until(time.Unix(0, outageEnd.Load())) + time.Second)
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run returned %v", err)
	}
	if broken.Load() == 0 {
		t.Fatalf("no produce broken (doomed epoch %d): the test proves nothing", doomed.Load())
	}
	if late.Load() != 0 {
		t.Errorf("%d produces of the doomed transaction reached the broker after the outage", late.Load())
	}
	got := committedOut(t, c, time.Second)
	for _, v := range []string{"a", "b", "c", "d", "e", "f"} {
		if got[v] != 1 {
			t.Errorf("%q is in the output %d times, want once (all: %v)", v, got[v], got)
		}
	}
}

// produceEpoch is the producer epoch of req's first record batch, or -1.
func produceEpoch(req *kmsg.ProduceRequest) int32 {
	for _, t := range req.Topics {
		for _, p := range t.Partitions {
			var b kmsg.RecordBatch
			if err := b.ReadFrom(p.Records); err == nil {
				return int32(b.ProducerEpoch)
			}
		}
	}
	return -1
}

// hangsOnOutAndMirror reports whether hs is one transaction, open on out/0
// from offset 0 and, since every batch also writes its input offsets
// there, on the offsets mirror.
func hangsOnOutAndMirror(hs []HangingTxn) bool {
	var out []HangingTxn
	for _, h := range hs {
		switch h.Topic {
		case "out":
			out = append(out, h)
		case topology.OffsetsTopic("app"):
		default:
			return false
		}
	}
	if len(out) != 1 || out[0].Partition != 0 || out[0].StartOffset != 0 {
		return false
	}
	for _, h := range hs {
		if h.ProducerID != out[0].ProducerID || h.Epoch != out[0].Epoch {
			return false
		}
	}
	return true
}

// joinGuardOf is r's join guard for a transaction begun at epoch.
func joinGuardOf(r *Runner, begun producerEpoch) *joinGuard {
	g := newJoinGuard(r)
	g.begun, g.begunOK = begun, true
	return g
}
