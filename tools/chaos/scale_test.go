package chaos

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/eosflow/eosflow/config"
	"github.com/eosflow/eosflow/internal/kafkautil"
)

func TestValidateScale(t *testing.T) {
	scale := func(o Options) Options { o.Exe, o.Scale = "x", []int{1, 3}; return o }
	for _, tc := range []struct {
		name string
		o    Options
		want string // "" accepts
	}{
		{"count", scale(Options{Pipeline: PipelineCount, ProcessWorkers: 2, GroupProtocol: config.GroupProtocolConsumer}), ""},
		{"upper", scale(Options{}), ""},
		{"a step of none", Options{Exe: "x", Scale: []int{1, 0}}, "at least 1"},
		{"with kills", scale(Options{Kills: 1}), "drop --kills"},
		{"with aborts", scale(Options{AbortRate: 0.1}), "--abort-rate"},
		{"with a pace", scale(Options{Rate: 10}), "drop --rate"},
		{"by value", scale(Options{Pipeline: PipelineCount, GroupBy: GroupingValue}), "--group-by"},
		{"windowed", scale(Options{Pipeline: PipelineWindowed}), "not supported"},
		{"unknown protocol", Options{Exe: "x", GroupProtocol: "eager"}, "--group-protocol"},
		{"too many workers", Options{Exe: "x", ProcessWorkers: 1000}, "--process-workers"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.o.Validate()
			if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
				t.Fatalf("Validate() = %v, want %q", err, tc.want)
			}
		})
	}
}

func TestWorkerEnv(t *testing.T) {
	o := Options{ProcessWorkers: 2, GroupProtocol: config.GroupProtocolConsumer, Scale: []int{1}}
	if got, want := o.workerEnv(), []string{"EOS_WORKERS=2", "EOS_GROUP_PROTOCOL=consumer", "EOS_LEAVE_GROUP_ON_CLOSE=true"}; !slices.Equal(got, want) {
		t.Fatalf("workerEnv() = %q, want %q", got, want)
	}
	if got := (Options{ProcessWorkers: 1}).workerEnv(); len(got) != 0 {
		t.Fatalf("a plain run's workers get %q; want nothing", got)
	}
	if got := instanceIDs("worker-3", 2); !slices.Equal(got, []string{"worker-3_0", "worker-3_1"}) {
		t.Fatalf("instanceIDs = %q", got)
	}
}

// sampler builds group samples for a scaler over topic "in".
type sampler struct {
	t0        time.Time
	committed map[tp]int64
}

func (s *sampler) at(ms int, state string, owners map[string][]int32) groupSample {
	g := kafkautil.Group{Protocol: config.GroupProtocolClassic, State: state}
	ids := make([]string, 0, len(owners))
	for id := range owners {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		g.Members = append(g.Members, kafkautil.GroupMember{InstanceID: id, Assigned: map[string][]int32{"in": owners[id]}})
	}
	c := map[tp]int64{}
	for p, o := range s.committed {
		c[p] = o
	}
	return groupSample{at: s.t0.Add(time.Duration(ms) * time.Millisecond), group: g, described: true, committed: c}
}

func (s *sampler) commit(ps ...int32) {
	for _, p := range ps {
		s.committed[tp{"in", p}] += 10
	}
}

