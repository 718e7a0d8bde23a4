package eos_test

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/eosflow/eosflow/config"
	"github.com/eosflow/eosflow/eos"
	"github.com/eosflow/eosflow/tools/conformance"
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

// forgetOffsets makes the group coordinator answer "no committed offset"
// to every OffsetFetch until the returned func is called, as Apache Kafka
// 4.4 did for seconds after a hard restart on a loaded machine (a stale
// load of __consumer_offsets completed into a newer one). It counts the
// answers it forged.
func forgetOffsets(env *kafkatest.Env) (forged *atomic.Int64, remember func()) {
	forgetting := new(atomic.Bool)
	forgetting.Store(true)
	forged = forgetWhile(env, forgetting)
	return forged, func() { forgetting.Store(false) }
}

// forgetWhile forges OffsetFetch answers without offsets while forgetting
// holds, and counts them.
func forgetWhile(env *kafkatest.Env, forgetting *atomic.Bool) (forged *atomic.Int64) {
	return forgeWhile(env, forgetting, -1)
}

// forgeWhile forges OffsetFetch answers of offset at (-1: none) for every
// partition asked while forging holds, and counts them.
func forgeWhile(env *kafkatest.Env, forging *atomic.Bool, at int64) (forged *atomic.Int64) {
	forged = new(atomic.Int64)
	env.Fake.ControlKey(int16(kmsg.OffsetFetch), func(req kmsg.Request) (kmsg.Response, error, bool) {
		env.Fake.KeepControl()
		if !forging.Load() {
			return nil, nil, false
		}
		fetch := req.(*kmsg.OffsetFetchRequest)
		resp := fetch.ResponseKind().(*kmsg.OffsetFetchResponse)
		for _, g := range fetch.Groups {
			rg := kmsg.NewOffsetFetchResponseGroup()
			rg.Group = g.Group
			for _, t := range g.Topics {
				rt := kmsg.NewOffsetFetchResponseGroupTopic()
				rt.Topic, rt.TopicID = t.Topic, t.TopicID
				for _, p := range t.Partitions {
					rp := kmsg.NewOffsetFetchResponseGroupTopicPartition()
					rp.Partition, rp.Offset, rp.LeaderEpoch = p, at, -1
					rt.Partitions = append(rt.Partitions, rp)
				}
				rg.Topics = append(rg.Topics, rt)
			}
			resp.Groups = append(resp.Groups, rg)
		}
		forged.Add(1)
		return resp, nil, true
	})
	return forged
}

// A group coordinator that answers, for a while, that the group has no
// committed offsets (a broker that has not loaded the group yet) does not
// make a running pipeline process its input again: offsets below those
// the process itself committed are asked again until they come back.
// Before this, the rejoin below reset the partitions to their start and
// the output held the first 100 records twice.
func TestForgottenOffsetsAreNotConsumed(t *testing.T) {
	env := kafkatest.Fake(t)
	env.CreateTopics(t, 2, "in", "out")
	conformance.Seed(t, env, "in", 100)
	core, logs := observer.New(zapcore.InfoLevel)
	x := conformance.Start(t, env.Config("app", "a", config.ExactlyOnce), conformance.Upper("in", "out", nil), eos.Logger(zap.New(core)))
	x.WaitCommitted(t, 100, 20*time.Second)

	forged, remember := forgetOffsets(env)
	// The member loses its place, rejoins and fetches its offsets again.
	env.Fake.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Heartbeat}, Err: kerr.UnknownMemberID})
	conformance.Until(t, 20*time.Second, "an OffsetFetch answered without offsets", func() bool { return forged.Load() > 0 })
	time.Sleep(3 * time.Second) // the broker "loads" the group
	remember()
	conformance.SeedRange(t, env, "in", 100, 200)
	x.WaitCommitted(t, 200, 30*time.Second)
	conformance.ExactlyOnce(t, env, "out", 200)
	if logs.FilterMessage(resumeLog).Len() == 0 {
		t.Fatalf("no log of resuming from the offsets mirror; forged answers %d", forged.Load())
	}
}

