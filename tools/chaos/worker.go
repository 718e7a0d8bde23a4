package chaos

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"time"

	"github.com/eosflow/eosflow/codec"
	"github.com/eosflow/eosflow/config"
	"github.com/eosflow/eosflow/eos"
	"github.com/eosflow/eosflow/internal/kafkautil"
	"github.com/eosflow/eosflow/internal/runcfg"
	"github.com/eosflow/eosflow/state"
	"github.com/eosflow/eosflow/state/pebble"
	"github.com/eosflow/eosflow/topology"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"
)

// ErrInjected is the processing error a worker injects to abort a batch;
// the worker then stops, as a pipeline whose record failed under the Fail
// policy does, and its supervisor restarts it.
var ErrInjected = errors.New("chaos: injected processing error")

// WorkerOptions shape one worker process: an eos.Runner running a sample
// pipeline from In to Out.
type WorkerOptions struct {
	Config      config.Config // brokers, app id, instance id, guarantee, state dir, TLS, SASL
	In, Out     string        // input and output topics
	Pipeline    PipelineKind  // which sample pipeline; default PipelineUpper
	State       StateKind     // the store engine of PipelineCount; default StateMemory
	GroupBy     Grouping      // what PipelineCount counts by; default GroupingKey
	Payments    string        // the second input of PipelineJoin, whose orders are In
	Table       string        // the global table's topic of PipelineGlobalJoin
	Rate        int           // records per second this worker processes at most; 0: unlimited
	CommitDelay time.Duration // pause before each batch ends, with its records produced
	AbortRate   float64       // probability that a batch fails with ErrInjected
	// RedisURL, DedupMode, DedupPrefix and EffectsKey shape PipelineDedup:
	// the Redis of its store and effects, when ids are marked (default
	// DedupAfter), the store's key prefix and the hash the effects count
	// in. The other pipelines ignore them.
	RedisURL    string
	DedupMode   DedupMode
	DedupPrefix string
	EffectsKey  string
	Logger      *zap.Logger // nil: no logs
	// Started is when the worker process started, which the time to the
	// first commit is measured from; zero means when RunWorker is called.
	Started time.Time
	// FirstCommit is called once, from another goroutine and before
	// RunWorker returns, when the first batch committed, with the time
	// since Started. A supervisor learns it this way even from a worker
	// it SIGKILLs later, which never prints its report. nil: not called.
	FirstCommit func(after time.Duration)
	// TableSnapshot has PipelineGlobalJoin join a copy of its table read
	// once at the worker's start, never kept current
	// (GlobalSnapshotPipeline): the negative control of the verifier's
	// probe phase.
	TableSnapshot bool
}

// StopReason says why a worker's Run returned. The supervisor restarts a
// worker either way, but only the stops it caused itself are part of the
// plan: any other stop fails the run.
type StopReason string

const (
	// StopCancelled: the worker's context ended (SIGTERM), Run finished
	// the open batch and returned nil. A clean stop.
	StopCancelled StopReason = "cancelled"
	// StopInjected: an injected processing error (ErrInjected) aborted a
	// batch and stopped the worker, as planned by --abort-rate.
	StopInjected StopReason = "injected"
	// StopUnreachable: Run's start-up check found no broker (ErrUnreachable).
	// It fails fast by design; the supervisor accepts it only from a worker
	// whose start overlapped an injected broker outage.
	StopUnreachable StopReason = "unreachable"
	// StopError: anything else stopped Run (the broker was gone too long,
	// the worker was fenced, a setting was refused): a real failure.
	StopError StopReason = "error"
)

// WorkerReport is what a worker prints as one JSON line on exit, so the
// supervisor can add up what workers that exited on their own did and
// tell an injected failure from a real one. A SIGKILLed worker prints
// nothing.
type WorkerReport struct {
	Instance   string `json:"instance"`
	RecordsIn  uint64 `json:"records_in"`
	RecordsOut uint64 `json:"records_out"`
	Committed  uint64 `json:"committed"`
	Aborted    uint64 `json:"aborted"`
	Rebuilds   uint64 `json:"rebuilds"`
	// Restored is how many changelog records this process applied to its
	// state stores while catching up (eos Stats.Restored): pebble, after a
	// SIGKILL, only the changelog's tail beyond the offset of its last
	// flush; memory the whole changelog of every task it is given.
	Restored uint64 `json:"restored"`
	// FirstCommitMs is the time from the worker's start to its first
	// committed batch, in milliseconds; 0 when it committed none.
	FirstCommitMs int64 `json:"first_commit_ms,omitempty"`
	// Stopped is why Run returned; every report has one.
	Stopped StopReason `json:"stopped"`
	Error   string     `json:"error,omitempty"`
}

