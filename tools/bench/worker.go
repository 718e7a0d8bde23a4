package bench

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/eosflow/eosflow/config"
	"github.com/eosflow/eosflow/eos"
	"github.com/eosflow/eosflow/state"
	"github.com/eosflow/eosflow/state/pebble"
	"github.com/eosflow/eosflow/topology"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// EnvSASLPassword carries the SASL password to worker processes, which get
// everything else on their command line where ps would show it.
const EnvSASLPassword = "EOS_SASL_PASSWORD"

// EnvRedisURL and EnvPostgresURL carry WorkerSpec.RedisURL and PostgresURL
// to worker processes, as URLs may hold passwords. They are the variables
// eosctl bench reads its --redis-url and --postgres-url defaults from.
const (
	EnvRedisURL    = "EOS_REDIS_URL"
	EnvPostgresURL = "EOS_POSTGRES_URL"
)

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
	// Adaptive is config adaptive_commit.
	Adaptive     bool `json:"adaptive,omitempty"`
	BatchRecords int  `json:"batch_records"`
	// MaxMemory is config max_memory; 0: its default.
	MaxMemory config.ByteSize `json:"max_memory,omitempty"`
	// Pipeline is PipelineUpper (default), PipelineCount or
	// PipelineWindowed; the latter two keep their store in the engine
	// State names (StateMemory or StatePebble), in StateDir (config
	// state_dir; empty: its default).
	Pipeline string `json:"pipeline,omitempty"`
	// Rounds is PipelineCPU's rounds of SHA-256 a record; 0: CPURounds.
	Rounds   int    `json:"rounds,omitempty"`
	State    string `json:"state,omitempty"`
	StateDir string `json:"state_dir,omitempty"`
	// Window and Grace shape PipelineWindowed's tumbling windows; Final
	// emits each window once, when it closes, instead of every update.
	Window time.Duration `json:"window,omitempty"`
	Grace  time.Duration `json:"grace,omitempty"`
	Final  bool          `json:"final,omitempty"`
	// RestoreRecords, when positive, makes the worker print a
	// RestoredLine once its stores restored that many changelog records.
	RestoreRecords int `json:"restore_records,omitempty"`
	// Metrics serves the runtime's metrics on a free local port and
	// scrapes them every second; Traced turns on eos.Tracing with every
	// span exported to a discarding exporter. Both measure what
	// observability costs.
	Metrics bool `json:"metrics,omitempty"`
	Traced  bool `json:"traced,omitempty"`
	// Dedup puts a topology.Dedup node whose effect does nothing in front
	// of the upper-casing, its ids in the store named: DedupMemory,
	// DedupRedis or DedupBloom. DedupName keeps the run's ids apart in
	// Redis (the key prefix, or the Bloom filter's name); DedupEntries is
	// the ids the run marks, which size the memory store and the filter.
	Dedup        string `json:"dedup,omitempty"`
	DedupName    string `json:"dedup_name,omitempty"`
	DedupEntries int    `json:"dedup_entries,omitempty"`
	// Workers is the framework's workers (config workers), or the raw
	// loop's GroupTransactSession clients, each on its own goroutine with
	// the transactional id of runcfg.ForWorker; 0 or 1: one.
	Workers int `json:"workers,omitempty"`
	// Table is the postgres pipeline's table of rows; its offsets table
	// is Table + "_offsets".
	Table string `json:"table,omitempty"`
	// RedisURL and PostgresURL stay off the command line, where ps would
	// show a password: a worker process reads them from EnvRedisURL and
	// EnvPostgresURL when they are empty.
	RedisURL    string `json:"-"`
	PostgresURL string `json:"-"`
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
	if s.CommitInterval > 0 { // the postgres pipeline's cases have none
		cfg.CommitInterval = s.CommitInterval
	}
	cfg.AdaptiveCommit = s.Adaptive
	cfg.MaxBatchRecords = s.BatchRecords
	cfg.MaxMemory = s.MaxMemory
	cfg.Guarantee = config.Guarantee(s.Case)
	if s.StateDir != "" {
		cfg.StateDir = s.StateDir
	}
	if s.Metrics {
		cfg.MetricsAddr = "127.0.0.1:0"
	}
	if s.Workers > 1 {
		cfg.Workers = config.Workers(s.Workers)
	}
	switch {
	case s.Case == RawFranzGo:
		cfg.Guarantee = config.ExactlyOnce
	case s.Pipeline == PipelinePostgres:
		// The sink's commit is the database's; the hand-written loop
		// commits offsets itself. Neither runs Kafka transactions.
		cfg.Guarantee = config.AtLeastOnce
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
	if spec.RedisURL == "" {
		spec.RedisURL = os.Getenv(EnvRedisURL)
	}
	if spec.PostgresURL == "" {
		spec.PostgresURL = os.Getenv(EnvPostgresURL)
	}
	cfg, err := spec.Config()
	if err != nil {
		return err
	}
	if spec.Case == RawFranzGo {
		transform := func(v []byte) ([]byte, error) { return Upper(v), nil }
		switch spec.Pipeline {
		case PipelineCPU:
			rounds := spec.rounds()
			transform = func(v []byte) ([]byte, error) { return Crunch(v, rounds) }
		case PipelineUpper, "":
		default:
			return fmt.Errorf("bench worker: the raw loop runs pipelines %s and %s, not %q", PipelineUpper, PipelineCPU, spec.Pipeline)
		}
		fmt.Fprintln(ready, ReadyLine)
		return runRawWorkers(ctx, cfg, spec.Input, spec.Output, transform)
	}
	if spec.Pipeline == PipelinePostgres {
		return workPostgres(ctx, cfg, spec, ready)
	}
	if !cfg.Guarantee.Valid() {
		return fmt.Errorf("bench worker: unknown case %q", spec.Case)
	}
	if spec.Workers > 1 && !scalable(spec.Pipeline) && spec.Pipeline != "" {
		return fmt.Errorf("bench worker: workers apply to pipelines %s and %s; run pipeline %s with one", PipelineUpper, PipelineCPU, spec.Pipeline)
	}
	if spec.Dedup != "" && spec.Pipeline != PipelineUpper && spec.Pipeline != "" {
		return fmt.Errorf("bench worker: a dedup store applies to pipeline %s only", PipelineUpper)
	}
	var top *topology.Topology
	switch spec.Pipeline {
	case PipelineUpper, "":
		if spec.State != "" || spec.RestoreRecords > 0 {
			return fmt.Errorf("bench worker: pipeline %s keeps no state; use pipeline %s or %s with a state engine, or %s with restore", PipelineUpper, PipelineCount, PipelineWindowed, PipelineCount)
		}
		if spec.Dedup == "" {
			top = Topology(spec.Input, spec.Output)
			break
		}
		store, err := openDedupStore(ctx, spec)
		if err != nil {
			return err
		}
		defer store.close()
		top = DedupTopology(spec.Input, spec.Output, store.Store, store.opts...)
	case PipelineCPU:
		if spec.State != "" || spec.RestoreRecords > 0 || spec.Dedup != "" {
			return fmt.Errorf("bench worker: pipeline %s keeps no state and no dedup store; drop them", PipelineCPU)
		}
		top = CPUTopology(spec.Input, spec.Output, spec.rounds())
	case PipelineCount:
		e, err := engine(spec.State)
		if err != nil {
			return err
		}
		top = CountTopology(spec.Input, spec.Output, e)
	case PipelineWindowed:
		e, err := engine(spec.State)
		if err != nil {
			return err
		}
		if spec.Window <= 0 || spec.Grace < 0 {
			return fmt.Errorf("bench worker: pipeline %s needs a positive window and a grace of at least 0, got %s and %s", PipelineWindowed, spec.Window, spec.Grace)
		}
		w := topology.Tumbling(spec.Window).Grace(spec.Grace)
		if spec.Final {
			w = w.FinalOnly()
		}
		top = WindowedTopology(spec.Input, spec.Output, e, w, spec.Window)
	default:
		return fmt.Errorf("bench worker: unknown pipeline %q; use %s", spec.Pipeline, strings.Join(Pipelines(), " or "))
	}
	var (
		opts []eos.Option
		rl   *restoreLog
	)
	if spec.RestoreRecords > 0 {
		rl = &restoreLog{}
		opts = append(opts, eos.Logger(zap.New(rl)))
	}
	if spec.Traced {
		tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(tracetest.NewNoopExporter()))
		defer func() { _ = tp.Shutdown(context.Background()) }()
		opts = append(opts, eos.Tracing(tp, nil))
	}
	r, err := eos.New(cfg, top, opts...)
	if err != nil {
		return err
	}
	if spec.Metrics {
		sctx, stopScrapes := context.WithCancel(ctx)
		defer stopScrapes()
		go scrape(sctx, r)
	}
	fmt.Fprintln(ready, ReadyLine)
	if rl == nil {
		return r.Run(ctx)
	}
	wctx, stopWatch := context.WithCancel(ctx)
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		watchRestore(wctx, r, rl, spec.RestoreRecords, time.Now(), ready)
	}()
	err = r.Run(ctx)
	stopWatch()
	<-watched
	return err
}