// A step settles once the group is stable with exactly its members, every
// partition assigned once, and then every partition committed: the times
// are measured from the step's start, and pauses per partition and for the
// whole group.
func TestScalerStep(t *testing.T) {
	parts := []tp{{"in", 0}, {"in", 1}, {"in", 2}, {"in", 3}}
	o := Options{Scale: []int{1, 2}, ProcessWorkers: 2, ScaleDwell: time.Second, SettleTimeout: 10 * time.Second}
	sc := newScaler(o, parts)
	s := &sampler{t0: time.Unix(1000, 0), committed: map[tp]int64{}}

	sc.begin(s.t0, []string{"worker-0"})
	sc.observe(s.at(100, "PreparingRebalance", map[string][]int32{"worker-0_0": nil}))
	if sc.step().Settled || !strings.Contains(sc.cur.waiting, "1 to join (worker-0_1)") {
		t.Fatalf("waiting for %q", sc.cur.waiting)
	}
	one := map[string][]int32{"worker-0_0": {0, 1}, "worker-0_1": {2, 3}}
	sc.observe(s.at(500, "Stable", one))
	s.commit(0, 1, 2)
	sc.observe(s.at(700, "Stable", one))
	if sc.step().Settled || !strings.Contains(sc.cur.waiting, "in/3") {
		t.Fatalf("settled without in/3 committing; waiting for %q", sc.cur.waiting)
	}
	s.commit(3)
	sc.observe(s.at(900, "Stable", one))
	st := *sc.step()
	if !st.Settled || st.Assigned != 500*time.Millisecond || st.Rebalance != 900*time.Millisecond || st.Moved != 4 || st.Committing != 4 || st.Members != 2 {
		t.Fatalf("step 1 %+v", st)
	}
	if sc.due(s.t0.Add(1500*time.Millisecond)) || !sc.due(s.t0.Add(1900*time.Millisecond)) || sc.next() != 2 {
		t.Fatalf("due before its dwell, or not after it; next %d", sc.next())
	}

	// Step 2: worker-1 joins; partitions 1 and 3 move to it. Partition 3
	// stands still from 900ms to 4s, and no partition commits from 2s
	// to 3s.
	sc.begin(s.t0.Add(2*time.Second), []string{"worker-0", "worker-1"})
	s.commit(0, 1, 2)
	sc.observe(s.at(2000, "Stable", one))
	sc.observe(s.at(2500, "Stable", one)) // nothing new committed
	two := map[string][]int32{"worker-0_0": {0}, "worker-0_1": {2}, "worker-1_0": {1}, "worker-1_1": {3}}
	sc.observe(s.at(3000, "Stable", two))
	s.commit(0, 1, 2)
	sc.observe(s.at(3500, "Stable", two))
	s.commit(3)
	sc.observe(s.at(4000, "Stable", two))
	st = *sc.step()
	if !st.Settled || st.Assigned != time.Second || st.Rebalance != 2*time.Second || st.Moved != 2 {
		t.Fatalf("step 2 %+v: want assigned 1s, committing 2s, 2 partitions moved", st)
	}
	if st.LongestPause != 3100*time.Millisecond || st.PausedPartition != "in/3" || st.GroupPause != 1500*time.Millisecond {
		t.Fatalf("step 2 pauses %+v: want in/3 still for 3.1s, the group for 1.5s", st)
	}
	if sc.next() != 0 {
		t.Fatalf("a step after the last: %d", sc.next())
	}
	// Partitions 0 and 2 stayed with worker-0: each stood still 1.5 s at
	// most (2s to 3.5s); the pause of in/3, which moved, does not count.
	if st.Stayed != 2 || st.StayedPause != 1500*time.Millisecond || st.StayedPartition != "in/0" {
		t.Fatalf("step 2 %+v: want 2 partitions stayed put, in/0 still for 1.5s", st)
	}
	// A pause still open when the step ends counts too: in/0 and in/2
	// stand still from 3.5s to 6s.
	sc.closeStep(s.t0.Add(6000 * time.Millisecond))
	st = *sc.step()
	if st.StayedPause != 2500*time.Millisecond || st.StayedPartition != "in/0" {
		t.Fatalf("step 2 %+v: want in/0 still for 2.5s at the step's end", st)
	}
	b, err := json.Marshal(st)
	if err != nil || !strings.Contains(string(b), `"rebalance_ms":2000`) || !strings.Contains(string(b), `"longest_pause_ms":3100`) ||
		!strings.Contains(string(b), `"stayed_pause_ms":2500`) {
		t.Fatalf("JSON %s, %v", b, err)
	}
	var back ScaleStep
	if err := json.Unmarshal(b, &back); err != nil || back != st {
		t.Fatalf("JSON round trip %+v, want %+v (%v)", back, st, err)
	}
}