// EventFirstCommit is the WorkerEvent a worker prints when its first batch
// committed, or when it found itself in the group with every partition it
// was given already processed to the end (it has nothing to commit).
const EventFirstCommit = "first_commit"

// WorkerEvent is a JSON line a worker prints on stdout while it runs, so
// the supervisor learns what it did even if it SIGKILLs the worker later.
// Its "event" field tells it from the exit report.
type WorkerEvent struct {
	Event    string `json:"event"` // EventFirstCommit
	Instance string `json:"instance"`
	AfterMs  int64  `json:"after_ms"` // since the worker started
}

// errUnasked is what a worker reports when Run returned nil although
// nothing cancelled it: the runtime gave up without saying why.
var errUnasked = errors.New("chaos: the runner stopped without an error though nothing stopped it")

// RunWorker runs the sample pipeline until ctx ends (nil: the open batch
// finished and the worker left the group) or the runner stops with an
// error (ErrInjected for an injected failure). The report holds the
// runner's counters and why it stopped either way.
func RunWorker(ctx context.Context, o WorkerOptions) (rep WorkerReport, err error) {
	rep = WorkerReport{Instance: o.Config.InstanceID}
	if o.Started.IsZero() {
		o.Started = time.Now()
	}
	defer func() {
		rep.Stopped = stopReason(ctx, err)
		if err != nil {
			rep.Error = err.Error()
		}
	}()
	if o.Logger == nil {
		o.Logger = zap.NewNop()
	}
	if err := o.Validate(); err != nil {
		return rep, err
	}
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), rand.Uint64()))
	p := newPacer(o.Rate)
	top, closeTop, err := o.build(p.wait)
	if err != nil {
		return rep, err
	}
	defer closeTop()
	r, err := eos.New(o.Config, top, eos.Logger(o.Logger),
		eos.BeforeCommit(func(context.Context, eos.BatchInfo) error {
			time.Sleep(o.CommitDelay)
			if o.AbortRate > 0 && rng.Float64() < o.AbortRate {
				return ErrInjected
			}
			return nil
		}))
	if err != nil {
		return rep, err
	}
	var caughtUp func(context.Context) bool
	if conn, err := kafkautil.Connect(o.Config); err == nil {
		defer conn.Close()
		caughtUp = caughtUpCheck(r, conn.Client, o.Config)
	}
	stopWatch := watchFirstCommit(r, o.Started, caughtUp, func(after time.Duration) {
		rep.FirstCommitMs = max(after.Milliseconds(), 1)
		if o.FirstCommit != nil {
			o.FirstCommit(after)
		}
	})
	err = r.Run(ctx)
	stopWatch()
	if err == nil && ctx.Err() == nil {
		err = errUnasked
	}
	st := r.Stats()
	rep.RecordsIn, rep.RecordsOut = st.RecordsIn, st.RecordsOut
	rep.Committed, rep.Aborted, rep.Rebuilds, rep.Restored = st.Committed, st.Aborted, st.Rebuilds, st.Restored
	return rep, err
}

// Validate checks the options a worker cannot run without: a refusal
// here is one no restart can fix.
func (o WorkerOptions) Validate() error {
	if o.AbortRate < 0 || o.AbortRate > 1 {
		return fmt.Errorf("chaos: abort rate %v is not a probability; give a value from 0 to 1", o.AbortRate)
	}
	_, err := o.topology(nil)
	return err
}

// firstCommitPoll is how often a worker looks for its first commit, and
// caughtUpPoll how often it asks the brokers whether it has work at all.
const (
	firstCommitPoll = 10 * time.Millisecond
	caughtUpPoll    = 500 * time.Millisecond
)

// watchFirstCommit polls r's committed batches until there is one, then
// calls found once with the time since started, from its own goroutine.
// A worker whose partitions hold no record to process never commits, so
// being caught up also ends the wait (caughtUp, when not nil, says so).
// The returned stop looks one last time, and returns once found has run
// or never will.
func watchFirstCommit(r *eos.Runner, started time.Time, caughtUp func(context.Context) bool, found func(time.Duration)) (stop func()) {
	quit, done := make(chan struct{}), make(chan struct{})
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		defer close(done)
		tick := time.NewTicker(firstCommitPoll)
		defer tick.Stop()
		var asked time.Time
		for {
			committed := r.Stats().Committed > 0
			if !committed && caughtUp != nil && time.Since(asked) >= caughtUpPoll {
				asked = time.Now()
				committed = caughtUp(ctx)
			}
			if committed {
				found(time.Since(started))
				return
			}
			select {
			case <-quit:
				if r.Stats().Committed > 0 {
					found(time.Since(started))
				}
				return
			case <-tick.C:
			}
		}
	}()
	var once sync.Once
	return func() { once.Do(func() { cancel(); close(quit); <-done }) }
}

