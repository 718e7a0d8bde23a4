package kafkatest

import (
	"context"
	"fmt"
	"net"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"
	"github.com/testcontainers/testcontainers-go"
	"github.com/twmb/franz-go/pkg/kgo"
)

// EnvImage overrides the Kafka image tests start in a container.
const EnvImage = "EOS_KAFKA_IMAGE"

// DefaultImage is the official image of the Kafka version CI runs.
const DefaultImage = "apache/kafka:4.4.0"

// shared is the one container a test binary starts, on first use.
var shared struct {
	once  sync.Once
	c     testcontainers.Container
	env   *Env
	skip  string // why there is no container engine
	err   error
	image string
}

// Broker returns the broker for integration tests, in this order: the
// cluster in EOS_KAFKA_BROKERS; a Kafka container started through
// testcontainers-go when a container engine answers; else it skips t.
func Broker(t testing.TB) *Env {
	t.Helper()
	if RealBrokers() != nil {
		return Real(t)
	}
	shared.once.Do(startContainer)
	switch {
	case shared.skip != "":
		t.Skipf("%s is not set and no container engine answers (%s); start a broker with `integration/kafka/kafka.sh start` and set %s=127.0.0.1:9092, or `docker compose up -d`", EnvBrokers, shared.skip, EnvBrokers)
	case shared.err != nil:
		t.Fatalf("starting a Kafka container from %s: %v", shared.image, shared.err)
	}
	t.Logf("broker: container %s at %s", shared.image, shared.env.Brokers[0])
	return shared.env
}

// Main runs the tests and then terminates the container Broker started,
// whether they passed or not. Call it from TestMain: os.Exit(Main(m)).
func Main(m *testing.M) int {
	code := m.Run()
	if shared.c != nil {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := shared.c.Terminate(ctx); err != nil {
			fmt.Fprintf(os.Stderr, "kafkatest: terminating container %s: %v\n", shared.c.GetContainerID(), err)
			if code == 0 {
				code = 1
			}
		} else {
			fmt.Fprintf(os.Stderr, "kafkatest: terminated container %s (%s)\n", shared.c.GetContainerID()[:12], shared.image)
		}
	}
	return code
}

// EngineAnswers reports why no container engine (Docker, or podman's
// Docker-compatible socket in DOCKER_HOST) can be used, or "" when one
// answers: tests start containers only then, and skip saying why
// otherwise.
func EngineAnswers(ctx context.Context) (reason string) {
	defer func() {
		if r := recover(); r != nil {
			reason = fmt.Sprint(r)
		}
	}()
	cli, err := testcontainers.NewDockerClientWithOpts(ctx)
	if err != nil {
		return err.Error()
	}
	defer cli.Close()
	if _, err := cli.Ping(ctx, client.PingOptions{}); err != nil {
		return err.Error()
	}
	return ""
}

func startContainer() {
	shared.image = DefaultImage
	if v := os.Getenv(EnvImage); v != "" {
		shared.image = v
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	reason := EngineAnswers(ctx)
	cancel()
	if reason != "" {
		shared.skip = reason
		return
	}
	port, cport := FreePort(), FreePort()
	if port == 0 || cport == 0 {
		shared.err = fmt.Errorf("no free port on 127.0.0.1")
		return
	}
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	// Host networking: the broker advertises 127.0.0.1:port, which is then
	// right for clients on this machine with Docker and podman alike.
	req := testcontainers.ContainerRequest{
		Image: shared.image,
		Env: map[string]string{
			"CLUSTER_ID":                                             "ZW9zZmxvdy10ZXN0Y29udGFpbmVy",
			"KAFKA_NODE_ID":                                          "1",
			"KAFKA_PROCESS_ROLES":                                    "broker,controller",
			"KAFKA_LISTENERS":                                        fmt.Sprintf("PLAINTEXT://127.0.0.1:%d,CONTROLLER://127.0.0.1:%d", port, cport),
			"KAFKA_ADVERTISED_LISTENERS":                             "PLAINTEXT://" + addr,
			"KAFKA_CONTROLLER_LISTENER_NAMES":                        "CONTROLLER",
			"KAFKA_CONTROLLER_QUORUM_VOTERS":                         fmt.Sprintf("1@127.0.0.1:%d", cport),
			"KAFKA_LISTENER_SECURITY_PROTOCOL_MAP":                   "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
			"KAFKA_INTER_BROKER_LISTENER_NAME":                       "PLAINTEXT",
			"KAFKA_OFFSETS_TOPIC_REPLICATION_FACTOR":                 "1",
			"KAFKA_TRANSACTION_STATE_LOG_REPLICATION_FACTOR":         "1",
			"KAFKA_TRANSACTION_STATE_LOG_MIN_ISR":                    "1",
			"KAFKA_SHARE_COORDINATOR_STATE_TOPIC_REPLICATION_FACTOR": "1",
			"KAFKA_SHARE_COORDINATOR_STATE_TOPIC_MIN_ISR":            "1",
			"KAFKA_GROUP_INITIAL_REBALANCE_DELAY_MS":                 "0",
			"KAFKA_LOG_DIRS":                                         "/tmp/kraft-combined-logs",
			"KAFKA_HEAP_OPTS":                                        "-Xmx512m -Xms256m",
		},
		HostConfigModifier: func(hc *container.HostConfig) { hc.NetworkMode = "host" },
	}
	ctx, cancel = context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	begin := time.Now()
	c, err := testcontainers.GenericContainer(ctx, testcontainers.GenericContainerRequest{ContainerRequest: req, Started: true})
	if c != nil {
		shared.c = c
	}
	if err != nil {
		shared.err = err
		return
	}
	if err := waitReady(ctx, addr); err != nil {
		shared.err = fmt.Errorf("container %s started but Kafka at %s never answered: %w", c.GetContainerID()[:12], addr, err)
		return
	}
	fmt.Fprintf(os.Stderr, "kafkatest: started container %s (%s) on %s in %s\n",
		c.GetContainerID()[:12], shared.image, addr, time.Since(begin).Round(time.Millisecond))
	shared.env = &Env{Brokers: []string{addr}}
}

// waitReady pings addr until a broker answers a metadata request; opts
// add how to reach it, such as TLS and SASL.
func waitReady(ctx context.Context, addr string, opts ...kgo.Opt) error {
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addr), kgo.DialTimeout(2 * time.Second)}, opts...)...)
	if err != nil {
		return err
	}
	defer cl.Close()
	for {
		pctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		err := cl.Ping(pctx)
		cancel()
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// FreePort is a TCP port on 127.0.0.1 that was free a moment ago, for a
// container on the host network; 0 when none could be had.
func FreePort() int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}
