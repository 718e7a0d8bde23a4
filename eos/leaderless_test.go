package eos_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/eosflow/eosflow/config"
	"github.com/eosflow/eosflow/tools/conformance"
	"github.com/eosflow/eosflow/tools/kafkatest"
	"github.com/eosflow/eosflow/tools/verdict"
	"github.com/eosflow/eosflow/topology"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// An output partition, or a dead-letter partition, left without a leader
// for longer than recovery_timeout: Run stops with an error naming the
// partition, how many records it holds back and what the metadata says of
// its leader, with the command to look; nothing is lost, and once the
// partition has a leader again a new Runner writes every record, exactly
// once where the guarantee is exactly-once.
func TestLeaderlessPartitionIsNamed(t *testing.T) {
	t.Parallel() // each case waits out recovery_timeout on a cluster of its own
	for _, c := range []struct {
		name, topic string
		g           config.Guarantee
		want        string // the path the error takes
	}{
		// Exactly-once looks for hanging transactions on every partition
		// it writes before a session writes: the look names it.
		{"output/exactly-once", "out", config.ExactlyOnce, "without a usable leader: out/1: "},
		{"dead-letters/exactly-once", "dlq", config.ExactlyOnce, "without a usable leader: dlq/1: "},
		// At-least-once writes, and the batch's flush runs out of its
		// bound with the partition's records held.
		{"output/at-least-once", "out", config.AtLeastOnce, "did not acknowledge the batch's records (out/1: "},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			leaderless(t, c.topic, c.g, c.want)
		})
	}
	t.Run("output/exactly-once/mid-run", func(t *testing.T) {
		t.Parallel()
		leaderlessMidRun(t)
	})
}

// leaderlessFaults leaves partition 1 of topic without a leader: the
// metadata says so, and a produce to it (sent before the client saw the
// metadata) is refused.
func leaderlessFaults(env *kafkatest.Env, topic string) *kfake.FaultHandle {
	return env.Fake.Fault(
		kfake.Fault{Keys: []kmsg.Key{kmsg.Metadata}, Topic: topic, Partitions: []int32{1}, Err: kerr.LeaderNotAvailable, Count: -1},
		kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Topic: topic, Partitions: []int32{1}, Err: kerr.NotLeaderForPartition, Count: -1})
}

func leaderless(t *testing.T, topic string, g config.Guarantee, want string) {
	env := kafkatest.Fake(t)
	env.CreateTopics(t, 3, "in", "out", "dlq")
	const n = 300
	conformance.Seed(t, env, "in", n)
	faults := leaderlessFaults(env, topic)
	cfg := env.Config("app", "a", g)
	cfg.RecoveryTimeout, cfg.TransactionTimeout = 5*time.Second, 5*time.Second
	top := func() *topology.Topology {
		top := conformance.Upper("in", "out", func(id int) bool { return id%10 == 0 })
		top.OnError("upper", topology.DeadLetter("dlq"))
		return top
	}
	begin := time.Now()
	err := conformance.Start(t, cfg, top()).Wait(t, 120*time.Second)
	took := time.Since(begin)
	if faults.Hits() == 0 {
		t.Fatal("the leaderless partition's faults never fired")
	}
	if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "LEADER_NOT_AVAILABLE") ||
		!strings.Contains(err.Error(), "eosctl topic describe "+topic) {
		t.Fatalf("after %s, Run: %v; want an error with %q, the leader's state and `eosctl topic describe %s`", took, err, want, topic)
	}
	t.Logf("after %s, Run: %v", took.Round(time.Millisecond), err)
	faults.Remove()
	conformance.Start(t, cfg, top())
	adm := kadm.NewClient(env.Client(t))
	conformance.Until(t, 60*time.Second, "every record committed once the partition has a leader", func() bool {
		return verdict.CaughtUp(context.Background(), adm, "app", "in")
	})
	all := append(conformance.Drain(t, env, "out", n*9/10), conformance.Drain(t, env, "dlq", n/10)...)
	v := verdict.Judge(n, all)
	switch {
	case v.Missing != 0:
		t.Fatalf("records lost: %v", v)
	case g == config.ExactlyOnce && !v.OK():
		t.Fatalf("outputs plus dead letters must be the input once each: %v", v)
	}
	t.Logf("verdict %v", v)
}

// The output partition loses its leader while a session writes: past
// recovery_timeout Run stops naming it, and nothing is lost.
func leaderlessMidRun(t *testing.T) {
	env := kafkatest.Fake(t)
	env.CreateTopics(t, 3, "in", "out")
	const n = 300
	conformance.Seed(t, env, "in", n)
	cfg := env.Config("app", "a", config.ExactlyOnce)
	cfg.RecoveryTimeout, cfg.TransactionTimeout = 5*time.Second, 5*time.Second
	x := conformance.Start(t, cfg, conformance.Upper("in", "out", nil))
	adm := kadm.NewClient(env.Client(t))
	caughtUp := func() bool { return verdict.CaughtUp(context.Background(), adm, "app", "in") }
	conformance.Until(t, 60*time.Second, "the first records committed", caughtUp)
	faults := leaderlessFaults(env, "out")
	conformance.SeedRange(t, env, "in", n, 2*n)
	err := x.Wait(t, 120*time.Second)
	if faults.Hits() == 0 {
		t.Fatal("the leaderless partition's faults never fired")
	}
	if err == nil || !strings.Contains(err.Error(), "out/1: ") || !strings.Contains(err.Error(), "eosctl topic describe out") {
		t.Fatalf("Run: %v; want an error naming out/1 and `eosctl topic describe out`", err)
	}
	t.Logf("Run: %v", err)
	faults.Remove()
	conformance.Start(t, cfg, conformance.Upper("in", "out", nil))
	conformance.Until(t, 60*time.Second, "every record committed once the partition has a leader", caughtUp)
	conformance.ExactlyOnce(t, env, "out", 2*n)
}
