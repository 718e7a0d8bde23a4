package conformance

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/eosflow/eosflow/codec"
	"github.com/eosflow/eosflow/config"
	"github.com/eosflow/eosflow/eos"
	"github.com/eosflow/eosflow/state"
	"github.com/eosflow/eosflow/tools/kafkatest"
	"github.com/eosflow/eosflow/tools/verdict"
	"github.com/eosflow/eosflow/topology"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TableJoin is a kind of table-table join: which sides keep the joined
// row alive on their own.
type TableJoin struct{ KeepUsers, KeepPlans bool }

// The kinds of table-table join the scenario runs.
var (
	InnerTableJoin = TableJoin{}
	LeftTableJoin  = TableJoin{KeepUsers: true}
	OuterTableJoin = TableJoin{KeepUsers: true, KeepPlans: true}
)

// noRow is how a side without a row reads in a joined row.
const noRow = "-"

// joinedRow is the joined row of user u and plan p, "-" for a side
// without a row.
func joinedRow(u string, uok bool, p string, pok bool) string {
	if !uok {
		u = noRow
	}
	if !pok {
		p = noRow
	}
	return u + " on " + p
}

// TableJoinTopology joins the table of users with the table of plans,
// both keyed by user and kept in stores of engine e, with the join kind
// j, and writes the joined table, "<user> on <plan>" ("-" for a side
// without a row), to out: rows the join deletes are deleted from it with
// a tombstone.
func TableJoinTopology(users, plans, out string, e state.Engine, j TableJoin) *topology.Topology {
	top := topology.New()
	us := topology.TableFrom(top, users, codec.String(), e, topology.Named("users"))
	ps := topology.TableFrom(top, plans, codec.String(), e, topology.Named("plans"))
	var joined topology.Table[string]
	switch j {
	case InnerTableJoin:
		joined = topology.JoinTables(us, ps, "join", func(_ context.Context, _ []byte, u, p string) (string, error) {
			return joinedRow(u, true, p, true), nil
		})
	case LeftTableJoin:
		joined = topology.LeftJoinTables(us, ps, "join", func(_ context.Context, _ []byte, u, p string, pok bool) (string, error) {
			return joinedRow(u, true, p, pok), nil
		})
	default:
		joined = topology.OuterJoinTables(us, ps, "join", func(_ context.Context, _ []byte, u, p string, uok, pok bool) (string, error) {
			return joinedRow(u, uok, p, pok), nil
		})
	}
	topology.ToTable(joined, out, codec.String(), topology.Named("out"))
	return top
}

// deleted is how a tombstone reads in the expected and the committed
// outputs of the table join scenario.
const deleted = "<deleted>"

// tableOp is one record of a table's topic: a row, or a tombstone when
// value is "".
type tableOp struct{ key, value string }

// tableModel is the two tables and the joined one in plain Go, with the
// outputs of each key in order, and counts of what the deletes did.
type tableModel struct {
	join  TableJoin
	sides [2]map[string]string // users, plans
	outs  map[string][]string
	// retracted counts the deletes of each side that deleted a joined
	// row, kept those that updated it (the other side keeps it alive),
	// silent those that had none to change.
	retracted, kept, silent [2]int
}

// keeps reports whether side keeps the joined row alive on its own.
func (m *tableModel) keeps(side int) bool {
	return side == 0 && m.join.KeepUsers || side == 1 && m.join.KeepPlans
}

// row is the joined row of key, if there is one.
func (m *tableModel) row(key string) (string, bool) {
	u, uok := m.sides[0][key]
	p, pok := m.sides[1][key]
	if uok && pok || uok && m.keeps(0) || pok && m.keeps(1) {
		return joinedRow(u, uok, p, pok), true
	}
	return "", false
}