// A step that never settles is over at its timeout, and says what it
// waited for; a member of a removed process that never leaves keeps it
// from settling.
func TestScalerUnsettledStep(t *testing.T) {
	parts := []tp{{"in", 0}, {"in", 1}}
	o := Options{Scale: []int{2, 1}, ProcessWorkers: 1, ScaleDwell: time.Second, SettleTimeout: 5 * time.Second}
	sc := newScaler(o, parts)
	s := &sampler{t0: time.Unix(1000, 0), committed: map[tp]int64{}}
	sc.begin(s.t0, []string{"worker-1"})
	stay := map[string][]int32{"worker-0": {0}, "worker-1": {1}}
	s.commit(0, 1)
	sc.observe(s.at(1000, "Stable", stay))
	if sc.due(s.t0.Add(4 * time.Second)) {
		t.Fatal("over before its timeout")
	}
	if !sc.due(s.t0.Add(5 * time.Second)) {
		t.Fatal("not over at its timeout")
	}
	sc.closeStep(s.t0.Add(5 * time.Second))
	st := sc.steps[0]
	if st.Settled || !strings.Contains(st.Problem, "1 to leave (worker-0)") {
		t.Fatalf("step %+v: want unsettled, waiting for worker-0 to leave", st)
	}
	var names []Problem
	scaleProblems(Result{ScalePlan: []int{2, 1}, Steps: sc.steps}, func(cond bool, name Problem, _ string, _ ...any) {
		if cond {
			names = append(names, name)
		}
	})
	if !slices.Equal(names, []Problem{ProblemScaleUnsettled, ProblemScaleIncomplete}) {
		t.Fatalf("problems %v", names)
	}
}

// Once the input is complete, a partition at its end cannot pause, and a
// step whose partition ran out says so.
func TestScalerPartitionOutOfInput(t *testing.T) {
	parts := []tp{{"in", 0}, {"in", 1}}
	o := Options{Scale: []int{1}, ProcessWorkers: 1, SettleTimeout: 5 * time.Second}
	sc := newScaler(o, parts)
	s := &sampler{t0: time.Unix(1000, 0), committed: map[tp]int64{}}
	sc.ends = map[tp]int64{{"in", 0}: 10, {"in", 1}: 100}
	sc.begin(s.t0, []string{"worker-0"})
	s.commit(0)
	one := map[string][]int32{"worker-0": {0, 1}}
	sc.observe(s.at(100, "Stable", one))
	sc.observe(s.at(200, "Stable", one))
	if sc.step().Settled || !strings.Contains(sc.cur.waiting, "in/0, out of input") {
		t.Fatalf("waiting for %q: want in/0 out of input", sc.cur.waiting)
	}
	sc.closeStep(s.t0.Add(3 * time.Second))
	if st := sc.steps[0]; st.PausedPartition != "in/1" {
		t.Fatalf("step %+v: in/0 is done and cannot pause; in/1 can", st)
	}
}

func TestScaleDefaults(t *testing.T) {
	o := Options{Scale: []int{2, 4}}
	o.defaults()
	if o.Workers != 2 || o.BatchRecords != config.DefaultMaxBatchRecords || o.ProcessWorkers != 1 || o.InputRate != defaultInputRate ||
		o.ScaleDwell != defaultScaleDwell || o.SettleTimeout != defaultSettleTimeout {
		t.Fatalf("scale defaults %+v", o)
	}
	o = Options{}
	o.defaults()
	if o.BatchRecords != 500 || o.ScaleDwell != 0 {
		t.Fatalf("a fault run's batches %d, dwell %s: want the verifier's 500 and no dwell", o.BatchRecords, o.ScaleDwell)
	}
}