// engine is the state engine name names.
func engine(name string) (state.Engine, error) {
	switch name {
	case StateMemory:
		return state.Memory(), nil
	case StatePebble:
		return pebble.New(), nil
	}
	return nil, fmt.Errorf("bench worker: state engine %q is not one of %s, %s", name, StateMemory, StatePebble)
}

// RestoredLine starts the line a worker prints once its stores restored
// WorkerSpec.RestoreRecords changelog records; a Restored as JSON follows.
const RestoredLine = "RESTORED"

// Restored is what a worker measured of its restore.
type Restored struct {
	// Records is Stats.Restored: changelog records applied.
	Records uint64 `json:"records"`
	// Took is the time the runtime spent restoring, summed over its
	// restores, as it logs them ("state restored", took); 0 when it
	// logged none.
	Took time.Duration `json:"took"`
	// Wall is from Run's start to Stats.Restored reaching the target.
	Wall time.Duration `json:"wall"`
	// CPUAtStart is the process's CPU time when its first restore began:
	// the Kafka Streams app reports it, since it says READY only after.
	CPUAtStart time.Duration `json:"cpu_at_start,omitempty"`
}

// restoredMessage and its fields are what eos logs when a restore ends.
const restoredMessage = "state restored"

// restoreLog is a zap core keeping only the runtime's restore durations.
type restoreLog struct {
	mu      sync.Mutex
	took    time.Duration
	records uint64
}

