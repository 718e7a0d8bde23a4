package kafkatest

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/eosflow/eosflow/config"
	"github.com/moby/moby/api/types/container"
	"github.com/testcontainers/testcontainers-go"
	"github.com/twmb/franz-go/pkg/kgo"
)

// EnvDockerHost is the container engine's API address, as Docker clients
// and testcontainers-go read it (podman.sh prints it).
const EnvDockerHost = "DOCKER_HOST"

// SecureAdmin is the super user of the broker SecureContainer starts.
const SecureAdmin = "admin"

// secureMount is where SecureContainer mounts the secrets in the container.
const secureMount = "/etc/kafka/secrets"

// SecureContainer starts a secured Kafka container for t: SASL_SSL with
// SCRAM-SHA-512 on a free loopback port, and the StandardAuthorizer
// denying whatever no ACL allows except to the super user SecureAdmin. It
// returns the broker connecting as SecureAdmin; Env.As gives another
// user's config. Fresh secrets (CA, broker certificate, admin password)
// come from integration/container/secure-certs.sh in a temporary directory
// mounted read-only into the container, whose KAFKA_SECURE_DIR names it:
// only the image integration/container/build-image.sh makes has that mode.
// The container is terminated when t ends.
//
// Unlike Broker, it skips t unless both EOS_KAFKA_IMAGE and DOCKER_HOST
// are set, and it never uses EOS_KAFKA_BROKERS or EOS_KAFKA_SECURE_ENV:
// it runs only where containers were asked for, against its own broker.
func SecureContainer(t testing.TB) *Env {
	t.Helper()
	image, host := os.Getenv(EnvImage), os.Getenv(EnvDockerHost)
	if image == "" || host == "" {
		t.Skipf("%s and %s are not both set; build the image with `integration/container/build-image.sh`, run `integration/container/podman.sh start` and set %s=unix:///run/eosflow-podman.sock TESTCONTAINERS_RYUK_DISABLED=true %s=localhost/apache-kafka:local",
			EnvImage, EnvDockerHost, EnvDockerHost, EnvImage)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	reason := EngineAnswers(ctx)
	cancel()
	if reason != "" {
		t.Fatalf("%s=%s does not answer (%s); start the engine, e.g. `integration/container/podman.sh start`", EnvDockerHost, host, reason)
	}

	dir := filepath.Join(t.TempDir(), "secrets")
	script, err := repoFile("integration/container/secure-certs.sh")
	if err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("bash", script, dir).CombinedOutput(); err != nil {
		t.Fatalf("making the broker's secrets: bash %s %s: %v\n%s", script, dir, err, out)
	}
	password, err := os.ReadFile(filepath.Join(dir, "admin.password"))
	if err != nil {
		t.Fatalf("secure-certs.sh made no admin password: %v", err)
	}

	port, cport := FreePort(), FreePort()
	if port == 0 || cport == 0 {
		t.Fatal("no free port on 127.0.0.1")
	}
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	// The entry point renders the secure listeners and formats the storage
	// with the admin's SCRAM credential; host networking, so the broker's
	// advertised 127.0.0.1 matches its certificate for clients here.
	req := testcontainers.ContainerRequest{
		Image: image,
		Env: map[string]string{
			"KAFKA_SECURE_DIR":      secureMount,
			"KAFKA_PORT":            strconv.Itoa(port),
			"KAFKA_CONTROLLER_PORT": strconv.Itoa(cport),
			"CLUSTER_ID":            "ZW9zZmxvdy1zZWN1cmUwMQ",
			"KAFKA_LOG_DIRS":        "/tmp/kraft-combined-logs",
			"KAFKA_HEAP_OPTS":       "-Xmx512m -Xms256m",
		},
		HostConfigModifier: func(hc *container.HostConfig) {
			hc.NetworkMode = "host"
			hc.Binds = append(hc.Binds, dir+":"+secureMount+":ro")
		},
	}
	ctx, cancel = context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	begin := time.Now()
	c, err := testcontainers.GenericContainer(ctx, testcontainers.GenericContainerRequest{ContainerRequest: req, Started: true})
	if c != nil {
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			if err := c.Terminate(ctx); err != nil {
				t.Errorf("terminating the secured container %s: %v", c.GetContainerID(), err)
			}
		})
	}
	if err != nil {
		t.Fatalf("starting a secured Kafka container from %s: %v", image, err)
	}
	env := &Env{
		Brokers: []string{addr},
		TLS:     config.TLS{Enabled: true, CAFile: filepath.Join(dir, "ca.pem")},
		SASL:    config.SASL{Mechanism: config.SASLScramSHA512, Username: SecureAdmin, Password: strings.TrimSpace(string(password))},
	}
	if err := waitRunning(ctx, c, addr, env.ClientOpts(t)...); err != nil {
		t.Fatalf("container %s (%s) started, but no broker at %s answers %s over SASL_SSL: %v\n"+
			"secure mode needs the image integration/container/build-image.sh makes (%s=localhost/apache-kafka:local); the container's log ends:\n%s",
			c.GetContainerID()[:12], image, addr, SecureAdmin, err, EnvImage, logTail(c, 40))
	}
	t.Logf("secured broker: container %s (%s) at %s as %s (SASL_SSL, %s, ACLs), ready in %s",
		c.GetContainerID()[:12], image, addr, SecureAdmin, config.SASLScramSHA512, time.Since(begin).Round(time.Millisecond))
	return env
}

// waitRunning is waitReady that gives up as soon as c exits, e.g. when
// the image refuses the secrets, instead of at ctx's deadline.
func waitRunning(ctx context.Context, c testcontainers.Container, addr string, opts ...kgo.Opt) error {
	for {
		pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		err := waitReady(pctx, addr, opts...)
		cancel()
		if err == nil {
			return nil
		}
		if st, serr := c.State(ctx); serr == nil && !st.Running {
			return fmt.Errorf("the container %s (exit code %d) after: %w", st.Status, st.ExitCode, err)
		}
		if ctx.Err() != nil {
			return err
		}
	}
}

// logTail returns the last n lines of c's log, for a failure message.
func logTail(c testcontainers.Container, n int) string {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	rc, err := c.Logs(ctx)
	if err != nil {
		return "(no log: " + err.Error() + ")"
	}
	defer rc.Close()
	var lines []string
	sc := bufio.NewScanner(rc)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		lines = append(lines, sc.Text())
		if len(lines) > n {
			lines = lines[1:]
		}
	}
	return strings.Join(lines, "\n")
}

// repoFile finds rel in the module's root, the first directory above the
// working directory (a package directory under go test) with a go.mod.
func repoFile(rel string) (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			p := filepath.Join(dir, rel)
			if _, err := os.Stat(p); err != nil {
				return "", fmt.Errorf("%s: %w; run the tests from a checkout of the repository", p, err)
			}
			return p, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.mod above the working directory; run the tests from a checkout of the repository")
		}
		dir = parent
	}
}