// caughtUpCheck reports whether the runner has joined the group (its
// /readyz answers 200) and every input partition the group assigns to
// this instance (to its workers, under workers > 1) has its committed
// offset at the partition's end: the instance is back and has nothing to
// do. Any error answers false.
func caughtUpCheck(r *eos.Runner, cl *kgo.Client, cfg config.Config) func(context.Context) bool {
	ready := r.Handler()
	adm, group := kadm.NewClient(cl), cfg.AppID
	instances := []string{cfg.InstanceID}
	if n := runcfg.WorkerCount(cfg); n > 1 {
		instances = instances[:0]
		for i := range n {
			instances = append(instances, runcfg.WorkerInstanceID(cfg, i))
		}
	}
	return func(ctx context.Context) bool {
		rec := httptest.NewRecorder()
		ready.ServeHTTP(rec, httptest.NewRequestWithContext(ctx, http.MethodGet, "/readyz", nil))
		if rec.Code != http.StatusOK {
			return false
		}
		ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		g, err := kafkautil.DescribeGroup(ctx, cl, group)
		if err != nil || g.State != "Stable" {
			return false
		}
		mine := map[string][]int32{}
		for _, instance := range instances {
			m, ok := g.Member(instance)
			if !ok {
				return false
			}
			for t, ps := range m.Assigned {
				mine[t] = append(mine[t], ps...)
			}
		}
		if len(mine) == 0 {
			return false
		}
		committed, err := adm.FetchOffsets(ctx, group)
		if err != nil {
			return false
		}
		ends, err := adm.ListEndOffsets(ctx, slices.Collect(maps.Keys(mine))...)
		if err != nil {
			return false
		}
		for topic, ps := range mine {
			for _, p := range ps {
				end, ok := ends.Lookup(topic, p)
				c, cok := committed.Lookup(topic, p)
				if !ok || end.Err != nil || !cok || c.Err != nil || c.At < end.Offset {
					return false
				}
			}
		}
		return true
	}
}

// stopReason classifies how Run ended: nil after ctx ended is a clean
// stop, ErrInjected the planned failure, anything else a real one.
func stopReason(ctx context.Context, err error) StopReason {
	switch {
	case err == nil && ctx.Err() != nil:
		return StopCancelled
	case errors.Is(err, ErrInjected):
		return StopInjected
	case errors.Is(err, eos.ErrUnreachable):
		return StopUnreachable
	}
	return StopError
}

// PipelineKind names a sample pipeline the workers can run.
type PipelineKind string

const (
	// PipelineUpper upper-cases every value, keeping the key: stateless,
	// judged record by record (Pipeline).
	PipelineUpper PipelineKind = "upper"
	// PipelineCount counts the records of each key and emits the key's new
	// count: stateful, judged key by key (CountPipeline).
	PipelineCount PipelineKind = "count"
)

// StateKind names the store engine of PipelineCount.
type StateKind string

const (
	StateMemory StateKind = "memory" // state.Memory: restored in full on every assignment
	StatePebble StateKind = "pebble" // pebble.New: on disk, resumes from the offset it kept
)

// Grouping names what PipelineCount counts the records by.
type Grouping string

const (
	// GroupingKey counts each input key in the task of its input
	// partition: no repartition topic.
	GroupingKey Grouping = "key"
	// GroupingValue counts by the record's value, a key of its own: the
	// records go through the repartition topic of GroupByNode, and the
	// counting runs in a second sub-topology (GroupedCountPipeline).
	GroupingValue Grouping = "value"
)

// GroupByNode is the GroupBy node of GroupedCountPipeline; its repartition
// topic is topology.RepartitionTopic(appID, GroupByNode).
const GroupByNode = "by-value"

// CountStore is the store CountPipeline counts in; its changelog is
// topology.ChangelogTopic(appID, CountStore).
const CountStore = "counts"

// engine is the state engine k names.
func (k StateKind) engine() (state.Engine, error) {
	switch k {
	case StateMemory, "":
		return state.Memory(), nil
	case StatePebble:
		return pebble.New(), nil
	}
	return nil, fmt.Errorf("chaos: state %q is not one of %s, %s", k, StateMemory, StatePebble)
}

// build is topology for a worker that runs it: close releases what the
// pipeline holds open (PipelineDedup's Redis clients).
func (o WorkerOptions) build(before func()) (top *topology.Topology, close func(), err error) {
	if o.Pipeline == PipelineDedup {
		return o.dedupTopology(before)
	}
	if o.TableSnapshot && o.Pipeline == PipelineGlobalJoin {
		return o.snapshotTopology(before)
	}
	top, err = o.topology(before)
	return top, func() {}, err
}

