package eos

import (
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/eosflow/eosflow/config"
	"github.com/eosflow/eosflow/internal/graph"
	"github.com/eosflow/eosflow/internal/kafkautil"
	"github.com/eosflow/eosflow/internal/store"
	"github.com/eosflow/eosflow/state"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

// ownedTaskStores is a taskStores with one store, "counts", on topic in.
func ownedTaskStores(t *testing.T) *taskStores {
	t.Helper()
	ts := newTaskStores([]graph.Store{{Name: "counts", Engine: state.Memory(), Source: "in"}}, nil, t.TempDir(), "app", zap.NewNop())
	t.Cleanup(ts.closeAll)
	return ts
}

// restoreAll stands in for the batch loop's restore: it opens the stores
// of the unready tasks, marks them caught up and serves them.
func restoreAll(t *testing.T, ts *taskStores) {
	t.Helper()
	tasks := ts.unready()
	for _, task := range tasks {
		if ts.open[task] == nil {
			s, err := store.Open(state.Memory(), "", "counts", task)
			if err != nil {
				t.Fatal(err)
			}
			ts.open[task] = map[string]*store.Store{"counts": s}
		}
		ts.ready[task] = true
	}
	ts.serveReady(tasks)
}

// served reports whether queries may read task's store.
func served(t *testing.T, ts *taskStores, task state.Task) bool {
	t.Helper()
	err := ts.serve.read("counts", task, func(*store.Store) error { return nil })
	if err != nil && !errors.Is(err, errNotServing) {
		t.Fatal(err)
	}
	return err == nil
}

// viewOf is a settled group view listing ps as this member's and the
// other partitions as held by "other".
func viewOf(ps ...int32) groupView {
	v := groupView{settled: true, mine: map[state.Task]bool{}, holders: map[state.Task]string{}}
	for p := int32(0); p < 4; p++ {
		v.holders[state.Task{Topic: "in", Partition: p}] = "other"
	}
	for _, p := range ps {
		t := state.Task{Topic: "in", Partition: p}
		v.mine[t], v.holders[t] = true, "me"
	}
	return v
}

func checkTask(t *testing.T, ts *taskStores, what string, p int32, owned, serving bool) {
	t.Helper()
	task := state.Task{Topic: "in", Partition: p}
	if ts.owns(task) != owned || served(t, ts, task) != serving {
		t.Fatalf("%s: %s owned %v served %v, want %v %v", what, task, ts.owns(task), served(t, ts, task), owned, serving)
	}
}

// reconcile follows the group's description where no revoke callback
// came: a task the group no longer lists as this member's is neither
// served nor owned for queries, while the batch loop keeps it until the
// client lets it go; at a new generation every task waits for the group to list it
// before it is served again, and one it lists is served again whether or
// not its partition ever had a record.
func TestReconcileAgainstGroup(t *testing.T) {
	ts := ownedTaskStores(t)
	ts.assign(map[string][]int32{"in": {0, 1, 2}})
	ts.reconcile(1, viewOf(0, 1, 2))
	ts.sync()
	restoreAll(t, ts)
	for p := int32(0); p < 3; p++ {
		checkTask(t, ts, "first generation", p, true, true)
	}
	if got := ts.holder(state.Task{Topic: "in", Partition: 3}); got != "other" {
		t.Fatalf("holder of partition 3 = %q, want other", got)
	}

	ts.reconcile(2, groupView{}) // a new generation the coordinator cannot describe yet
	ts.sync()
	for p := int32(0); p < 3; p++ {
		checkTask(t, ts, "new generation, unsettled", p, true, false)
	}
	ts.serveReady([]state.Task{{Topic: "in", Partition: 0}})
	checkTask(t, ts, "unconfirmed, a restore ends", 0, true, false)
	if !ts.checkDue(2) {
		t.Fatal("an unsettled check is not due again")
	}

	ts.reconcile(2, viewOf(0, 2)) // a swallowed revoke took 1
	ts.sync()
	checkTask(t, ts, "listed", 0, true, true)
	checkTask(t, ts, "listed, no record ever", 2, true, true)
	checkTask(t, ts, "not listed", 1, false, false)
	if got := ts.owned([]state.Task{{Topic: "in", Partition: 1}}); len(got) != 1 {
		t.Fatal("partition 1: the batch loop let it go before the client did")
	}
	restoreAll(t, ts)
	checkTask(t, ts, "not listed, a restore ends", 1, false, false)
	ts.assign(map[string][]int32{"in": {1}}) // the group gives it back
	ts.sync()
	restoreAll(t, ts)
	checkTask(t, ts, "assigned again", 1, true, true)
	if ts.checkDue(2) {
		t.Fatal("a settled check is due again at the same generation")
	}
	if got := ts.holder(state.Task{Topic: "in", Partition: 1}); got != "other" {
		t.Fatalf("holder of partition 1 = %q, want other", got)
	}
}

// A partition kept across cooperative rebalances gets no callback, and
// an empty one has no committed offset to show it is still held: the
// group's description does, so it is served again at every generation.
func TestReconcileKeptEmptyPartition(t *testing.T) {
	ts := ownedTaskStores(t)
	ts.assign(map[string][]int32{"in": {0, 1}})
	ts.reconcile(1, viewOf(0, 1))
	ts.sync()
	restoreAll(t, ts)
	for gen := int32(2); gen < 102; gen++ {
		ts.reconcile(gen, viewOf(0, 1))
		ts.sync()
		restoreAll(t, ts)
		checkTask(t, ts, "kept", 1, true, true)
	}
	if got := ts.unready(); len(got) != 0 {
		t.Fatalf("unready %v, want none", got)
	}
}

// A session that ends (a rebuild) may leave the group with its revoke
// swallowed: its tasks are given up then, and the next client's
// assignment alone says which are owned again, so a partition the group
// gave to another member is never restored nor served here.
func TestSessionRebuildGivesUpTasks(t *testing.T) {
	ts := ownedTaskStores(t)
	ts.assign(map[string][]int32{"in": {0, 1}})
	ts.reconcile(5, viewOf(0, 1))
	ts.sync()
	restoreAll(t, ts)
	checkTask(t, ts, "before the rebuild", 1, true, true)

	ts.endSession()
	checkTask(t, ts, "session ended", 0, false, false)
	checkTask(t, ts, "session ended", 1, false, false)
	ts.reload()
	ts.assign(map[string][]int32{"in": {0}}) // the new client gets 0 alone
	ts.reconcile(6, viewOf(0))
	ts.sync()
	restoreAll(t, ts)
	for i := 0; i < 3; i++ {
		ts.reconcile(6, viewOf(0))
		ts.sync()
	}
	checkTask(t, ts, "new client", 0, true, true)
	checkTask(t, ts, "given to another member", 1, false, false)
	if ts.open[state.Task{Topic: "in", Partition: 1}] != nil {
		t.Fatal("partition 1: stores still open after the rebuild")
	}
}

// A task assigned since the last sync that the view does not list yet is
// not revoked: the view may predate the assignment; the check runs again.
func TestReconcileAssignedNotListedYet(t *testing.T) {
	ts := ownedTaskStores(t)
	ts.assign(map[string][]int32{"in": {0}})
	ts.reconcile(1, viewOf(0))
	ts.sync()
	ts.assign(map[string][]int32{"in": {1}})
	ts.reconcile(2, viewOf(0))
	checkTask(t, ts, "assigned, not listed", 1, true, false)
	if !ts.checkDue(2) {
		t.Fatal("the check is not due again")
	}
	ts.sync()
	restoreAll(t, ts)
	checkTask(t, ts, "restored, not confirmed", 1, true, false)
	ts.reconcile(2, viewOf(0, 1))
	checkTask(t, ts, "listed", 1, true, true)
}

// view reads a classic group as settled only when Stable, a consumer
// group member only at the client's epoch, and maps each partition to its
// member's instance id.
func TestGroupView(t *testing.T) {
	ts := ownedTaskStores(t)
	members := []kafkautil.GroupMember{
		{MemberID: "m1", InstanceID: "a", Assigned: map[string][]int32{"in": {0, 2}}, Epoch: 7},
		{MemberID: "m2", InstanceID: "b", Assigned: map[string][]int32{"in": {1}}, Epoch: 9},
	}
	for _, tt := range []struct {
		name    string
		g       kafkautil.Group
		gen     int32
		settled bool
	}{
		{"classic stable", kafkautil.Group{Protocol: config.GroupProtocolClassic, State: "Stable", Members: members}, 3, true},
		{"classic rebalancing", kafkautil.Group{Protocol: config.GroupProtocolClassic, State: "CompletingRebalance", Members: members}, 3, false},
		{"consumer, same epoch", kafkautil.Group{Protocol: config.GroupProtocolConsumer, State: "Reconciling", Members: members}, 7, true},
		{"consumer, other epoch", kafkautil.Group{Protocol: config.GroupProtocolConsumer, State: "Stable", Members: members}, 6, false},
		{"not a member", kafkautil.Group{Protocol: config.GroupProtocolClassic, State: "Stable", Members: members[1:]}, 3, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			v := ts.view(tt.g, "m1", tt.gen)
			if v.settled != tt.settled || (v.why == nil) != tt.settled {
				t.Fatalf("settled %v (why %v), want %v, and why only when not", v.settled, v.why, tt.settled)
			}
			if !v.settled {
				return
			}
			if !v.mine[state.Task{Topic: "in", Partition: 2}] || v.mine[state.Task{Topic: "in", Partition: 1}] {
				t.Fatalf("mine %v, want partitions 0 and 2", v.mine)
			}
			if h := v.holders[state.Task{Topic: "in", Partition: 1}]; h != "b" {
				t.Fatalf("holder of 1 = %q, want b", h)
			}
		})
	}
}

