package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/eosflow/eosflow/config"
	"github.com/eosflow/eosflow/internal/kafkautil"
	"github.com/eosflow/eosflow/internal/runcfg"
	"github.com/eosflow/eosflow/tools/verdict"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Scale runs (Options.Scale) replace the fault plan with waves of worker
// processes, as a deployment scales out and in, and time how the group
// takes each wave.
const (
	// defaultScaleDwell is how long a settled step runs before the next.
	defaultScaleDwell = 5 * time.Second
	// defaultSettleTimeout bounds the wait for a step to settle.
	defaultSettleTimeout = 2 * time.Minute
	// groupSamplePeriod is how often the group and its offsets are read.
	groupSamplePeriod = 100 * time.Millisecond
)

// ProblemScaleUnsettled: a step of a scale run did not settle in time:
// the group did not assign every input partition to exactly the step's
// members, or a partition did not commit again after that.
const ProblemScaleUnsettled Problem = "scale_unsettled"

// ProblemScaleIncomplete: the input ran out before every step of a scale
// run began, so the run proves less than it was asked to.
const ProblemScaleIncomplete Problem = "scale_incomplete"

// ScaleStep is one wave of a scale run: how many worker processes the
// group had, and how it took the change from the wave before.
type ScaleStep struct {
	Processes int // worker processes in this step
	Members   int // group members expected: processes × workers each
	// Assigned is the time from the step's start (its processes started,
	// or SIGTERMed) until the group was stable with exactly the step's
	// members, every input partition assigned to one of them.
	Assigned time.Duration
	// Rebalance is the time from the step's start until every input
	// partition had committed a batch again after Assigned: what the
	// change cost the pipeline.
	Rebalance time.Duration
	// Moved counts the input partitions whose owner changed.
	Moved int
	// LongestPause is the longest time one input partition's committed
	// offset stood still while it had records left, among the pauses
	// that ended during the step (or were still open at its end): the
	// longest gap in that partition's output. PausedPartition names it.
	LongestPause    time.Duration
	PausedPartition string
	// Stayed counts the input partitions whose owner did not change
	// (none in a first step), and StayedPause is the longest pause, as
	// LongestPause counts them, of one of those: what a rebalance cost
	// the partitions it did not move. StayedPartition names it.
	Stayed          int
	StayedPause     time.Duration
	StayedPartition string
	// GroupPause is the longest time no input partition committed at all.
	GroupPause time.Duration
	// Partitions counts the input partitions, and Committing those that
	// committed after Assigned: all of them once the step settled.
	Partitions, Committing int
	// Settled says the step got that far within Options.SettleTimeout;
	// Problem says why not.
	Settled bool
	Problem string
}

// String is the step on one line, for logs and the result table.
func (s ScaleStep) String() string {
	if !s.Settled {
		return fmt.Sprintf("%d processes (%d members): not settled: %s", s.Processes, s.Members, s.Problem)
	}
	stayed := "none stayed put"
	if s.Stayed > 0 {
		stayed = fmt.Sprintf("of the %d that stayed put %s (%s)", s.Stayed, s.StayedPause.Round(time.Millisecond), s.StayedPartition)
	}
	return fmt.Sprintf("%d processes (%d members): assigned %s, committing %s, %d partitions moved; longest pause %s (%s), %s, group pause %s",
		s.Processes, s.Members, s.Assigned.Round(time.Millisecond), s.Rebalance.Round(time.Millisecond), s.Moved,
		s.LongestPause.Round(time.Millisecond), s.PausedPartition, stayed, s.GroupPause.Round(time.Millisecond))
}

