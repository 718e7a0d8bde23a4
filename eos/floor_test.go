package eos_test

import (
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/eosflow/eosflow/config"
	"github.com/eosflow/eosflow/eos"
	"github.com/eosflow/eosflow/internal/conformance"
	"github.com/eosflow/eosflow/internal/kafkatest"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
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
	forged = new(atomic.Int64)
	env.Fake.ControlKey(int16(kmsg.OffsetFetch), func(req kmsg.Request) (kmsg.Response, error, bool) {
		env.Fake.KeepControl()
		if !forgetting.Load() {
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
					rp.Partition, rp.Offset, rp.LeaderEpoch = p, -1, -1
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
	if logs.FilterMessage("the group's coordinator answered committed offsets below those this process committed; waiting for it to load the group before consuming them").Len() == 0 {
		t.Fatalf("no log of the wait for the group's offsets; forged answers %d", forged.Load())
	}
}

// A coordinator that never gives the offsets back stops Run past
// recovery_timeout, with an error naming the partitions and what to run.
func TestForgottenOffsetsStopRunPastTheBound(t *testing.T) {
	env := kafkatest.Fake(t)
	env.CreateTopics(t, 1, "in", "out")
	conformance.Seed(t, env, "in", 50)
	cfg := env.Config("app", "a", config.ExactlyOnce)
	cfg.RecoveryTimeout = 5 * time.Second
	x := conformance.Start(t, cfg, conformance.Upper("in", "out", nil))
	x.WaitCommitted(t, 50, 20*time.Second)

	forged, _ := forgetOffsets(env)
	env.Fake.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Heartbeat}, Err: kerr.UnknownMemberID})
	err := x.Wait(t, 30*time.Second)
	var behind *eos.OffsetsBehindError
	if !errors.As(err, &behind) || forged.Load() == 0 {
		t.Fatalf("Run ended with %v after %d forged answers; want an *eos.OffsetsBehindError", err, forged.Load())
	}
	for _, want := range []string{"in/0: none, committed 50", "eosctl group lag app"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %q", err, want)
		}
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