// The batch loop's idle poll is woken when the client's generation
// changes, and not while the group was checked at the generation it has:
// an idle instance checks the group at once, not at its next idle check.
func TestWatchGenerationWakesIdlePoll(t *testing.T) {
	r := &Runner{state: ownedTaskStores(t)}
	var gen atomic.Int32
	gen.Store(1)
	r.state.assign(map[string][]int32{"in": {0}})
	r.state.reconcile(1, viewOf(0))
	stop := r.watchGeneration(func() (string, int32) { return "m", gen.Load() })
	defer stop()
	woken := func() bool {
		r.idleWake.mu.Lock()
		defer r.idleWake.mu.Unlock()
		w := r.idleWake.woken
		r.idleWake.woken = false
		return w
	}
	time.Sleep(3 * genWatchEvery)
	if woken() {
		t.Fatal("woken with the group checked at the client's generation")
	}
	gen.Store(2)
	deadline := time.Now().Add(2 * time.Second)
	for !woken() {
		if time.Now().After(deadline) {
			t.Fatal("not woken 2s after the generation changed")
		}
		time.Sleep(10 * time.Millisecond)
	}
	r.state.reconcile(2, viewOf(0))
	woken()
	time.Sleep(3 * genWatchEvery)
	if woken() {
		t.Fatal("woken again after the group was checked at the new generation")
	}
}