// scaleStepJSON is ScaleStep with durations in milliseconds.
type scaleStepJSON struct {
	Processes       int    `json:"processes"`
	Members         int    `json:"members"`
	AssignedMs      int64  `json:"assigned_ms"`
	RebalanceMs     int64  `json:"rebalance_ms"`
	Moved           int    `json:"moved"`
	LongestPauseMs  int64  `json:"longest_pause_ms"`
	PausedPartition string `json:"paused_partition,omitempty"`
	Stayed          int    `json:"stayed"`
	StayedPauseMs   int64  `json:"stayed_pause_ms"`
	StayedPartition string `json:"stayed_partition,omitempty"`
	GroupPauseMs    int64  `json:"group_pause_ms"`
	Partitions      int    `json:"partitions"`
	Committing      int    `json:"committing"`
	Settled         bool   `json:"settled"`
	Problem         string `json:"problem,omitempty"`
}

// MarshalJSON writes the durations as whole milliseconds (assigned_ms,
// rebalance_ms, longest_pause_ms, stayed_pause_ms, group_pause_ms) for
// scripts.
func (s ScaleStep) MarshalJSON() ([]byte, error) {
	return json.Marshal(scaleStepJSON{s.Processes, s.Members, s.Assigned.Milliseconds(), s.Rebalance.Milliseconds(), s.Moved,
		s.LongestPause.Milliseconds(), s.PausedPartition, s.Stayed, s.StayedPause.Milliseconds(), s.StayedPartition,
		s.GroupPause.Milliseconds(), s.Partitions, s.Committing, s.Settled, s.Problem})
}

// UnmarshalJSON reads what MarshalJSON writes.
func (s *ScaleStep) UnmarshalJSON(b []byte) error {
	var j scaleStepJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	ms := func(v int64) time.Duration { return time.Duration(v) * time.Millisecond }
	*s = ScaleStep{j.Processes, j.Members, ms(j.AssignedMs), ms(j.RebalanceMs), j.Moved, ms(j.LongestPauseMs), j.PausedPartition,
		j.Stayed, ms(j.StayedPauseMs), j.StayedPartition, ms(j.GroupPauseMs), j.Partitions, j.Committing, j.Settled, j.Problem}
	return nil
}

// validateScale checks the options of a scale run.
func (o Options) validateScale() error {
	switch {
	case o.ProcessWorkers < 0 || o.ProcessWorkers > int(config.MaxWorkers):
		return fmt.Errorf("--process-workers must be from 1 to %d", config.MaxWorkers)
	case o.GroupProtocol != "" && o.GroupProtocol != config.GroupProtocolClassic && o.GroupProtocol != config.GroupProtocolConsumer:
		return fmt.Errorf("--group-protocol must be %s or %s, got %q", config.GroupProtocolClassic, config.GroupProtocolConsumer, o.GroupProtocol)
	case o.ScaleDwell < 0 || o.SettleTimeout < 0 || o.InputRate < 0:
		return fmt.Errorf("--scale-dwell, --settle-timeout and --input-rate must not be negative")
	case len(o.Scale) == 0:
		return nil
	case o.Kills > 0 || o.Terms > 0 || o.BrokerRestarts > 0 || o.Rebalances > 0 || o.AbortRate > 0 || o.counts().network() > 0:
		return fmt.Errorf("--scale times rebalances of its own: drop --kills, --terms, --broker-restarts, --rebalances, --net-cuts, --pauses, --coordinator-cuts and --abort-rate (or set them to 0)")
	case o.Pipeline != "" && o.Pipeline != PipelineUpper && o.Pipeline != PipelineCount || o.GroupBy == GroupingValue:
		return fmt.Errorf("--scale writes its input as it runs, as --pipeline %s and %s (by key) read it; --pipeline %s and --group-by %s are not supported with it",
			PipelineUpper, PipelineCount, o.Pipeline, o.GroupBy)
	case o.Rate > 0:
		return fmt.Errorf("--scale writes the input at --input-rate and lets the workers run at full speed; drop --rate")
	}
	for _, n := range o.Scale {
		if n < 1 {
			return fmt.Errorf("--scale lists worker processes per step, each at least 1, e.g. 1,6,2; got %v", o.Scale)
		}
	}
	return nil
}

