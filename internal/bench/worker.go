package bench

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/eosflow/eosflow/config"
)

// EnvSASLPassword carries the SASL password to worker processes, which get
// everything else on their command line where ps would show it.
const EnvSASLPassword = "EOS_SASL_PASSWORD"

// WorkerSpec is one case's pipeline as a worker process runs it.
type WorkerSpec struct {
	Case           string        `json:"case"` // a guarantee, or RawFranzGo
	Brokers        []string      `json:"brokers"`
	TLS            config.TLS    `json:"tls"`
	SASLMechanism  string        `json:"sasl_mechanism,omitempty"`
	SASLUser       string        `json:"sasl_user,omitempty"`
	Input          string        `json:"input"`
	Output         string        `json:"output"`
	AppID          string        `json:"app_id"`
	CommitInterval time.Duration `json:"commit_interval"`
	BatchRecords   int           `json:"batch_records"`
}

// Config is the pipeline configuration spec describes; the SASL password
// comes from EnvSASLPassword.
func (s WorkerSpec) Config() (config.Config, error) {
	cfg := config.Default()
	cfg.Brokers = s.Brokers
	cfg.TLS = s.TLS
	cfg.SASL = config.SASL{Mechanism: s.SASLMechanism, Username: s.SASLUser, Password: os.Getenv(EnvSASLPassword)}
	cfg.AppID = s.AppID
	cfg.InstanceID = "bench"
	cfg.CommitInterval = s.CommitInterval
	cfg.MaxBatchRecords = s.BatchRecords
	cfg.Guarantee = config.Guarantee(s.Case)
	if s.Case == RawFranzGo {
		cfg.Guarantee = config.ExactlyOnce
	}
	if err := cfg.Validate(); err != nil {
		return cfg, fmt.Errorf("bench worker %s: %w", s.Case, err)
	}
	return cfg, nil
}

// ReadyLine is what a worker prints once its pipeline is built and about
// to consume (the Kafka Streams app prints the same).
const ReadyLine = "READY"

// Work runs spec's pipeline until ctx ends, printing ReadyLine to ready
// once it starts. It is what `eosctl bench worker` runs in a child
// process, so that the process under test holds nothing but the pipeline.
func Work(ctx context.Context, spec WorkerSpec, ready io.Writer) error {
	cfg, err := spec.Config()
	if err != nil {
		return err
	}
	if spec.Case == RawFranzGo {
		fmt.Fprintln(ready, ReadyLine)
		return RunRaw(ctx, cfg, spec.Input, spec.Output, nil)
	}
	if !cfg.Guarantee.Valid() {
		return fmt.Errorf("bench worker: unknown case %q", spec.Case)
	}
	r, err := NewRunner(cfg, spec.Input, spec.Output)
	if err != nil {
		return err
	}
	fmt.Fprintln(ready, ReadyLine)
	return r.Run(ctx)
}

// pipeline is a running process under test: a goroutine of this process
// or a child process.
type pipeline interface {
	// pid is the process to measure: 0 for this one.
	pid() int
	// ready is closed when the pipeline said it started.
	ready() <-chan struct{}
	// exited is closed if the pipeline stops on its own (a failure).
	exited() <-chan struct{}
	// stop ends the pipeline and returns why it failed, if it did.
	stop() error
}

// inProcess runs a Go case in a goroutine of this process.
type inProcess struct {
	cancel context.CancelFunc
	readyc chan struct{}
	done   chan struct{}
	err    error
}

func startInProcess(ctx context.Context, spec WorkerSpec) *inProcess {
	ctx, cancel := context.WithCancel(ctx)
	p := &inProcess{cancel: cancel, readyc: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(p.done)
		p.err = Work(ctx, spec, &lineSignal{line: ReadyLine, c: p.readyc})
	}()
	return p
}

func (p *inProcess) pid() int                { return 0 }
func (p *inProcess) ready() <-chan struct{}  { return p.readyc }
func (p *inProcess) exited() <-chan struct{} { return p.done }
func (p *inProcess) stop() error {
	p.cancel()
	<-p.done
	return p.err
}

// lineSignal closes c when line is written to it.
type lineSignal struct {
	line string
	c    chan struct{}
	once sync.Once
}

func (l *lineSignal) Write(b []byte) (int, error) {
	if strings.TrimSpace(string(b)) == l.line {
		l.once.Do(func() { close(l.c) })
	}
	return len(b), nil
}

// child is a pipeline in its own process: an eosctl bench worker or the
// Kafka Streams app. Its stdout is scanned for ReadyLine; the tail of its
// stderr is kept for error messages.
type child struct {
	name   string
	cmd    *exec.Cmd
	readyc chan struct{}
	done   chan struct{}
	werr   error
	stderr *tailBuffer
	killed bool
}

func startChild(name string, argv []string, env []string) (*child, error) {
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), env...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	c := &child{name: name, cmd: cmd, readyc: make(chan struct{}), done: make(chan struct{}), stderr: &tailBuffer{max: 8 << 10}}
	cmd.Stderr = c.stderr
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s (%s): %w", name, argv[0], err)
	}
	go func() {
		var once sync.Once
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if strings.TrimSpace(sc.Text()) == ReadyLine {
				once.Do(func() { close(c.readyc) })
			}
		}
		c.werr = cmd.Wait()
		close(c.done)
	}()
	return c, nil
}

func (c *child) pid() int                { return c.cmd.Process.Pid }
func (c *child) ready() <-chan struct{}  { return c.readyc }
func (c *child) exited() <-chan struct{} { return c.done }

// stop sends SIGTERM, so the pipeline commits its open batch and leaves
// the group, and kills it after 45 seconds.
func (c *child) stop() error {
	select {
	case <-c.done:
		return c.failure()
	default:
	}
	_ = c.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-c.done:
		return nil // asked to stop: its exit status says nothing more
	case <-time.After(45 * time.Second):
		_ = c.cmd.Process.Kill()
		<-c.done
		return fmt.Errorf("%s did not stop within 45s of SIGTERM and was killed", c.name)
	}
}

// failure explains an exit nobody asked for.
func (c *child) failure() error {
	msg := strings.TrimSpace(c.stderr.String())
	if msg == "" {
		msg = "no output on stderr"
	}
	if c.werr == nil {
		return fmt.Errorf("%s exited early: %s", c.name, msg)
	}
	return fmt.Errorf("%s exited early (%v): %s", c.name, c.werr, msg)
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	b   []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if len(t.b) > t.max {
		t.b = append(t.b[:0], t.b[len(t.b)-t.max:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.b)
}

// errSkipped marks a case that cannot run here; its message says why.
var errSkipped = errors.New("skipped")