func (l *restoreLog) Enabled(lvl zapcore.Level) bool    { return lvl >= zapcore.InfoLevel }
func (l *restoreLog) With([]zapcore.Field) zapcore.Core { return l }
func (l *restoreLog) Sync() error                       { return nil }
func (l *restoreLog) Check(e zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if e.Message == restoredMessage {
		return ce.AddCore(e, l)
	}
	return ce
}

func (l *restoreLog) Write(_ zapcore.Entry, fields []zapcore.Field) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, f := range fields {
		switch {
		case f.Key == "took" && f.Type == zapcore.DurationType:
			l.took += time.Duration(f.Integer)
		case f.Key == "records" && f.Type == zapcore.Uint64Type:
			l.records += uint64(f.Integer)
		}
	}
	return nil
}

// watchRestore prints a RestoredLine to w once r restored want records
// and logged how long that took, or, if it never did, when ctx ends (a
// restart after a crash restores only what its stores lost). The runtime
// counts a restore in Stats just before it logs it, so the count alone
// may come with a duration that misses the last restore's; a log line
// that never comes (filtered, or renamed) leaves Took 0 after a second,
// which the caller reports.
func watchRestore(ctx context.Context, r *eos.Runner, rl *restoreLog, want int, start time.Time, w io.Writer) {
	tick := time.NewTicker(2 * time.Millisecond)
	defer tick.Stop()
	var counted time.Time // when Stats reached want
	for {
		select {
		case <-ctx.Done():
			rl.mu.Lock()
			took := rl.took
			rl.mu.Unlock()
			printRestored(w, Restored{Records: r.Stats().Restored, Wall: time.Since(start), Took: took})
			return
		case <-tick.C:
		}
		got := r.Stats().Restored
		rl.mu.Lock()
		logged, took := rl.records, rl.took
		rl.mu.Unlock()
		if got < uint64(want) {
			continue
		}
		if counted.IsZero() {
			counted = time.Now()
		}
		if logged < got && time.Since(counted) < time.Second {
			continue
		}
		if logged < got {
			took = 0
		}
		printRestored(w, Restored{Records: got, Wall: time.Since(start), Took: took})
		return
	}
}