// scaleDefaults fills in what a scale run leaves unset, before the other
// defaults.
func (o *Options) scaleDefaults() {
	if o.ProcessWorkers == 0 {
		o.ProcessWorkers = 1
	}
	if len(o.Scale) == 0 {
		return
	}
	o.Workers = o.Scale[0]
	if o.BatchRecords == 0 {
		o.BatchRecords = config.DefaultMaxBatchRecords
	}
	if o.ScaleDwell == 0 {
		o.ScaleDwell = defaultScaleDwell
	}
	if o.SettleTimeout == 0 {
		o.SettleTimeout = defaultSettleTimeout
	}
	if o.InputRate == 0 {
		o.InputRate = defaultInputRate
	}
}

// defaultInputRate is how fast a scale run writes its input.
const defaultInputRate = 1000 // records per second

// workerEnv is the environment that makes each worker process run
// ProcessWorkers sessions under GroupProtocol; a scale run's processes
// also leave the group when they stop, as a scale-down should.
func (o Options) workerEnv() []string {
	var env []string
	if o.ProcessWorkers > 1 {
		env = append(env, "EOS_WORKERS="+strconv.Itoa(o.ProcessWorkers))
	}
	if o.GroupProtocol != "" {
		env = append(env, "EOS_GROUP_PROTOCOL="+string(o.GroupProtocol))
	}
	if len(o.Scale) > 0 {
		env = append(env, "EOS_LEAVE_GROUP_ON_CLOSE=true")
	}
	return env
}

// instanceIDs are the group.instance.ids of worker process id, as the
// process's config names them.
func instanceIDs(id string, workers int) []string {
	return runcfg.InstanceIDs(config.Config{InstanceID: id, Workers: config.Workers(workers)})
}

// tp is one input partition.
type tp struct {
	topic     string
	partition int32
}

func (p tp) String() string { return p.topic + "/" + strconv.Itoa(int(p.partition)) }

// feed writes a scale run's input while the steps run, as a live stream:
// records 0, 1, 2, … keyed and valued as verdict.Seed writes them, at
// rate records per second, until stopped or at limit records. So every
// partition keeps getting records through every step, and a partition
// whose output stands still is paused, not out of work.
type feed struct {
	written atomic.Int64 // records produced
	err     kafkautil.FirstError
	rate    int
	limit   bool // the run reached limit records: set once done is closed
	stopc   chan struct{}
	done    chan struct{}
}

func startFeed(cl *kgo.Client, topic string, keys, rate, limit int) *feed {
	f := &feed{rate: rate, stopc: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(f.done)
		promise := f.err.Promise
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		began := time.Now()
		for i := 0; ; {
			select {
			case <-f.stopc:
				return
			case now := <-tick.C:
				due := min(int(now.Sub(began).Seconds()*float64(rate)), limit)
				for ; i < due; i++ {
					cl.Produce(context.Background(), &kgo.Record{Topic: topic, Key: verdict.Key(i, keys), Value: verdict.Value(i, 32)}, promise)
					f.written.Add(1)
				}
				if i >= limit {
					f.limit = true
					return
				}
			}
		}
	}()
	return f
}

// stop ends the feed and waits until every record written is
// acknowledged; it returns how many there are.
func (f *feed) stop(cl *kgo.Client) (int, error) {
	select {
	case <-f.done:
	default:
		close(f.stopc)
		<-f.done
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := cl.Flush(ctx); err != nil {
		return 0, fmt.Errorf("chaos: writing the input: %w", err)
	}
	if err := f.err.Take(); err != nil {
		return 0, fmt.Errorf("chaos: writing the input: %w", err)
	}
	return int(f.written.Load()), nil
}

// full reports whether the feed stopped at its limit.
func (f *feed) full() bool {
	select {
	case <-f.done:
		return f.limit
	default:
		return false
	}
}

// groupSample is one reading of the group: its description and its
// committed offsets on the input partitions.
type groupSample struct {
	at        time.Time
	group     kafkautil.Group
	described bool // false when the description failed
	committed map[tp]int64
}

// sampleGroup reads group every groupSamplePeriod until ctx ends and sends
// what it read on out, dropping readings the supervisor is too slow for.
func sampleGroup(ctx context.Context, cl *kgo.Client, group string, inputs []string, out chan<- groupSample) {
	adm := kadm.NewClient(cl)
	tick := time.NewTicker(groupSamplePeriod)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		g, gerr := kafkautil.DescribeGroup(rctx, cl, group)
		offs, oerr := adm.FetchOffsetsForTopics(rctx, group, inputs...)
		cancel()
		if oerr != nil {
			continue
		}
		s := groupSample{at: time.Now(), group: g, described: gerr == nil, committed: map[tp]int64{}}
		offs.Each(func(o kadm.OffsetResponse) {
			if o.Err == nil && o.At >= 0 {
				s.committed[tp{o.Topic, o.Partition}] = o.At
			}
		})
		select {
		case out <- s:
		default:
		}
	}
}