// A coordinator that keeps answering offsets below those committed (a
// stale answer, or a reset the mirror was not told of) stops Run past
// recovery_timeout, with an error naming the partitions and what to run.
func TestForgottenOffsetsStopRunPastTheBound(t *testing.T) {
	env := kafkatest.Fake(t)
	env.CreateTopics(t, 1, "in", "out")
	conformance.Seed(t, env, "in", 50)
	cfg := env.Config("app", "a", config.ExactlyOnce)
	cfg.RecoveryTimeout = 5 * time.Second
	x := conformance.Start(t, cfg, conformance.Upper("in", "out", nil))
	x.WaitCommitted(t, 50, 20*time.Second)

	forging := new(atomic.Bool)
	forging.Store(true)
	forged := forgeWhile(env, forging, 10)
	env.Fake.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Heartbeat}, Err: kerr.UnknownMemberID})
	err := x.Wait(t, 30*time.Second)
	var behind *eos.OffsetsBehindError
	if !errors.As(err, &behind) || forged.Load() == 0 {
		t.Fatalf("Run ended with %v after %d forged answers; want an *eos.OffsetsBehindError", err, forged.Load())
	}
	for _, want := range []string{"in/0: 10, committed 50", "eosctl group lag app", "eosctl topic delete app-eos-offsets --yes"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %q", err, want)
		}
	}
}

// Close ends the wait for forgotten offsets at once, not at
// recovery_timeout: the wait runs inside the client's callback, and ends
// with the client's context as the client closes.
func TestCloseEndsTheWaitForForgottenOffsets(t *testing.T) {
	env := kafkatest.Fake(t)
	env.CreateTopics(t, 1, "in", "out")
	conformance.Seed(t, env, "in", 50)
	cfg := env.Config("app", "a", config.ExactlyOnce)
	cfg.RecoveryTimeout = time.Minute
	core, logs := observer.New(zapcore.InfoLevel)
	x := conformance.Start(t, cfg, conformance.Upper("in", "out", nil), eos.Logger(zap.New(core)))
	x.WaitCommitted(t, 50, 20*time.Second)

	forging := new(atomic.Bool)
	forging.Store(true)
	forgeWhile(env, forging, 10)
	env.Fake.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Heartbeat}, Err: kerr.UnknownMemberID})
	const waiting = "the group's coordinator answered committed offsets below those the app's last commits reached; waiting for it to load the group before consuming them"
	conformance.Until(t, 20*time.Second, "the wait for forgotten offsets", func() bool { return logs.FilterMessage(waiting).Len() > 0 })
	start := time.Now()
	go x.R.Close()
	if err := x.Wait(t, 30*time.Second); err != nil {
		t.Fatalf("Run ended with %v after Close; want nil", err)
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Fatalf("Run returned %v after Close, waiting for forgotten offsets; want within 10s of a 1m recovery_timeout", took)
	}
}

// A commit whose answer was lost is settled from the group's committed
// offsets; an answer without offsets, from a coordinator that has not
// loaded the group, is no answer. Before, the batch was taken as not
// committed and redone on the same client: its 500 records came out
// twice.
func TestLostCommitAnswerIsNotSettledByForgottenOffsets(t *testing.T) {
	env := kafkatest.Fake(t)
	env.CreateTopics(t, 1, "in", "out")
	const n = 1500
	conformance.Seed(t, env, "in", n)
	forgetting := new(atomic.Bool)
	forged := forgetWhile(env, forgetting)
	// The second commit applies, its answer is lost, and the coordinator
	// forgets the group's offsets for three seconds.
	lost := loseCommitAnswer(t, env, 2, func() {
		forgetting.Store(true)
		time.AfterFunc(3*time.Second, func() { forgetting.Store(false) })
	})
	// The client's retries of that EndTxn fail, so End reports no outcome.
	env.Fake.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.EndTxn}, Err: kerr.UnknownServerError, Count: 5,
		When: func(kmsg.Request) bool { return lost.Load() }})
	cfg := env.Config("app", "a", config.ExactlyOnce)
	cfg.MaxBatchRecords = 500
	x := conformance.Start(t, cfg, conformance.Upper("in", "out", nil), eos.Logger(zaptest.NewLogger(t, zaptest.Level(zap.InfoLevel))))
	x.WaitCommitted(t, n-500, 60*time.Second)
	conformance.ExactlyOnce(t, env, "out", n)
	if !lost.Load() || forged.Load() == 0 {
		t.Fatalf("the lost commit applied: %v; forged answers: %d; the test proves nothing", lost.Load(), forged.Load())
	}
	conformance.Until(t, 30*time.Second, "every record counted", func() bool { return x.R.Stats().RecordsIn >= n })
	if s := x.R.Stats(); s.RecordsIn != n {
		t.Fatalf("RecordsIn %d, want exactly %d: %+v", s.RecordsIn, n, s)
	}
}

