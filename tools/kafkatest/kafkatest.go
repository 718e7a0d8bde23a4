// Package kafkatest gives tests a broker: the real cluster named by
// EOS_KAFKA_BROKERS when set, else an in-process kfake cluster; and the
// secured cluster (SASL_SSL, ACLs) named by EOS_KAFKA_SECURE_ENV, also
// through its mutual-TLS listener.
package kafkatest

import (
	"bufio"
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

// EnvSecure names a file of KEY=VALUE lines, as `kafka.sh secure-env`
// prints them, describing a secured cluster and its super user.
const EnvSecure = "EOS_KAFKA_SECURE_ENV"

// Env is a broker for one test.
type Env struct {
	Brokers []string
	Fake    *kfake.Cluster // nil on a real cluster
	// TLS and SASL are how every client of a secured cluster connects,
	// so helpers and pipeline configs built from Env reach it the same
	// way; both are zero on a plain cluster.
	TLS  config.TLS
	SASL config.SASL
	// AppSASL, when set, is who the pipelines built from Config run as,
	// while the helpers (topics, seeding, draining) stay with SASL: so a
	// scenario can run its pipelines with least-privilege ACLs.
	AppSASL config.SASL
	// Certs, on the mutual-TLS listener (SecureMTLS), are the client
	// certificates kafka.sh made; nil elsewhere.
	Certs *MTLSCerts
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

// Secure returns the secured cluster described by the file in
// EOS_KAFKA_SECURE_ENV, connecting as its super user, and skips t when the
// variable is unset: such a cluster needs `kafka.sh start --secure`.
func Secure(t testing.TB) *Env {
	t.Helper()
	path := os.Getenv(EnvSecure)
	if path == "" {
		t.Skipf("%s is not set; start a secured broker with `EOS_KAFKA_PORT=19600 integration/kafka/kafka.sh start --secure` and set %s to the secure.env file it prints", EnvSecure, EnvSecure)
	}
	vars, err := readEnvFile(path)
	if err != nil {
		t.Fatalf("%s: %v", EnvSecure, err)
	}
	var c config.Config
	if v := vars["EOS_BROKERS"]; v != "" {
		c.Brokers = strings.Split(v, ",")
	}
	c.TLS = config.TLS{Enabled: vars["EOS_TLS_ENABLED"] == "true", CAFile: vars["EOS_TLS_CA_FILE"]}
	c.SASL = config.SASL{Mechanism: vars["EOS_SASL_MECHANISM"], Username: vars["EOS_SASL_USERNAME"], Password: vars["EOS_SASL_PASSWORD"]}
	if len(c.Brokers) == 0 || !c.TLS.Enabled || c.SASL.Mechanism == "" {
		t.Fatalf("%s=%s names no secured cluster: want EOS_BROKERS, EOS_TLS_ENABLED=true and EOS_SASL_MECHANISM", EnvSecure, path)
	}
	t.Logf("secured broker: %s as %s (%s)", strings.Join(c.Brokers, ","), c.SASL.Username, c.SASL.Mechanism)
	return &Env{Brokers: c.Brokers, TLS: c.TLS, SASL: c.SASL}
}

// readEnvFile reads KEY=VALUE lines, skipping blanks and # comments.
func readEnvFile(path string) (map[string]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	vars := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			return nil, fmt.Errorf("%s: line %q is not KEY=VALUE", path, line)
		}
		vars[k] = v
	}
	return vars, sc.Err()
}

// As returns a copy of e that authenticates as user, so a test can run a
// pipeline as a least-privilege principal while setup stays with the
// super user.
func (e *Env) As(user, password string) *Env {
	c := *e
	c.SASL.Username, c.SASL.Password = user, password
	return &c
}

// ClientOpts returns the options that reach the brokers: the seeds and,
// on a secured cluster, TLS and SASL.
func (e *Env) ClientOpts(t testing.TB) []kgo.Opt {
	t.Helper()
	c := config.Config{Brokers: e.Brokers, TLS: e.TLS, SASL: e.SASL}
	opts, err := c.KgoOpts()
	if err != nil {
		t.Fatalf("client options: %v", err)
	}
	return opts
}

// Client returns a client to the broker, closed when t ends.
func (e *Env) Client(t testing.TB, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append(e.ClientOpts(t), opts...)...)
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
	c.TLS, c.SASL = e.TLS, e.SASL
	if e.AppSASL.Mechanism != "" {
		c.SASL = e.AppSASL
	}
	return c
}