// apply runs op of side (0 users, 1 plans) through the model: whatever
// changes the joined row emits it, a tombstone when it is gone.
func (m *tableModel) apply(side int, op tableOp) {
	_, had := m.sides[side][op.key]
	_, existed := m.row(op.key)
	if op.value == "" {
		delete(m.sides[side], op.key)
	} else {
		m.sides[side][op.key] = op.value
	}
	now, exists := m.row(op.key)
	switch {
	case op.value == "" && (!had || !existed):
		m.silent[side]++
	case op.value == "" && exists:
		m.kept[side]++
		m.outs[op.key] = append(m.outs[op.key], now)
	case op.value == "":
		m.retracted[side]++
		m.outs[op.key] = append(m.outs[op.key], deleted)
	case exists:
		m.outs[op.key] = append(m.outs[op.key], now)
	}
}

// final is the joined table the model ends with.
func (m *tableModel) final() map[string]string {
	rows := map[string]string{}
	for _, side := range m.sides {
		for k := range side {
			if r, ok := m.row(k); ok {
				rows[k] = r
			}
		}
	}
	return rows
}

// tablePhase is what one phase of the scenario writes: records of one
// side only, so that each key's order, and with it the outputs, follows
// from the seed whatever order the runtime takes the two topics in.
type tablePhase struct {
	side int
	ops  []tableOp
}

// tableSeed makes the scenario's phases: users set, plans set (with
// deletes of rows never set), then users and plans mostly deleted, then
// both mostly set again. Each key of the last four phases is first
// deleted, sometimes deleted again, sometimes set after.
func tableSeed(keys int, rng *rand.Rand) []tablePhase {
	version := [2]map[string]int{{}, {}}
	set := func(side int, k string) tableOp {
		version[side][k]++
		return tableOp{k, fmt.Sprintf("%s-%c%d", k, "up"[side], version[side][k])}
	}
	var phases []tablePhase
	for i, side := range []int{0, 1, 0, 1, 0, 1} {
		ph := tablePhase{side: side}
		for j := 0; j < keys; j++ {
			k := fmt.Sprintf("k%02d", j)
			switch r := rng.IntN(10); {
			case i < 2 && r < 8:
				ph.ops = append(ph.ops, set(side, k))
			case i < 2 && r < 9:
				ph.ops = append(ph.ops, tableOp{k, ""}, set(side, k))
			case i < 2:
				ph.ops = append(ph.ops, tableOp{k, ""})
			case r < 3 || (i < 4 && r < 5):
				ph.ops = append(ph.ops, tableOp{k, ""})
			case r < 4 || (i < 4 && r < 7):
				ph.ops = append(ph.ops, tableOp{k, ""}, tableOp{k, ""})
			case r < 8 || (i < 4 && r < 9):
				ph.ops = append(ph.ops, tableOp{k, ""}, set(side, k))
			default:
				ph.ops = append(ph.ops, set(side, k))
			}
		}
		phases = append(phases, ph)
	}
	return phases
}