// The generation watch stops serving every owned task as soon as the
// client's generation changes, from its own goroutine, so a busy batch
// loop does not delay it; queries then answer ErrAwaitingGroup until a
// check of the group confirms the task. A new assignment at the same
// generation does the same, and a view described before it is not
// applied.
func TestWatchGenerationStopsServing(t *testing.T) {
	r := &Runner{state: ownedTaskStores(t)}
	ts := r.state
	task := state.Task{Topic: "in", Partition: 0}
	ts.assign(map[string][]int32{"in": {0}})
	ts.reconcile(1, viewOf(0))
	ts.sync()
	restoreAll(t, ts)
	checkTask(t, ts, "confirmed", 0, true, true)
	var gen atomic.Int32
	gen.Store(1)
	stop := r.watchGeneration(func() (string, int32) { return "m", gen.Load() })
	defer stop()
	gen.Store(2)
	deadline := time.Now().Add(2 * time.Second)
	for served(t, ts, task) {
		if time.Now().After(deadline) {
			t.Fatal("still served 2s after the generation changed")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := ts.restoring(task); !errors.Is(err, ErrAwaitingGroup) || !errors.Is(err, ErrRestoring) {
		t.Fatalf("restoring = %v, want ErrAwaitingGroup, an ErrRestoring", err)
	}
	ts.reconcile(2, viewOf(0))
	checkTask(t, ts, "confirmed at the new generation", 0, true, true)

	round := ts.newGeneration(2)
	ts.newAssignment(2) // a revoke at the same epoch, while the group was described
	ts.confirm(round, viewOf(0))
	checkTask(t, ts, "a view from before the new assignment", 0, true, false)
	if !ts.checkDue(2) {
		t.Fatal("no check due after a view was dropped")
	}
	ts.reconcile(2, viewOf(0))
	checkTask(t, ts, "confirmed after the new assignment", 0, true, true)
	if err := ts.restoring(state.Task{Topic: "in", Partition: 3}); err != nil {
		t.Fatalf("restoring of a task not owned = %v, want nil", err)
	}
}

// A check of the group that does not settle is logged once it has not
// for unsettledWarnAfter, with the group and why, then at most every
// unsettledWarnEvery, and its settling after a warning is logged too.
func TestUnsettledGroupWarns(t *testing.T) {
	core, logs := observer.New(zapcore.InfoLevel)
	log := zap.New(core)
	var u unsettledGroup
	t0 := time.Now()
	failing := groupView{why: errors.New("describing the group: coordinator not available")}
	for _, step := range []struct {
		at   time.Duration
		v    groupView
		want string // the level logged, "" for nothing
	}{
		{0, failing, ""},
		{unsettledWarnAfter / 2, failing, ""},
		{unsettledWarnAfter, failing, "warn"},
		{unsettledWarnAfter + unsettledWarnEvery/2, failing, ""},
		{unsettledWarnAfter + unsettledWarnEvery, failing, "warn"},
		{unsettledWarnAfter + unsettledWarnEvery + time.Second, groupView{settled: true}, "info"},
		{unsettledWarnAfter + unsettledWarnEvery + 2*time.Second, failing, ""},
		{unsettledWarnAfter + unsettledWarnEvery + 3*time.Second, failing, ""},
		{unsettledWarnAfter + unsettledWarnEvery + 4*time.Second, groupView{settled: true}, ""},
	} {
		u.note(t0.Add(step.at), step.v, 3, "app", log)
		got := logs.TakeAll()
		switch {
		case step.want == "" && len(got) > 0:
			t.Fatalf("at %s: logged %q", step.at, got[0].Message)
		case step.want == "":
		case len(got) != 1 || got[0].Level.String() != step.want:
			t.Fatalf("at %s: logged %v, want one %s", step.at, got, step.want)
		case step.want == "warn":
			f := got[0].ContextMap()
			if f["group"] != "app" || !strings.Contains(fmt.Sprint(f["error"]), "coordinator not available") || !strings.Contains(got[0].Message, "ErrAwaitingGroup") {
				t.Fatalf("at %s: warning %q %v, want the group, the error and ErrAwaitingGroup", step.at, got[0].Message, f)
			}
		}
	}
}
