package sim

import (
	"context"
	"errors"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/eosflow/eosflow/config"
	"github.com/eosflow/eosflow/dedup"
	"github.com/eosflow/eosflow/internal/kafkautil"
	"github.com/eosflow/eosflow/tools/verdict"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"
)

// Config sizes one run of a schedule.
type Config struct {
	Records int // input records, default 300
	// Keys is the distinct keys; by default 20 on even seeds and half the
	// records, at least 20, on odd ones (see keysFor).
	Keys       int
	Partitions int32         // input and output partitions, default 3
	Bound      time.Duration // a run not done by then is a hang, default 2m
	Pace       time.Duration // the user code's time per record, default 1ms
	// Guarantee is the members' guarantee, default exactly-once; a weaker
	// one is the harness's negative control.
	Guarantee config.Guarantee
	Log       *zap.Logger // the runtime's log; nil keeps it quiet
	// Postgres is the database URL of the pipeline PgSink.
	Postgres string
}

func (c Config) withDefaults(sched Schedule) Config {
	if c.Records <= 0 {
		c.Records = 300
	}
	if c.Keys <= 0 {
		c.Keys = keysFor(sched.Seed, c.Records)
	}
	if c.Partitions <= 0 {
		c.Partitions = 3
	}
	if c.Bound <= 0 {
		c.Bound = 2 * time.Minute
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

// keysFor is a seed's distinct keys. Few keys make long counts, which a
// repeat or a gap anywhere breaks; many make most keys seen once or
// twice, so that a store keeping a batch the log lost is not masked by
// later batches writing the same keys over it. Seeds alternate.
func keysFor(seed uint64, records int) int {
	if seed%2 == 0 {
		return 20
	}
	return max(20, records/2)
}

// Result is one schedule's outcome.
type Result struct {
	Schedule Schedule
	Fired    []Step   // the steps whose fault struck, in schedule order
	Errors   []string // what Run returned, per incarnation that ended on its own
	Failure  string   // "" when every invariant held
	// Kind is the class of the failure: which check failed (see kinds).
	Kind string
	// Overlaps counts side effects that answered while a revoke waited
	// for them (under exactly-once a revoke waits for the record in
	// flight whatever its partition).
	Overlaps int
	Took     time.Duration
}

// The kinds of failure, by the check that failed.
const (
	KindSetup    = "setup"        // the broker, the input or a read of the output failed
	KindLiveness = "liveness"     // not done within the bound, a hang, a restart loop, a bad return
	KindAudit    = "store audit"  // a pebble store did not equal its changelog
	KindOutput   = "output"       // a record missing, repeated or out of order
	KindCounts   = "counts"       // a count or changelog wrong
	KindEffects  = "side effects" // an effect lost or repeated past its allowance
	KindWindows  = "windows"      // a window's final count missing, repeated or wrong
	KindPairs    = "pairs"        // a joined pair missing, repeated or not of the seed
	KindRows     = "rows"         // a database row missing or repeated, or the stored offsets apart
	KindFires    = "firings"      // a firing repeated, a stream-time count wrong, a wall-clock timer that never fired, or a changelog apart
)

// kinded is a failure that names its kind.
type kinded struct {
	kind string
	err  error
}

// Error is the failure's own text.
func (k *kinded) Error() string { return k.err.Error() }

// Unwrap is the failure, for errors.Is and errors.As.
func (k *kinded) Unwrap() error { return k.err }

// as tags err, when not nil, with kind, unless it already has one.
func as(kind string, err error) error {
	if err == nil || errors.As(err, new(*kinded)) {
		return err
	}
	return &kinded{kind, err}
}

// OK reports whether every invariant held.
func (r Result) OK() bool { return r.Failure == "" }

// event asks the supervisor to act on a member, from a fault's moment.
type event struct {
	idx   int
	wire  *wire // the incarnation it came from
	step  int
	fault Fault
}

// sim is one run of one schedule.
type sim struct {
	sched Schedule
	cfg   Config
	fake  *kfake.Cluster
	log   *zap.Logger
	label string // of the run's goroutines (see labelled)

	mu       sync.Mutex
	seen     map[int]map[Point]int // per member, how often it reached each point
	armed    []*armed              // broker-side faults set for a request about to be sent
	struck   map[int]bool          // steps whose fault struck directly (not via the broker)
	disks    map[int]*vfs.MemFS    // per member, its stores' filesystem
	rng      *rand.Rand            // what a crash keeps of unsynced writes, from the seed
	flips    map[string]int        // per transactional id, the CommitLost step armed for its next commit
	flipped  []producerEpoch       // the transactions a CommitLost ended aborted
	inputs   int                   // records seeded
	seeded   *seeded               // the event-time pipelines' input and judge
	want     map[string]int64      // per key, the records seeded
	store    *dedup.Memory         // the dedup pipelines' store, shared by the members
	effects  map[string]int        // per id, how often its side effect ran
	over     bool                  // the schedule is over: no step strikes any more
	acting   int                   // faults under way (see step)
	allowed  map[string]int        // per id, the repeats of its effect a crash or a store fault allows
	hearing  hearing               // when the runtime last logged, the group last committed
	overlaps int                   // side effects answering while a revoke waited for them
	events   chan event
	wires    []*wire       // of every incarnation started, for a bounce
	bouncing time.Time     // until when a bounce refuses requests
	trusts   []string      // stores that applied a batch before reading back an earlier incarnation's
	pg       *pgxpool.Pool // the PgSink pipeline's database, unwrapped
	tables   pgTables      // … and its tables
}

// Run runs one schedule on a fresh embedded broker and judges it.
func Run(ctx context.Context, sched Schedule, cfg Config) Result {
	return run(ctx, sched, cfg, nil)
}

// run is Run, with tamper (when set) acting on the run's remains before
// they are judged: how a test proves the judge can fail.
func run(ctx context.Context, sched Schedule, cfg Config, tamper func(*sim) error) (res Result) {
	labelled(ctx, func(ctx context.Context, label string) { res = runLabelled(ctx, sched, cfg, tamper, label) })
	return res
}

// runLabelled is run, its goroutines labelled label (see labelled).
func runLabelled(ctx context.Context, sched Schedule, cfg Config, tamper func(*sim) error, label string) Result {
	cfg = cfg.withDefaults(sched)
	start := time.Now()
	res := Result{Schedule: sched}
	s := &sim{sched: sched, cfg: cfg, seen: map[int]map[Point]int{},
		struck: map[int]bool{}, events: make(chan event, 16), disks: map[int]*vfs.MemFS{},
		rng: rand.New(rand.NewPCG(sched.Seed, 0xc4a5)), flips: map[string]int{}, effects: map[string]int{}, allowed: map[string]int{}}
	fake, err := kfake.NewCluster(kfake.NumBrokers(brokers(sched)), kfake.SeedTopics(cfg.Partitions, input, payments, output, fired))
	if err != nil {
		res.Failure, res.Kind = "embedded broker: "+err.Error(), KindSetup
		return res
	}
	defer fake.Close()
	s.fake = fake
	s.log = cfg.Log
	s.watchEndTxn()
	if sched.Pipeline == PgSink {
		defer s.dropPg()
		if err := s.setupPg(ctx); err != nil {
			res.Failure, res.Kind = err.Error(), KindSetup
			return res
		}
	}
	if err := s.seed(ctx); err != nil {
		res.Failure, res.Kind = err.Error(), KindSetup
		return res
	}
	s.label = label
	errs, err := s.supervise(ctx)
	err = as(KindLiveness, err)
	res.Errors = errs
	res.Fired = s.fired()
	s.mu.Lock()
	res.Overlaps = s.overlaps
	s.mu.Unlock()
	if err == nil && tamper != nil {
		err = tamper(s)
	}
	if err == nil && sched.Pipeline == CountPebble {
		err = as(KindAudit, s.audit(ctx))
	}
	if err == nil {
		err = as(KindAudit, s.auditStores(ctx))
	}
	if err == nil {
		err = as(KindSetup, s.judge(ctx))
	}
	if err != nil {
		res.Failure = err.Error()
		if k := (*kinded)(nil); errors.As(err, &k) {
			res.Kind = k.kind
		}
	}
	res.Took = time.Since(start)
	return res
}

// brokers is how many brokers sched runs on: three when a coordinator
// moves, else one.
func brokers(sched Schedule) int {
	if slices.ContainsFunc(sched.Steps, func(st Step) bool { return st.Fault == Move }) {
		return 3
	}
	return 1
}

// caughtUp reports whether the group has committed the whole input: for
// the join, both of its topics.
func (s *sim) caughtUp(ctx context.Context, adm *kadm.Client) bool {
	if s.sched.Pipeline == PgSink {
		return s.pgCaughtUp(ctx)
	}
	if !verdict.CaughtUp(ctx, adm, appID, input) {
		return false
	}
	return s.sched.Pipeline != StreamJoin || verdict.CaughtUp(ctx, adm, appID, payments)
}

func (s *sim) base() []kgo.Opt { return []kgo.Opt{kgo.SeedBrokers(s.fake.ListenAddrs()...)} }

// seed writes the input: record i has key i mod Keys; the event-time
// pipelines', the verifier's seeded event times, each record to its own
// partition.
func (s *sim) seed(ctx context.Context) error {
	ev, err := seedInput(s.sched, s.cfg)
	if err != nil {
		return err
	}
	opts := s.base()
	if ev != nil {
		opts = append(opts, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return err
	}
	defer cl.Close()
	if s.seeded = ev; ev != nil {
		s.inputs = len(ev.recs)
		return kafkautil.ProduceAll(ctx, cl, len(ev.recs), func(i int) *kgo.Record { return ev.recs[i] })
	}
	s.inputs, s.want = s.cfg.Records, verdict.Want(s.cfg.Records, s.cfg.Keys)
	if s.sched.Pipeline == Timers {
		return kafkautil.ProduceAll(ctx, cl, s.cfg.Records, timed(s.cfg.Keys))
	}
	return verdict.Seed(ctx, cl, input, s.cfg.Records, s.cfg.Keys, 0)
}
