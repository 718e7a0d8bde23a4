package integration

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/eosflow/eosflow/config"
	"github.com/eosflow/eosflow/tools/conformance"
	"github.com/eosflow/eosflow/tools/kafkatest"
	"github.com/eosflow/eosflow/tools/verdict"
)

// clusterEnv is the 3-broker cluster in EOS_KAFKA_CLUSTER_BROKERS with the
// command that kills or starts one of its nodes, or a skip.
func clusterEnv(t *testing.T) (*kafkatest.Env, func(action string, node int32)) {
	brokers, cmd := os.Getenv("EOS_KAFKA_CLUSTER_BROKERS"), os.Getenv("EOS_KAFKA_CLUSTER_NODE_CMD")
	if brokers == "" || cmd == "" {
		t.Skip("EOS_KAFKA_CLUSTER_BROKERS and EOS_KAFKA_CLUSTER_NODE_CMD are not set; start a cluster with " +
			"`EOS_KAFKA_PORT=29092 integration/kafka/kafka.sh start --cluster 3` and set the command to " +
			"`EOS_KAFKA_PORT=29092 integration/kafka/kafka.sh {action} --cluster 3 --node {node}`")
	}
	env := &kafkatest.Env{Brokers: strings.Split(brokers, ",")}
	v := brokerVersion(env)
	if v == "" {
		t.Fatalf("no Kafka answers at %s (EOS_KAFKA_CLUSTER_BROKERS)", brokers)
	}
	t.Logf("running against Apache Kafka %s at %s", v, brokers)
	return env, func(action string, node int32) {
		line := strings.NewReplacer("{action}", action, "{node}", strconv.Itoa(int(node))).Replace(cmd)
		shell(t, line)
	}
}

// The leader of an output partition dies mid-run (kill -9); with
// replication factor 3 and min.insync.replicas 2 a follower takes over and
// the output is still exact.
func TestOutputLeaderFailover(t *testing.T) {
	env, node := clusterEnv(t)
	in, out := env.Name("in"), env.Name("out")
	env.CreateTopics(t, 6, in, out)
	adm := env.Admin(t)
	ctx := context.Background()
	md, err := adm.Metadata(ctx, out)
	if err != nil {
		t.Fatal(err)
	}
	p0 := md.Topics[out].Partitions[0]
	if len(p0.Replicas) != 3 {
		t.Fatalf("%s has %d replicas; the cluster must default to replication factor 3", out, len(p0.Replicas))
	}
	const n = 60000
	conformance.Seed(t, env, in, n)
	cfg := env.Config(env.Name("app"), "a", config.ExactlyOnce)
	cfg.MaxBatchRecords = 500
	x := conformance.Start(t, cfg, conformance.Upper(in, out, nil), slowBatches(2*time.Millisecond))
	conformance.Until(t, 120*time.Second, "a quarter of the input", func() bool { return x.R.Stats().RecordsIn >= n/4 })

	leader := p0.Leader
	node("kill", leader)
	t.Cleanup(func() { node("start", leader) })
	t.Logf("killed node %d, leader of %s-0", leader, out)
	conformance.Until(t, 300*time.Second, "all records", func() bool { return x.R.Stats().RecordsIn >= n })
	v := conformance.ExactlyOnce(t, env, out, n)
	md, err = adm.Metadata(ctx, out)
	if err == nil {
		t.Logf("%s-0 leader now %d", out, md.Topics[out].Partitions[0].Leader)
	}
	t.Logf("verdict %v, stats %+v", v, x.R.Stats())
}

// An output partition of replication factor 1 whose only broker is killed
// stays without a leader past recovery_timeout: Run stops with an error
// naming the partition. Nothing is lost: once the broker is back, a new
// Runner writes every record exactly once.
func TestOutputPartitionWithoutLeader(t *testing.T) {
	env, node := clusterEnv(t)
	in, out := env.Name("in"), env.Name("out")
	env.CreateTopics(t, 6, in)
	adm := env.Admin(t)
	ctx := context.Background()
	// One replica, so also one in sync: the cluster's default of two would
	// refuse every write on a broker that does not cap it.
	one := "1"
	if _, err := adm.CreateTopic(ctx, 3, 1, map[string]*string{"min.insync.replicas": &one}, out); err != nil {
		t.Fatal(err)
	}
	var victim int32 = -1
	conformance.Until(t, 30*time.Second, out+" in the metadata", func() bool {
		md, err := adm.Metadata(ctx, out)
		if p, ok := md.Topics[out].Partitions[0]; err == nil && ok && p.Leader >= 0 {
			victim = p.Leader
		}
		return victim >= 0
	})
	const n = 3000
	conformance.Seed(t, env, in, n)
	node("kill", victim)
	restarted := false
	t.Cleanup(func() {
		if !restarted {
			node("start", victim)
		}
	})
	cfg := env.Config(env.Name("app"), "a", config.ExactlyOnce)
	cfg.RecoveryTimeout = 20 * time.Second
	err := conformance.Start(t, cfg, conformance.Upper(in, out, nil)).Wait(t, 180*time.Second)
	if name := fmt.Sprintf("%s/0: ", out); err == nil || !strings.Contains(err.Error(), name) {
		t.Fatalf("with node %d, the only replica of %s-0, killed, Run: %v; want an error naming %s", victim, out, err, name)
	}
	t.Logf("node %d killed, Run: %v", victim, err)
	node("start", victim)
	restarted = true
	conformance.Start(t, cfg, conformance.Upper(in, out, nil))
	conformance.Until(t, 120*time.Second, "every record committed once the node is back", func() bool {
		return verdict.CaughtUp(ctx, adm, cfg.AppID, in)
	})
	conformance.ExactlyOnce(t, env, out, n)
}