// A process that never committed a partition has no floor of its own: it
// learns where the last commit reached from the offsets mirror, so a
// coordinator that forgot the group's offsets does not make it process
// the input again. Before the mirror, the new instance below started
// every partition at its start and the output held 100 records twice.
func TestNewInstanceReadsTheOffsetsMirror(t *testing.T) {
	env := kafkatest.Fake(t)
	env.CreateTopics(t, 2, "in", "out")
	conformance.Seed(t, env, "in", 100)
	cfg := env.Config("app", "a", config.ExactlyOnce)
	cfg.LeaveGroupOnClose = true
	x := conformance.Start(t, cfg, conformance.Upper("in", "out", nil))
	x.WaitCommitted(t, 100, 20*time.Second)
	x.Stop()
	if err := x.Wait(t, 30*time.Second); err != nil {
		t.Fatal(err)
	}

	forged, remember := forgetOffsets(env)
	time.AfterFunc(3*time.Second, remember) // the broker "loads" the group
	core, logs := observer.New(zapcore.InfoLevel)
	y := conformance.Start(t, env.Config("app", "b", config.ExactlyOnce), conformance.Upper("in", "out", nil), eos.Logger(zap.New(core)))
	conformance.Until(t, 20*time.Second, "an OffsetFetch answered without offsets", func() bool { return forged.Load() > 0 })
	conformance.SeedRange(t, env, "in", 100, 200)
	y.WaitCommitted(t, 100, 30*time.Second)
	conformance.ExactlyOnce(t, env, "out", 200)
	if logs.FilterMessage(resumeLog).Len() == 0 {
		t.Fatalf("no log of resuming from the offsets mirror; forged answers %d", forged.Load())
	}
}

// An input topic deleted and created again has a new topic id: the mirror
// records of the old one, whose offsets the new one never reaches, do not
// hold the app back. The group's offsets of a deleted topic are deleted
// with it, as Apache Kafka does.
func TestRecreatedTopicIsNotHeldToTheMirror(t *testing.T) {
	env := kafkatest.Fake(t)
	env.CreateTopics(t, 1, "in", "out")
	conformance.Seed(t, env, "in", 100)
	cfg := env.Config("app", "a", config.ExactlyOnce)
	cfg.LeaveGroupOnClose = true
	x := conformance.Start(t, cfg, conformance.Upper("in", "out", nil))
	x.WaitCommitted(t, 100, 20*time.Second)
	x.Stop()
	if err := x.Wait(t, 30*time.Second); err != nil {
		t.Fatal(err)
	}

	adm := env.Admin(t)
	ctx := t.Context()
	if _, err := adm.DeleteTopics(ctx, "in"); err != nil {
		t.Fatal(err)
	}
	os := make(kadm.Offsets)
	os.Add(kadm.Offset{Topic: "in", Partition: 0})
	if _, err := adm.DeleteOffsets(ctx, "app", os.TopicsSet()); err != nil {
		t.Fatal(err)
	}
	conformance.Until(t, 10*time.Second, "in deleted", func() bool {
		td, err := adm.ListTopics(ctx, "in")
		return err == nil && td["in"].Err != nil
	})
	env.CreateTopics(t, 1, "in")
	conformance.SeedRange(t, env, "in", 100, 150)
	cfg.RecoveryTimeout = 10 * time.Second
	y := conformance.Start(t, cfg, conformance.Upper("in", "out", nil))
	y.WaitCommitted(t, 50, 30*time.Second)
	conformance.ExactlyOnce(t, env, "out", 150)
}

