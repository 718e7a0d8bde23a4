// Package kafkatest gives tests a broker: the real cluster named by
// EOS_KAFKA_BROKERS when set, else an in-process kfake cluster.
package kafkatest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/eosflow/eosflow/config"
	"github.com/eosflow/eosflow/internal/kafkautil"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// EnvBrokers is the variable naming a real cluster for integration tests.
const EnvBrokers = "EOS_KAFKA_BROKERS"

// Env is a broker for one test.
type Env struct {
	Brokers []string
	Fake    *kfake.Cluster // nil on a real cluster
}

// Real reports whether the test runs against a real cluster.
func (e *Env) Real() bool { return e.Fake == nil }

// Fake starts a kfake cluster that is closed when t ends.
func Fake(t testing.TB, opts ...kfake.Opt) *Env {
	t.Helper()
	opts = append([]kfake.Opt{kfake.NumBrokers(1)}, opts...)
	c, err := kfake.NewCluster(opts...)
	if err != nil {
		t.Fatalf("kfake: %v", err)
	}
	t.Cleanup(c.Close)
	return &Env{Brokers: c.ListenAddrs(), Fake: c}
}

// RealBrokers returns the brokers in EOS_KAFKA_BROKERS, or nil.
func RealBrokers() []string {
	v := strings.TrimSpace(os.Getenv(EnvBrokers))
	if v == "" {
		return nil
	}
	return strings.Split(v, ",")
}

// Real returns the cluster in EOS_KAFKA_BROKERS, skipping t when unset.
func Real(t testing.TB) *Env {
	t.Helper()
	b := RealBrokers()
	if b == nil {
		t.Skipf("%s is not set; start a broker with `integration/kafka/kafka.sh start` and set %s=127.0.0.1:9092", EnvBrokers, EnvBrokers)
	}
	t.Logf("broker: %s", strings.Join(b, ","))
	return &Env{Brokers: b}
}

// Client returns a client to the broker, closed when t ends.
func (e *Env) Client(t testing.TB, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(e.Brokers...)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// Admin returns an admin client on a new Client, closed when t ends.
func (e *Env) Admin(t testing.TB) *kadm.Client {
	t.Helper()
	return kadm.NewClient(e.Client(t))
}

// Name returns prefix plus a random suffix, so tests on a shared real
// cluster never see each other's topics and groups.
func (e *Env) Name(prefix string) string {
	return fmt.Sprintf("%s-%08x", prefix, rand.Uint32())
}

// CreateTopics creates topics with partitions each and the cluster's
// default replication factor, and waits until they are in the metadata.
func (e *Env) CreateTopics(t testing.TB, partitions int32, topics ...string) {
	t.Helper()
	e.CreateTopicsWith(t, partitions, nil, topics...)
}

// CreateTopicsWith is CreateTopics with topic configs, such as a smaller
// max.message.bytes.
func (e *Env) CreateTopicsWith(t testing.TB, partitions int32, configs map[string]*string, topics ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := kafkautil.CreateTopics(ctx, e.Admin(t), partitions, -1, configs, topics...); err != nil {
		t.Fatalf("create topics %v: %v", topics, err)
	}
}

// Config returns a valid runtime config for appID against this broker,
// with timeouts short enough for tests.
func (e *Env) Config(appID, instanceID string, g config.Guarantee) config.Config {
	c := config.Default()
	c.Brokers = e.Brokers
	c.AppID = appID
	c.InstanceID = instanceID
	c.Guarantee = g
	c.SessionTimeout = 6 * time.Second
	c.RebalanceTimeout = 10 * time.Second
	c.ConnectTimeout = 5 * time.Second
	return c
}
