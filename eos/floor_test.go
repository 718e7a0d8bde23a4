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
	"go.uber.org/zap/zaptest/observer"
)

// forgetOffsets makes the group coordinator answer "no committed offset"
// to every OffsetFetch until the returned func is called, as Apache Kafka
// 4.4 did for seconds after a hard restart on a loaded machine (a stale
// load of __consumer_offsets completed into a newer one). It counts the
// answers it forged.
func forgetOffsets(env *kafkatest.Env) (forged *atomic.Int64, remember func()) {
	forged = new(atomic.Int64)
	var stop atomic.Bool
	env.Fake.ControlKey(int16(kmsg.OffsetFetch), func(req kmsg.Request) (kmsg.Response, error, bool) {
		env.Fake.KeepControl()
		if stop.Load() {
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
	return forged, func() { stop.Store(true) }
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