// scaler follows a scale run's steps through the group samples: when each
// settled, how long partitions paused, and when the next step is due. It
// only computes; the supervisor starts and stops the processes.
type scaler struct {
	plan          []int
	workers       int
	parts         []tp
	dwell, settle time.Duration
	// ends are the input partitions' end offsets once the feed stopped;
	// nil while it writes, when every partition has records coming.
	ends map[tp]int64

	steps []ScaleStep
	cur   *stepState
	// owners is who held each partition when the last step's assignment
	// was seen.
	owners map[tp]string
	// The pause tracking: each partition's last committed offset and
	// when it last moved, and when any partition last moved.
	lastOff map[tp]int64
	lastAt  map[tp]time.Time
	lastAny time.Time
	// seen is the protocol the group was last seen to run.
	seen config.GroupProtocol
}

// stepState is what the scaler knows of the running step.
type stepState struct {
	began, assignedAt, settledAt time.Time
	expected                     map[string]bool
	baseline                     map[tp]int64
	committing                   map[tp]bool
	// stayed are the partitions whose owner the step's assignment kept;
	// gaps, each partition's longest pause in the step.
	stayed   map[tp]bool
	gaps     map[tp]time.Duration
	timedOut bool
	waiting  string // what the step waits for, as of the last sample
}

func newScaler(o Options, parts []tp) *scaler {
	return &scaler{plan: o.Scale, workers: o.ProcessWorkers, parts: parts, dwell: o.ScaleDwell, settle: o.SettleTimeout,
		lastOff: map[tp]int64{}, lastAt: map[tp]time.Time{}}
}

// left reports whether partition p had records its group had not
// committed: always while the feed writes.
func (s *scaler) left(p tp) bool {
	end, known := s.ends[p]
	return !known || s.lastOff[p] < end
}

// begin starts the next step at now, whose processes are ids.
func (s *scaler) begin(now time.Time, ids []string) {
	s.closeStep(now)
	expected := map[string]bool{}
	for _, id := range ids {
		for _, inst := range instanceIDs(id, s.workers) {
			expected[inst] = true
		}
	}
	s.steps = append(s.steps, ScaleStep{Processes: len(ids), Members: len(expected), Partitions: len(s.parts)})
	s.cur = &stepState{began: now, expected: expected, gaps: map[tp]time.Duration{}, waiting: "the first reading of the group"}
	if s.lastAny.IsZero() {
		s.lastAny = now
		for _, p := range s.parts {
			s.lastAt[p] = now
		}
	}
}

// step is the latest step's result.
func (s *scaler) step() *ScaleStep { return &s.steps[len(s.steps)-1] }