// topology builds the pipeline o names.
func (o WorkerOptions) topology(before func()) (*topology.Topology, error) {
	switch o.Pipeline {
	case PipelineDedup:
		if o.State != "" || o.GroupBy != "" {
			return nil, fmt.Errorf("chaos: pipeline %s keeps no state and groups nothing; drop --state and --group-by", PipelineDedup)
		}
		top, close, err := o.dedupTopology(before)
		if close != nil {
			close()
		}
		return top, err
	case PipelineUpper, "":
		if o.State != "" {
			return nil, fmt.Errorf("chaos: state %q needs pipeline %s; %s keeps none", o.State, PipelineCount, PipelineUpper)
		}
		if o.GroupBy != "" {
			return nil, fmt.Errorf("chaos: grouping by %q needs pipeline %s; %s groups nothing", o.GroupBy, PipelineCount, PipelineUpper)
		}
		return Pipeline(o.In, o.Out, before), nil
	case PipelineCount:
		e, err := o.State.engine()
		if err != nil {
			return nil, err
		}
		switch o.GroupBy {
		case GroupingKey, "":
			return CountPipeline(o.In, o.Out, e, before), nil
		case GroupingValue:
			return GroupedCountPipeline(o.In, o.Out, e, before), nil
		}
		return nil, fmt.Errorf("chaos: grouping %q is not one of %s, %s", o.GroupBy, GroupingKey, GroupingValue)
	case PipelineWindowed, PipelineJoin, PipelineOuterJoin, PipelineGlobalJoin:
		return o.eventTopology(before)
	}
	return nil, fmt.Errorf("chaos: pipeline %q is not one of %v", o.Pipeline, pipelines)
}

// CountPipeline is the stateful sample topology: it counts the records of
// each key of in, in the store CountStore of engine e, and writes each
// record's key with the key's new count (decimal text, the JSON of an
// int64) to out. before runs ahead of each record; nil skips it.
func CountPipeline(in, out string, e state.Engine, before func()) *topology.Topology {
	top := topology.New()
	src := topology.Source(top, in, codec.Bytes(), topology.Named("input"))
	paced := topology.Peek(src, "pace", func(context.Context, []byte, []byte) {
		if before != nil {
			before()
		}
	})
	counts := topology.Count(topology.GroupByKey(paced, "by-key"), CountStore, e)
	topology.ToTable(counts, out, codec.JSON[int64](), topology.Named("output"))
	return top
}

// GroupedCountPipeline is CountPipeline counting by value: GroupBy
// re-keys each record of in by its value and sends it through the
// repartition topic of GroupByNode, in the batch's transaction; the
// store CountStore (engine e) counts each new key in the tasks of that
// topic's partitions and writes the key with its new count to out. The
// input's own keys play no part, so a key's records come from every input
// partition. before runs ahead of each input record; nil skips it.
func GroupedCountPipeline(in, out string, e state.Engine, before func()) *topology.Topology {
	top := topology.New()
	src := topology.Source(top, in, codec.Bytes(), topology.Named("input"))
	paced := topology.Peek(src, "pace", func(context.Context, []byte, []byte) {
		if before != nil {
			before()
		}
	})
	byValue := topology.GroupBy(paced, GroupByNode, func(_ context.Context, _, v []byte) ([]byte, error) { return v, nil },
		topology.Repartition(codec.Bytes()))
	counts := topology.Count(byValue, CountStore, e)
	topology.ToTable(counts, out, codec.JSON[int64](), topology.Named("output"))
	return top
}

// Pipeline is the sample topology the workers run: it upper-cases every
// value from in to out, keeping the key. before runs ahead of each record
// (the workers pace themselves there); nil skips it.
func Pipeline(in, out string, before func()) *topology.Topology {
	top := topology.New()
	src := topology.Source(top, in, codec.Bytes(), topology.Named("input"))
	up := topology.MapValues(src, "upper", func(_ context.Context, v []byte) ([]byte, error) {
		if before != nil {
			before()
		}
		return bytes.ToUpper(v), nil
	})
	topology.To(up, out, codec.Bytes(), topology.Named("output"))
	return top
}

// pacer spreads records evenly in time, so that a worker spends its time
// inside batches and a kill lands between a batch's first output and its
// commit.
type pacer struct {
	mu   sync.Mutex
	per  time.Duration
	next time.Time
}

func newPacer(rate int) *pacer {
	p := &pacer{}
	if rate > 0 {
		p.per = time.Second / time.Duration(rate)
	}
	return p
}

// wait blocks until the next record is due. Idle time earns at most 50ms
// of credit, so a worker never bursts far above its rate.
func (p *pacer) wait() {
	if p.per <= 0 {
		return
	}
	p.mu.Lock()
	now := time.Now()
	if p.next.Before(now.Add(-50 * time.Millisecond)) {
		p.next = now.Add(-50 * time.Millisecond)
	}
	p.next = p.next.Add(p.per)
	d := p.next.Sub(now)
	p.mu.Unlock()
	if d > time.Millisecond {
		time.Sleep(d)
	}
}
