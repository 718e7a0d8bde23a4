package sim

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/eosflow/eosflow/config"
	"github.com/eosflow/eosflow/internal/chaos"
	"github.com/eosflow/eosflow/internal/verdict"
	"github.com/eosflow/eosflow/topology"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"
)

// Config sizes one run of a schedule.
type Config struct {
	Records    int           // input records, default 300
	Keys       int           // distinct keys, default 20
	Partitions int32         // input and output partitions, default 3
	Bound      time.Duration // a run not done by then is a hang, default 60s
	Pace       time.Duration // the user code's time per record, default 1ms
	// Guarantee is the members' guarantee, default exactly-once; a weaker
	// one is the harness's negative control.
	Guarantee config.Guarantee
	Log       *zap.Logger // the runtime's log; nil keeps it quiet
}

func (c Config) withDefaults() Config {
	if c.Records <= 0 {
		c.Records = 300
	}
	if c.Keys <= 0 {
		c.Keys = 20
	}
	if c.Partitions <= 0 {
		c.Partitions = 3
	}
	if c.Bound <= 0 {
		c.Bound = 60 * time.Second
	}
	if c.Pace == 0 {
		c.Pace = time.Millisecond
	}
	if c.Guarantee == "" {
		c.Guarantee = config.ExactlyOnce
	}
	if c.Log == nil {
		c.Log = zap.NewNop()
	}
	return c
}

// Result is one schedule's outcome.
type Result struct {
	Schedule Schedule
	Fired    []Step   // the steps whose fault struck, in schedule order
	Errors   []string // what Run returned, per incarnation that ended on its own
	Failure  string   // "" when every invariant held
	Took     time.Duration
}

// OK reports whether every invariant held.
func (r Result) OK() bool { return r.Failure == "" }

// event asks the supervisor to act on a member, from a fault's moment.
type event struct {
	idx   int
	fault Fault
}

// sim is one run of one schedule.
type sim struct {
	sched Schedule
	cfg   Config
	fake  *kfake.Cluster
	log   *zap.Logger

	mu     sync.Mutex
	seen   map[int]map[Point]int // per member, how often it reached each point
	armed  []*armed              // broker-side faults set for a request about to be sent
	struck map[int]bool          // steps whose fault struck directly (not via the broker)
	events chan event
}

// Run runs one schedule on a fresh embedded broker and judges it.
func Run(ctx context.Context, sched Schedule, cfg Config) Result {
	cfg = cfg.withDefaults()
	start := time.Now()
	res := Result{Schedule: sched}
	s := &sim{sched: sched, cfg: cfg, log: cfg.Log, seen: map[int]map[Point]int{},
		struck: map[int]bool{}, events: make(chan event, 16)}
	fake, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(cfg.Partitions, input, output))
	if err != nil {
		res.Failure = "embedded broker: " + err.Error()
		return res
	}
	defer fake.Close()
	s.fake = fake
	if err := s.seed(ctx); err != nil {
		res.Failure = err.Error()
		return res
	}
	errs, err := s.supervise(ctx)
	res.Errors = errs
	if err == nil {
		err = s.judge(ctx)
	}
	if err != nil {
		res.Failure = err.Error()
	}
	res.Fired = s.fired()
	res.Took = time.Since(start)
	return res
}

func (s *sim) base() []kgo.Opt { return []kgo.Opt{kgo.SeedBrokers(s.fake.ListenAddrs()...)} }

// seed writes the input: record i has key i mod Keys.
func (s *sim) seed(ctx context.Context) error {
	cl, err := kgo.NewClient(s.base()...)
	if err != nil {
		return err
	}
	defer cl.Close()
	return verdict.Seed(ctx, cl, input, s.cfg.Records, s.cfg.Keys, 0)
}

// judge reads what came out, read_committed, and checks it with the
// verifier's own verdicts.
func (s *sim) judge(ctx context.Context) error {
	n := s.cfg.Records
	out, err := verdict.DrainWithin(ctx, s.base(), output, n, 50*time.Millisecond, 15*time.Second)
	if err != nil {
		return fmt.Errorf("reading the output: %w", err)
	}
	if s.sched.Pipeline == Stateless {
		if v := verdict.Judge(n, out); !v.OK() {
			return errors.New(v.String())
		}
		return nil
	}
	changelog, err := verdict.DrainWithin(ctx, s.base(), topology.ChangelogTopic(appID, chaos.CountStore), 0, 50*time.Millisecond, 15*time.Second)
	if err != nil {
		return fmt.Errorf("reading the changelog: %w", err)
	}
	v, c := verdict.JudgeCounts(n, s.cfg.Keys, out, changelog)
	if !v.OK() || !c.OK() {
		return fmt.Errorf("%v; %v", v, c)
	}
	return nil
}