// observe takes one group sample in.
func (s *scaler) observe(smp groupSample) {
	if smp.described && len(smp.group.Members) > 0 {
		s.seen = smp.group.Protocol
	}
	if s.cur == nil {
		return
	}
	st := s.step()
	s.pauses(st, smp)
	c := s.cur
	if !c.settledAt.IsZero() || c.timedOut {
		return
	}
	if c.assignedAt.IsZero() {
		owners, why := s.assignment(smp)
		if why != "" {
			c.waiting = why
			return
		}
		c.assignedAt, c.baseline, c.committing, c.stayed = smp.at, map[tp]int64{}, map[tp]bool{}, map[tp]bool{}
		for _, p := range s.parts {
			c.baseline[p] = smp.committed[p]
		}
		st.Assigned = smp.at.Sub(c.began)
		for p, o := range owners {
			switch {
			case s.owners == nil:
			case s.owners[p] == o:
				c.stayed[p] = true
				continue
			}
			st.Moved++
		}
		st.Stayed = len(c.stayed)
		s.owners = owners
	}
	var ranOut, idle []string
	for _, p := range s.parts {
		if c.committing[p] {
			continue
		}
		switch off := smp.committed[p]; {
		case off > c.baseline[p]:
			c.committing[p] = true
		case !s.left(p):
			ranOut = append(ranOut, p.String())
		default:
			idle = append(idle, p.String())
		}
	}
	st.Committing = len(c.committing)
	switch {
	case len(ranOut) > 0:
		slices.Sort(ranOut)
		c.waiting = fmt.Sprintf("%s, out of input (the run reached --records), to commit again", strings.Join(first(ranOut, 5), ", "))
	case len(idle) > 0:
		slices.Sort(idle)
		c.waiting = fmt.Sprintf("%d of %d partitions to commit again after the assignment (%s)", len(idle), len(s.parts), strings.Join(first(idle, 5), ", "))
	default:
		c.settledAt = smp.at
		st.Rebalance = smp.at.Sub(c.began)
		st.Settled = true
		c.waiting = ""
	}
}

// pauses takes the sample's commits in: the longest pause of a partition
// and of the whole group in the step.
func (s *scaler) pauses(st *ScaleStep, smp groupSample) {
	moved := false
	for _, p := range s.parts {
		off, ok := smp.committed[p]
		if !ok || off <= s.lastOff[p] {
			continue
		}
		gap := smp.at.Sub(s.lastAt[p])
		if gap > st.LongestPause {
			st.LongestPause, st.PausedPartition = gap, p.String()
		}
		s.cur.gaps[p] = max(s.cur.gaps[p], gap)
		if s.cur.stayed[p] && gap > st.StayedPause {
			st.StayedPause, st.StayedPartition = gap, p.String()
		}
		s.lastOff[p], s.lastAt[p] = off, smp.at
		moved = true
	}
	if moved {
		if gap := smp.at.Sub(s.lastAny); gap > st.GroupPause {
			st.GroupPause = gap
		}
		s.lastAny = smp.at
	}
	for _, p := range s.parts {
		if !s.left(p) { // nothing to wait for: it cannot pause
			s.lastAt[p] = smp.at
		}
	}
}

// assignment returns who holds each input partition when the group is
// stable with exactly the step's members and holds every input partition
// once, or what it still waits for.
func (s *scaler) assignment(smp groupSample) (map[tp]string, string) {
	c := s.cur
	if !smp.described {
		return nil, "a description of the group"
	}
	g := smp.group
	members := map[string]bool{}
	for _, m := range g.Members {
		members[m.InstanceID] = true
	}
	var missing, extra []string
	for id := range c.expected {
		if !members[id] {
			missing = append(missing, id)
		}
	}
	for id := range members {
		if !c.expected[id] {
			extra = append(extra, id)
		}
	}
	if len(missing) > 0 || len(extra) > 0 {
		slices.Sort(missing)
		slices.Sort(extra)
		return nil, fmt.Sprintf("the group (%s, %d members) to have the step's %d members: %d to join (%s), %d to leave (%s)",
			g.State, len(g.Members), len(c.expected), len(missing), strings.Join(first(missing, 4), ", "), len(extra), strings.Join(first(extra, 4), ", "))
	}
	if g.State != "Stable" {
		return nil, fmt.Sprintf("the group to be Stable, not %s", g.State)
	}
	input := map[tp]bool{}
	for _, p := range s.parts {
		input[p] = true
	}
	owners := map[tp]string{}
	for _, m := range g.Members {
		for topic, ps := range m.Assigned {
			for _, p := range ps {
				k := tp{topic, p}
				if !input[k] {
					continue
				}
				if prev, twice := owners[k]; twice {
					return nil, fmt.Sprintf("%s held by both %s and %s", k, prev, m.InstanceID)
				}
				owners[k] = m.InstanceID
			}
		}
	}
	if len(owners) < len(s.parts) {
		return nil, fmt.Sprintf("%d of %d input partitions to be assigned", len(s.parts)-len(owners), len(s.parts))
	}
	return owners, ""
}