// produceTable writes ops to topic in order, a tombstone as a nil value.
func produceTable(t *testing.T, env *kafkatest.Env, topic string, ops []tableOp) {
	t.Helper()
	cl := env.Client(t)
	for _, op := range ops {
		r := &kgo.Record{Topic: topic, Key: []byte(op.key)}
		if op.value != "" {
			r.Value = []byte(op.value)
		}
		cl.Produce(context.Background(), r, nil)
	}
	if err := cl.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// TableJoinDeletesExactlyOnce joins two compacted tables while rows of
// both are set, changed and deleted, under exactly-once: the committed
// output must be, key by key and in order, the joined rows and tombstones
// a plain-Go model of the two tables predicts from the seed, each once,
// so that it ends with exactly the model's joined table (a deleted key's
// last record a tombstone). Each phase writes one table only and waits
// until the pipeline has committed it, so the outputs follow from the
// seed alone. On every broker a BeforeCommit veto aborts the first batch
// with outputs of the first phase that deletes users (each key's first
// record there is a tombstone), after waiting for its outputs to reach the
// log, where read_uncommitted must see aborted tombstones; its runner
// stops, and a new one
// restores both tables (and the deletes) from their changelogs and redoes
// the batch. The phase that deletes plans is hit by a failed EndTxn on the
// embedded broker, by a second veto on others. A second instance joins for
// the last two phases. Stores use engine e.
func TableJoinDeletesExactlyOnce(t *testing.T, env *kafkatest.Env, e state.Engine, j TableJoin) {
	const keys, partitions = 60, 3
	phases := tableSeed(keys, rand.New(rand.NewPCG(17, 19)))
	m := &tableModel{join: j, sides: [2]map[string]string{{}, {}}, outs: map[string][]string{}}
	for _, ph := range phases {
		for _, op := range ph.ops {
			m.apply(ph.side, op)
		}
	}
	checkTableSeed(t, m)
	compact := "compact"
	names := []string{env.Name("users"), env.Name("plans"), env.Name("user-plans")}
	env.CreateTopicsWith(t, partitions, map[string]*string{"cleanup.policy": &compact}, names...)
	app := env.Name("tables")
	cfg := env.Config(app, "a", config.ExactlyOnce)
	cfg.MaxBatchRecords = 40
	v := &veto{}
	f := newFleet(t, env, cfg, func() *topology.Topology { return TableJoinTopology(names[0], names[1], names[2], e, j) }, eos.BeforeCommit(v.check))
	read := 0
	phase := func(i int) {
		t.Helper()
		produceTable(t, env, names[phases[i].side], phases[i].ops)
		read += len(phases[i].ops)
	}
	committed := func(what string) {
		t.Helper()
		Until(t, 120*time.Second, what, func() bool { return f.recordsIn() >= uint64(read) })
	}
	vetoed := func() {
		t.Helper()
		x := f.runs[len(f.runs)-1]
		if err := x.Wait(t, 120*time.Second); !errors.Is(err, errVetoed) {
			t.Fatalf("the runner should stop on the vetoed batch, got %v", err)
		}
		if s := x.R.Stats(); s.Aborted == 0 {
			t.Fatalf("stats %+v: the vetoed batch did not abort", s)
		}
		again := f.start("a")
		Until(t, 120*time.Second, "the restarted runner to restore", func() bool { return again.R.Stats().Restored > 0 })
	}
	f.start("a")
	phase(0)
	committed("the users set")
	phase(1)
	committed("the plans set")
	v.armed.Store(true)
	phase(2)
	vetoed()
	committed("users deleted")
	var endTxn *kfake.FaultHandle
	if env.Fake != nil {
		endTxn = env.Fake.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.EndTxn}, Err: kerr.UnknownServerError, Count: 1})
	} else {
		v.armed.Store(true)
	}
	phase(3)
	if endTxn == nil {
		vetoed()
	}
	committed("plans deleted")
	f.start("b")
	checkCoPartitioned(t, env, app, names[0], names[1])
	phase(4)
	committed("users changed again")
	phase(5)
	committed("plans changed again")
	checkTableFaults(t, f, v, endTxn)
	checkJoinedTable(t, env, m, names[2])
}

// checkTableSeed fails t unless the seed makes every kind of delete the
// join kind has happen on both sides: deleting a joined row (not possible
// for a side whose other side keeps the row alone but which does not),
// deleting one the other side keeps alive (left and outer joins), and
// deleting where there is no joined row to change (a side that does not
// keep the row).
func checkTableSeed(t *testing.T, m *tableModel) {
	t.Helper()
	for side := range 2 {
		switch {
		case (m.keeps(side) || !m.keeps(1-side)) && m.retracted[side] == 0:
			t.Fatalf("side %d: the seed deletes no joined row (retracted %v, kept %v, silent %v)", side, m.retracted, m.kept, m.silent)
		case m.keeps(1-side) && m.kept[side] == 0:
			t.Fatalf("side %d: the seed deletes no row the other side keeps (kept %v)", side, m.kept)
		case !m.keeps(side) && m.silent[side] == 0:
			t.Fatalf("side %d: the seed deletes no row without a joined one (silent %v)", side, m.silent)
		}
	}
}