// A mirror that cannot be read is waited for, logged, and past
// recovery_timeout stops Run naming it: the group's offsets unchecked
// could be a forgetful broker's.
func TestUnreadableMirrorIsWaitedForThenStopsRun(t *testing.T) {
	env := kafkatest.Fake(t)
	env.CreateTopics(t, 1, "in", "out")
	conformance.Seed(t, env, "in", 50)
	mirror := topology.OffsetsTopic("app")
	// Three refused reads: waited for, then consumed once.
	env.Fake.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.ListOffsets}, Topic: mirror, Count: 3})
	core, logs := observer.New(zapcore.InfoLevel)
	cfg := env.Config("app", "a", config.ExactlyOnce)
	x := conformance.Start(t, cfg, conformance.Upper("in", "out", nil), eos.Logger(zap.New(core)))
	x.WaitCommitted(t, 50, 30*time.Second)
	conformance.ExactlyOnce(t, env, "out", 50)
	if logs.FilterMessage("cannot read the offsets mirror; waiting, since the group's offsets alone may be a broker's that forgot them").Len() == 0 {
		t.Fatal("no log of the wait for the offsets mirror")
	}
	x.Stop()
	if err := x.Wait(t, 30*time.Second); err != nil {
		t.Fatal(err)
	}

	// Refused for good: Run stops past recovery_timeout.
	env.Fake.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.ListOffsets}, Topic: mirror, Count: -1})
	cfg.RecoveryTimeout = 5 * time.Second
	y := conformance.Start(t, cfg, conformance.Upper("in", "out", nil))
	err := y.Wait(t, 60*time.Second)
	var behind *eos.OffsetsBehindError
	if !errors.As(err, &behind) || !behind.Unread {
		t.Fatalf("Run ended with %v; want an *eos.OffsetsBehindError with Unread", err)
	}
	if !strings.Contains(err.Error(), "could not be read for partitions "+mirror+"/0") {
		t.Errorf("error %q does not name the mirror partition", err)
	}
}

// Offsets reset backwards on purpose are refused while the mirror says
// otherwise, with an error naming the command that deletes it; once it is
// deleted, the app processes the input again from the reset offsets.
func TestDeliberateResetNeedsTheMirrorDeleted(t *testing.T) {
	env := kafkatest.Fake(t)
	env.CreateTopics(t, 1, "in", "out")
	conformance.Seed(t, env, "in", 50)
	cfg := env.Config("app", "a", config.ExactlyOnce)
	cfg.LeaveGroupOnClose = true
	cfg.RecoveryTimeout = 5 * time.Second
	run := func() (*conformance.Run, func() error) {
		x := conformance.Start(t, cfg, conformance.Upper("in", "out", nil))
		return x, func() error { x.Stop(); return x.Wait(t, 60*time.Second) }
	}
	x, stop := run()
	x.WaitCommitted(t, 50, 20*time.Second)
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	adm := env.Admin(t)
	reset := make(kadm.Offsets)
	reset.Add(kadm.Offset{Topic: "in", Partition: 0, At: 0, LeaderEpoch: -1})
	if err := adm.CommitAllOffsets(t.Context(), "app", reset); err != nil {
		t.Fatal(err)
	}

	x, _ = run()
	err := x.Wait(t, 60*time.Second)
	if !errors.As(err, new(*eos.OffsetsBehindError)) || !strings.Contains(err.Error(), "eosctl topic delete app-eos-offsets --yes") {
		t.Fatalf("after a reset, Run ended with %v; want an *eos.OffsetsBehindError naming the mirror's deletion", err)
	}
	if _, err := adm.DeleteTopics(t.Context(), topology.OffsetsTopic("app")); err != nil {
		t.Fatal(err)
	}
	x, stop = run()
	x.WaitCommitted(t, 50, 30*time.Second)
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if got := len(conformance.Drain(t, env, "out", 100)); got != 100 {
		t.Fatalf("%d outputs after processing the input again, want 100", got)
	}
}

// resumeLog is what a runner logs when it starts a partition the group has
// no offset for from the offsets mirror.
const resumeLog = "the group has no committed offset for a partition; resuming where the offsets mirror says its last commit reached"