// first is at most n of ss.
func first(ss []string, n int) []string { return ss[:min(n, len(ss))] }

// due reports whether the running step is over at now: settled for the
// dwell, or unsettled past the settle timeout (which fails the step).
func (s *scaler) due(now time.Time) bool {
	c := s.cur
	switch {
	case c == nil:
		return false
	case !c.settledAt.IsZero():
		return now.Sub(c.settledAt) >= s.dwell
	case now.Sub(c.began) >= s.settle:
		c.timedOut = true
		return true
	}
	return false
}

// next is the number of processes of the step after the latest, or 0
// when the latest is the last.
func (s *scaler) next() int {
	if len(s.steps) >= len(s.plan) {
		return 0
	}
	return s.plan[len(s.steps)]
}

// closeStep ends the running step at now: the pauses still open count,
// and an unsettled step says what it waited for.
func (s *scaler) closeStep(now time.Time) {
	if s.cur == nil {
		return
	}
	st := s.step()
	open := false
	for _, p := range s.parts {
		if s.left(p) {
			open = true
			gap := now.Sub(s.lastAt[p])
			if gap > st.LongestPause {
				st.LongestPause, st.PausedPartition = gap, p.String()
			}
			s.cur.gaps[p] = max(s.cur.gaps[p], gap)
		}
	}
	for _, p := range s.parts {
		if g := s.cur.gaps[p]; s.cur.stayed[p] && g > st.StayedPause {
			st.StayedPause, st.StayedPartition = g, p.String()
		}
	}
	if gap := now.Sub(s.lastAny); gap > st.GroupPause && open {
		st.GroupPause = gap
	}
	if !st.Settled {
		st.Problem = fmt.Sprintf("after %s still waiting for %s", now.Sub(s.cur.began).Round(time.Millisecond), s.cur.waiting)
	}
	s.cur = nil
}

// scaleRun drives a scale run from the supervisor's loop.
type scaleRun struct {
	*scaler
	cl      *kgo.Client
	adm     *kadm.Client
	feed    *feed
	samples chan groupSample
	stop    context.CancelFunc
	fed     bool // the feed stopped and was accounted for
}

