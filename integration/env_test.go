package integration

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/eosflow/eosflow/tools/kafkatest"
	"github.com/twmb/franz-go/pkg/kadm"
)

var (
	versionOnce sync.Once
	version     string
)

// realEnv is the cluster in EOS_KAFKA_BROKERS, else a Kafka container, else
// a skip. An address that does not answer fails the test within seconds,
// naming the address.
func realEnv(t testing.TB) *kafkatest.Env {
	t.Helper()
	env := kafkatest.Broker(t)
	versionOnce.Do(func() { version = brokerVersion(env) })
	if version == "" {
		t.Fatalf("no Kafka answers at %s (EOS_KAFKA_BROKERS); start one with integration/kafka/kafka.sh start", strings.Join(env.Brokers, ","))
	}
	t.Logf("running against Apache Kafka %s at %s", version, strings.Join(env.Brokers, ","))
	return env
}

// brokerVersion guesses the Kafka version from the APIs the brokers offer,
// or returns "" if none answers in ten seconds.
func brokerVersion(env *kafkatest.Env) string {
	cl, err := kadmClient(env)
	if err != nil {
		return ""
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	vs, err := cl.ApiVersions(ctx)
	if err != nil {
		return ""
	}
	var guesses []string
	for _, v := range vs.Sorted() {
		if v.Err == nil {
			guesses = append(guesses, v.VersionGuess())
		}
	}
	return strings.Join(guesses, ", ")
}

// restartCmd is the command that hard-restarts the broker, or a skip.
func restartCmd(t testing.TB) string {
	cmd := os.Getenv("EOS_KAFKA_RESTART_CMD")
	if cmd == "" {
		t.Skip("EOS_KAFKA_RESTART_CMD is not set; e.g. \"integration/kafka/kafka.sh restart --hard\"")
	}
	return cmd
}

// shell runs a command line, failing t with its output if it fails.
func shell(t testing.TB, line string) {
	t.Helper()
	begin := time.Now()
	out, err := exec.Command("bash", "-c", line).CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v\n%s", line, err, out)
	}
	t.Logf("%s took %s", line, time.Since(begin).Round(time.Millisecond))
}

func kadmClient(env *kafkatest.Env) (*kadm.Client, error) {
	return kadm.NewOptClient(kgoSeeds(env)...)
}
