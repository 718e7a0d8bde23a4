package chaos

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"time"
)

// broker is the cluster under test, as far as restarting it goes.
type broker interface {
	addrs() []string
	describe() string
	// restart hard-restarts the cluster and returns once it accepts
	// connections again.
	restart(ctx context.Context) error
	close()
}

// ErrEmbeddedRestarts refuses broker restarts of the embedded broker: its
// persistence does not replay transactions faithfully across a hard
// restart (a transaction in flight is aborted in memory only, with no
// marker; the producer's next committed transaction is hidden from
// read_committed readers; a second restart exposes records never
// committed), so a run through its restarts can report loss or
// duplicates that Kafka would not have, or miss ones it would. Restart
// evidence comes from Apache Kafka.
var ErrEmbeddedRestarts = errors.New("--broker-restarts needs a real Apache Kafka: the embedded broker loses and invents " +
	"committed records across hard restarts, so no verdict through them counts; start one with " +
	"`integration/kafka/kafka.sh start` and run `eosctl verify --brokers $(integration/kafka/kafka.sh bootstrap) " +
	"--broker-restarts 2 --broker-restart-cmd \"integration/kafka/kafka.sh restart --hard\"` (EOS_BROKERS may stand for --brokers), " +
	"or drop --broker-restarts on the embedded broker")

// embedded is `eosctl dev broker` run as a child process on a free port,
// with a data directory of its own. It is never restarted: see
// ErrEmbeddedRestarts.
type embedded struct {
	exe, dir, addr string
	partitions     int32
	log            io.Writer
	cmd            *exec.Cmd
	done           chan struct{}
}

// startEmbedded starts the broker on a free loopback port.
func startEmbedded(ctx context.Context, exe, dir string, partitions int32, log io.Writer) (*embedded, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("chaos: finding a free port for the embedded broker: %w", err)
	}
	addr := l.Addr().String()
	l.Close()
	b := &embedded{exe: exe, dir: dir, addr: addr, partitions: partitions, log: log}
	if err := b.start(ctx); err != nil {
		return nil, err
	}
	return b, nil
}

func (b *embedded) addrs() []string  { return []string{b.addr} }
func (b *embedded) describe() string { return "embedded (eosctl dev broker) " + b.addr }

func (b *embedded) start(ctx context.Context) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		cmd := exec.Command(b.exe, "dev", "broker", "--listen", b.addr, "--data-dir", b.dir,
			"--partitions", strconv.Itoa(int(b.partitions)),
			"--broker-config", "group.min.session.timeout.ms=1000")
		cmd.Stdout, cmd.Stderr = b.log, b.log
		cmd.SysProcAttr = childAttr()
		if err := cmd.Start(); err != nil {
			return fmt.Errorf("chaos: starting the embedded broker (%s dev broker): %w", b.exe, err)
		}
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		b.cmd, b.done = cmd, done
		err := waitListening(ctx, b.addr, done, time.Until(deadline))
		if err == nil {
			return nil
		}
		b.kill()
		if ctx.Err() != nil || time.Now().After(deadline) {
			return fmt.Errorf("chaos: the embedded broker did not come up on %s: %w; see its log", b.addr, err)
		}
		time.Sleep(200 * time.Millisecond) // e.g. the port is still held: try again
	}
}

// errExited means the broker process ended while we waited for it.
var errExited = errors.New("the broker process exited")

// waitListening dials addr until it accepts or the process exits.
func waitListening(ctx context.Context, addr string, exited <-chan struct{}, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
			return nil
		}
		select {
		case <-exited:
			return errExited
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return err
		}
	}
}

func (b *embedded) kill() {
	if b.cmd == nil {
		return
	}
	_ = b.cmd.Process.Signal(syscall.SIGKILL)
	<-b.done
	b.cmd = nil
}

// restart refuses: Options.Validate already turned the run down.
func (b *embedded) restart(context.Context) error { return ErrEmbeddedRestarts }

// close stops the broker cleanly, so its data directory is complete.
func (b *embedded) close() {
	if b.cmd == nil {
		return
	}
	_ = b.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-b.done:
		b.cmd = nil
	case <-time.After(10 * time.Second):
		b.kill()
	}
}

// external is a cluster the verifier only connects to; a shell command
// restarts it.
type external struct {
	brokers    []string
	restartCmd string
	dir        string // where the command runs; "" is the current directory
	log        io.Writer
}

func (b *external) addrs() []string  { return b.brokers }
func (b *external) describe() string { return fmt.Sprint(b.brokers) }
func (b *external) close()           {}

// restart runs the restart command through sh and waits for it, at most
// five minutes.
func (b *external) restart(ctx context.Context) error {
	if b.restartCmd == "" {
		return errors.New("chaos: no broker restart command; pass --broker-restart-cmd")
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "sh", "-c", b.restartCmd)
	cmd.Dir = b.dir
	cmd.Stdout, cmd.Stderr = b.log, b.log
	cmd.Env = os.Environ()
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("chaos: broker restart command %q failed: %w; its output is in the broker log", b.restartCmd, err)
	}
	return nil
}