// startScale begins a scale run: it reads the group in the background,
// starts the first step's processes and begins writing the input.
func startScale(o Options, fl *fleet, cl *kgo.Client, group, input string, res *Result, event func(string, ...any)) (*scaleRun, error) {
	parts := make([]tp, o.Partitions)
	for i := range parts {
		parts[i] = tp{input, int32(i)}
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &scaleRun{scaler: newScaler(o, parts), cl: cl, adm: kadm.NewClient(cl), samples: make(chan groupSample, 1024), stop: cancel}
	go sampleGroup(ctx, cl, group, []string{input}, r.samples)
	if err := r.apply(o.Scale[0], fl, res, event); err != nil {
		cancel()
		return nil, err
	}
	r.feed = startFeed(cl, input, o.Keys, o.InputRate, o.Records)
	return r, nil
}

// apply starts or stops processes until n run, and begins the step.
func (r *scaleRun) apply(n int, fl *fleet, res *Result, event func(string, ...any)) error {
	now := time.Now()
	ids := fl.running(0)
	slices.SortFunc(ids, func(a, b string) int { return workerNum(a) - workerNum(b) })
	var added, removed []string
	for len(ids) < n {
		id, err := fl.add()
		if err != nil {
			return err
		}
		res.WorkerStarts++
		ids, added = append(ids, id), append(added, id)
	}
	for len(ids) > n {
		id := ids[len(ids)-1]
		fl.signal(id, syscall.SIGTERM, intentRemove)
		ids, removed = ids[:len(ids)-1], append(removed, id)
	}
	if len(r.steps) > 0 {
		res.WorkersAdded += len(added)
		res.WorkersRemoved += len(removed)
		event("scale step %d of %d: %d → %d worker processes (%d members); started %v, stopped %v",
			len(r.steps)+1, len(r.plan), r.step().Processes, n, n*r.workers, added, removed)
	} else {
		event("scale step 1 of %d: %d worker processes of %d workers each", len(r.plan), n, r.workers)
	}
	r.begin(now, ids)
	return nil
}

// tick takes the samples in and moves to the next step when one is due.
// Once the last step is over (or the feed reached its limit) it stops the
// feed and returns how many records it wrote and the input's end
// offsets, with fed true, once.
func (r *scaleRun) tick(fl *fleet, res *Result, event func(string, ...any)) (n int, ends kadm.ListedOffsets, fed bool, err error) {
	for drained := false; !drained; {
		select {
		case smp := <-r.samples:
			settled := r.cur != nil && !r.cur.settledAt.IsZero()
			r.observe(smp)
			if r.cur != nil && !settled && !r.cur.settledAt.IsZero() {
				event("scale step %d settled: %s", len(r.steps), r.step())
			}
		default:
			drained = true
		}
	}
	if r.fed {
		return 0, nil, false, nil
	}
	full := r.feed.full()
	if !r.due(time.Now()) && !full {
		return 0, nil, false, nil
	}
	if next := r.next(); next > 0 && !full {
		if r.cur.timedOut {
			event("scale step %d did not settle within %s; going on", len(r.steps), r.settle)
		}
		return 0, nil, false, r.apply(next, fl, res, event)
	}
	// The last step is over, or the input is: stop writing it.
	if full {
		event("the input reached --records before the scale steps were over")
	}
	r.fed = true
	if n, err = r.feed.stop(r.cl); err != nil {
		return 0, nil, false, err
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		if ends, err = r.adm.ListEndOffsets(ctx, r.parts[0].topic); err == nil {
			err = ends.Error()
		}
		cancel()
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			return 0, nil, false, fmt.Errorf("chaos: reading the input's end offsets: %w", err)
		}
	}
	r.ends = map[tp]int64{}
	ends.Each(func(l kadm.ListedOffset) { r.ends[tp{l.Topic, l.Partition}] = l.Offset })
	if r.cur != nil && !r.cur.settledAt.IsZero() {
		r.closeStep(time.Now()) // settled and dwelled: what follows is the tail
	}
	event("wrote %d records to the input at %d records/s; the group is to commit them all", n, r.feed.rate)
	return n, ends, true, nil
}

// end stops the feed and the sampling and returns the steps, and notes
// the protocol the group ran in res.
func (r *scaleRun) end(res *Result) []ScaleStep {
	res.GroupProtocolSeen = string(r.seen)
	r.stop()
	if r.feed != nil && !r.fed {
		r.fed = true
		_, _ = r.feed.stop(r.cl)
	}
	r.closeStep(time.Now())
	return r.steps
}

// scaleProblems names the checks a scale run failed, through add.
func scaleProblems(r Result, add func(cond bool, name Problem, format string, a ...any)) {
	planned := len(r.ScalePlan)
	if planned == 0 {
		return
	}
	var unsettled []string
	for i, s := range r.Steps {
		if !s.Settled {
			unsettled = append(unsettled, fmt.Sprintf("step %d (%d processes): %s", i+1, s.Processes, s.Problem))
		}
	}
	add(len(unsettled) > 0, ProblemScaleUnsettled, "%d of %d scale steps did not settle: %s", len(unsettled), len(r.Steps), strings.Join(unsettled, "; "))
	add(len(r.Steps) < planned, ProblemScaleIncomplete, "only %d of %d scale steps began before the input ran out; raise --records or lower --input-rate",
		len(r.Steps), planned)
}