// printRestored writes rep to w as a RestoredLine.
func printRestored(w io.Writer, rep Restored) {
	b, _ := json.Marshal(rep)
	fmt.Fprintf(w, "%s %s\n", RestoredLine, b)
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
	// restored delivers the worker's RestoredLine, if it prints one.
	restored() <-chan Restored
	// stop ends the pipeline and returns why it failed, if it did.
	stop() error
}

// inProcess runs a Go case in a goroutine of this process.
type inProcess struct {
	cancel    context.CancelFunc
	readyc    chan struct{}
	restoredc chan Restored
	done      chan struct{}
	err       error
}

func startInProcess(ctx context.Context, spec WorkerSpec) *inProcess {
	ctx, cancel := context.WithCancel(ctx)
	p := &inProcess{cancel: cancel, readyc: make(chan struct{}), restoredc: make(chan Restored, 1), done: make(chan struct{})}
	go func() {
		defer close(p.done)
		p.err = Work(ctx, spec, &lineSignal{line: ReadyLine, c: p.readyc, restored: p.restoredc})
	}()
	return p
}

func (p *inProcess) pid() int                  { return 0 }
func (p *inProcess) ready() <-chan struct{}    { return p.readyc }
func (p *inProcess) exited() <-chan struct{}   { return p.done }
func (p *inProcess) restored() <-chan Restored { return p.restoredc }
func (p *inProcess) stop() error {
	p.cancel()
	<-p.done
	return p.err
}

// lineSignal closes c when line is written to it, and passes a
// RestoredLine on to restored.
type lineSignal struct {
	line     string
	c        chan struct{}
	restored chan Restored
	once     sync.Once
}

func (l *lineSignal) Write(b []byte) (int, error) {
	text := strings.TrimSpace(string(b))
	if text == l.line {
		l.once.Do(func() { close(l.c) })
	}
	passRestored(text, l.restored)
	return len(b), nil
}

// passRestored sends what a RestoredLine says to c, if line is one and c
// has room.
func passRestored(line string, c chan Restored) {
	rest, ok := strings.CutPrefix(line, RestoredLine+" ")
	if !ok {
		return
	}
	var r Restored
	if json.Unmarshal([]byte(rest), &r) != nil {
		return
	}
	select {
	case c <- r:
	default:
	}
}

// child is a pipeline in its own process: an eosctl bench worker or the
// Kafka Streams app. Its stdout is scanned for ReadyLine; the tail of its
// stderr is kept for error messages.
type child struct {
	name      string
	cmd       *exec.Cmd
	readyc    chan struct{}
	restoredc chan Restored
	done      chan struct{}
	werr      error
	stderr    *tailBuffer
	killed    bool
}

func startChild(name string, argv []string, env []string) (*child, error) {
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), env...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	c := &child{name: name, cmd: cmd, readyc: make(chan struct{}), restoredc: make(chan Restored, 1), done: make(chan struct{}), stderr: &tailBuffer{max: 8 << 10}}
	cmd.Stderr = c.stderr
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s (%s): %w", name, argv[0], err)
	}
	go func() {
		var once sync.Once
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			line := strings.TrimSpace(sc.Text())
			if line == ReadyLine {
				once.Do(func() { close(c.readyc) })
			}
			passRestored(line, c.restoredc)
		}
		c.werr = cmd.Wait()
		close(c.done)
	}()
	return c, nil
}

func (c *child) pid() int                  { return c.cmd.Process.Pid }
func (c *child) ready() <-chan struct{}    { return c.readyc }
func (c *child) exited() <-chan struct{}   { return c.done }
func (c *child) restored() <-chan Restored { return c.restoredc }

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

// kill ends the child with SIGKILL, as a crash would, and waits for it.
func (c *child) kill() error {
	select {
	case <-c.done:
		return c.failure()
	default:
	}
	if err := c.cmd.Process.Kill(); err != nil {
		return fmt.Errorf("killing %s: %w", c.name, err)
	}
	<-c.done
	return nil
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

// scrape reads r's /metrics every second until ctx ends, as Prometheus
// would, so that a bench counts what serving metrics costs.
func scrape(ctx context.Context, r *eos.Runner) {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		addr := r.MetricsAddr()
		if addr == "" {
			continue
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/metrics", nil)
		if err != nil {
			continue
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			continue
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
	}
}

// rounds is Rounds, or CPURounds when unset.
func (s WorkerSpec) rounds() int {
	if s.Rounds > 0 {
		return s.Rounds
	}
	return CPURounds
}