// Offsets that expired while the app was stopped (here the group is
// deleted) resume from the offsets mirror, and a resumed partition with no
// new input is not taken for a stalled one: the group has no offset there
// until the next commit. Before, the stall check counted the processed
// records as waiting and stopped Run with a StallError.
func TestExpiredOffsetsResumeFromTheMirrorWithoutStalling(t *testing.T) {
	t.Parallel()
	env := kafkatest.Fake(t)
	env.CreateTopics(t, 1, "in", "out")
	conformance.Seed(t, env, "in", 50)
	cfg := env.Config("app", "a", config.ExactlyOnce)
	cfg.LeaveGroupOnClose = true
	cfg.TransactionTimeout = 2 * time.Second
	x := conformance.Start(t, cfg, conformance.Upper("in", "out", nil))
	x.WaitCommitted(t, 50, 20*time.Second)
	x.Stop()
	if err := x.Wait(t, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	if _, err := env.Admin(t).DeleteGroup(t.Context(), "app"); err != nil {
		t.Fatal(err)
	}
	core, logs := observer.New(zapcore.InfoLevel)
	y := conformance.Start(t, cfg, conformance.Upper("in", "out", nil), eos.Logger(zap.New(core)))
	conformance.Until(t, 20*time.Second, "the resume", func() bool { return logs.FilterMessage(resumeLog).Len() > 0 })
	time.Sleep(30 * time.Second) // past the stall bound, idle
	if s := y.R.Stats(); s.Rebuilds != 0 {
		t.Fatalf("the idle resumed pipeline rebuilt %d times: taken for stalled; stats %+v", s.Rebuilds, s)
	}
	conformance.SeedRange(t, env, "in", 50, 60)
	y.WaitCommitted(t, 10, 30*time.Second)
	conformance.ExactlyOnce(t, env, "out", 60)
}

// A partition resumes from the newest commit the mirror will hold: a
// transaction open on the mirror (here another producer's, committing
// records 100..149, as one whose markers a restarting broker has not
// written yet) is waited for before the mirror is read. Reading at once
// resumed at 100, and records 100..149 came out twice.
func TestResumeWaitsForTransactionsOpenOnTheMirror(t *testing.T) {
	env := kafkatest.Fake(t)
	env.CreateTopics(t, 1, "in", "out")
	conformance.Seed(t, env, "in", 100)
	cfg := env.Config("app", "a", config.ExactlyOnce)
	cfg.LeaveGroupOnClose = true
	cfg.TransactionTimeout = 10 * time.Second
	top := conformance.Upper("in", "out", nil)
	x := conformance.Start(t, cfg, top)
	x.WaitCommitted(t, 100, 20*time.Second)
	x.Stop()
	if err := x.Wait(t, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	conformance.SeedRange(t, env, "in", 100, 200)

	ctx := t.Context()
	adm := env.Admin(t)
	if _, err := adm.DeleteGroup(ctx, "app"); err != nil {
		t.Fatal(err)
	}
	// Another producer's transaction: outputs of records 100..149 and
	// their mirror record, committed 1.5 s after the pipeline restarts.
	td, err := adm.ListTopics(ctx, "in")
	if err != nil {
		t.Fatal(err)
	}
	in := env.Client(t, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"in": {0: kgo.NewOffset().At(100)}}))
	var outs []*kgo.Record
	for len(outs) < 50 {
		in.PollFetches(ctx).EachRecord(func(r *kgo.Record) {
			if len(outs) < 50 {
				outs = append(outs, &kgo.Record{Topic: "out", Key: r.Key, Value: bytes.ToUpper(r.Value)})
			}
		})
	}
	other := env.Client(t, kgo.TransactionalID("other"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err := other.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	mirror := &kgo.Record{Topic: topology.OffsetsTopic("app"), Key: []byte("in"), Value: eos.EncodeMirrorForTest(td["in"].ID, 150)}
	if err := other.ProduceSync(ctx, append(outs, mirror)...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	time.AfterFunc(1500*time.Millisecond, func() { _ = other.EndTransaction(context.Background(), kgo.TryCommit) })

	core, logs := observer.New(zapcore.InfoLevel)
	cfg.InstanceID = "b"
	y := conformance.Start(t, cfg, top, eos.Logger(zap.New(core)))
	y.WaitCommitted(t, 50, 30*time.Second)
	conformance.ExactlyOnce(t, env, "out", 200)
	resumed := logs.FilterMessage(resumeLog).All()
	if len(resumed) == 0 || resumed[0].ContextMap()["offset"] != int64(150) {
		t.Fatalf("resumed %v; want in/0 at 150", resumed)
	}
}