// checkTableFaults fails t unless the injected faults happened and
// aborted batches: each veto of v on a batch with outputs, and the
// EndTxn failure if there is one.
func checkTableFaults(t *testing.T, f *fleet, v *veto, endTxn *kfake.FaultHandle) {
	t.Helper()
	vetoes := 2
	if endTxn != nil {
		vetoes = 1
		if endTxn.Hits() != 1 {
			t.Fatalf("%d of 1 injected EndTxn failures happened", endTxn.Hits())
		}
	}
	if got := v.fired.Load(); got != int32(vetoes) || v.outputs.Load() == 0 {
		t.Fatalf("%d batches vetoed with %d outputs, want %d with outputs", got, v.outputs.Load(), vetoes)
	}
	var aborted uint64
	for i, x := range f.runs {
		s := x.R.Stats()
		aborted += s.Aborted
		t.Logf("runner %d: %+v", i+1, s)
	}
	faults := uint64(v.fired.Load())
	if endTxn != nil {
		faults++
	}
	if aborted < faults {
		t.Fatalf("%d batches aborted across the runners, want at least the %d failed", aborted, faults)
	}
}

// checkJoinedTable reads out read_committed and fails t unless each key
// has exactly the outputs the model m predicts, in order, and so ends
// with m's joined table: its row, or for a key without one a tombstone or
// nothing at all. It also fails unless the aborted batches left
// tombstones in the log (read_uncommitted sees them), since hiding them
// would otherwise prove nothing.
func checkJoinedTable(t *testing.T, env *kafkatest.Env, m *tableModel, out string) {
	t.Helper()
	want := 0
	for _, o := range m.outs {
		want += len(o)
	}
	got := map[string][]string{}
	tombstones := 0
	for _, r := range Drain(t, env, out, want) {
		v := string(r.Value)
		if r.Value == nil {
			v = deleted
			tombstones++
		}
		got[string(r.Key)] = append(got[string(r.Key)], v)
	}
	final := m.final()
	var wrong []string
	for k := range m.outs {
		if _, ok := got[k]; !ok {
			got[k] = nil
		}
	}
	for k, outs := range got {
		last := deleted
		if len(outs) > 0 {
			last = outs[len(outs)-1]
		}
		end := deleted // or nothing: a key never joined
		if row, ok := final[k]; ok {
			end = row
		}
		if last != end {
			wrong = append(wrong, fmt.Sprintf("%s ends with %q, want %q", k, last, end))
		}
		if !slices.Equal(outs, m.outs[k]) {
			wrong = append(wrong, fmt.Sprintf("%s: outputs %q, want %q", k, outs, m.outs[k]))
		}
	}
	slices.Sort(wrong)
	if len(wrong) > 0 {
		t.Fatalf("%d differences from the model's %d outputs and %d joined rows (first ones: %v)", len(wrong), want, len(final), wrong[:min(6, len(wrong))])
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	all, err := verdict.DrainAll(ctx, env.ClientOpts(t), out, want, 300*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	allTombstones := 0
	for _, r := range all {
		if r.Value == nil {
			allTombstones++
		}
	}
	t.Logf("%d outputs (%d tombstones) and %d joined rows exact; deletes that retracted a joined row %v, that updated it %v, that had none %v; "+
		"read_uncommitted sees %d records (%d tombstones)", want, tombstones, len(final), m.retracted, m.kept, m.silent, len(all), allTombstones)
	if allTombstones <= tombstones {
		t.Fatalf("read_uncommitted sees %d tombstones, read_committed %d: no aborted batch's tombstone reached the log, so hiding them proves nothing",
			allTombstones, tombstones)
	}
}
