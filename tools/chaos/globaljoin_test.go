package chaos

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/eosflow/eosflow/config"
	"github.com/twmb/franz-go/pkg/kgo"
)

// The seed must hold every kind of customer, and the table must not be
// co-partitioned with the orders.
func TestGlobalSeedHoldsEveryKind(t *testing.T) {
	g := newGlobalRun(Options{Records: 3000, Keys: 50, Partitions: 6, Seed: 3}, "in", "table")
	if g.counts[customerStable] == 0 || g.counts[customerChanging] == 0 || g.counts[customerAbsent] == 0 {
		t.Fatalf("orders per kind %v: want every kind", g.counts)
	}
	rows := 0
	for _, r := range g.recs {
		switch r.topic {
		case "table":
			rows++
			if kindOf(customerNum(r.key)) == customerAbsent || r.value != globalInitial || r.partition >= globalPartitions(6) {
				t.Fatalf("table row %+v", r)
			}
		case "in":
			if r.partition >= 6 {
				t.Fatalf("order %+v", r)
			}
		}
	}
	if rows != 45 || len(g.orders) != 3000 || globalPartitions(6) == 6 {
		t.Fatalf("%d rows, %d orders, %d table partitions", rows, len(g.orders), globalPartitions(6))
	}
}

func TestJudgeGlobal(t *testing.T) {
	g := newGlobalRun(Options{Records: 600, Keys: 50, Partitions: 6, Seed: 5}, "in", "table")
	t0 := tableOutcome{committed: map[string]map[string]bool{"c0": {"v3": true}}, aborted: map[string]bool{"x5": true}, commits: 1, aborts: 1}
	rowOf := func(c string) string {
		switch kindOf(customerNum(c)) {
		case customerAbsent:
			return globalNone
		case customerChanging:
			return "v3" // committed for c0 only
		}
		return globalInitial
	}
	var out []*kgo.Record
	var orders []string
	for o, c := range g.orders {
		orders = append(orders, o)
		row := rowOf(c)
		if row == "v3" && c != "c0" {
			row = globalInitial
		}
		out = append(out, &kgo.Record{Key: []byte(o), Value: []byte(c + "=" + row)})
	}
	slices.Sort(orders)
	current(g, "c0", "v3")
	out = append(out, probeRecords(g, 0, "v3")...)
	v := judgeGlobal(g, t0, out)
	if !v.OK() || v.GlobalSeen != 606 || v.GlobalNoneOrders == 0 || !v.GlobalCurrent || v.GlobalProbes != 6 {
		t.Fatalf("exact output: %s %v", v, v.GlobalExamples)
	}
	find := func(kind customerKind, not string) string {
		for _, o := range orders {
			if kindOf(customerNum(g.orders[o])) == kind && g.orders[o] != not {
				return o
			}
		}
		t.Fatalf("no order of kind %d", kind)
		return ""
	}
	rec := func(o, row string) *kgo.Record {
		return &kgo.Record{Key: []byte(o), Value: []byte(g.orders[o] + "=" + row)}
	}
	stable, absent, changing := find(customerStable, ""), find(customerAbsent, ""), find(customerChanging, "c0")
	var bad []*kgo.Record
	for _, r := range out {
		switch string(r.Key) {
		case stable:
			bad = append(bad, rec(stable, "v3")) // another customer's update
		case absent:
			bad = append(bad, rec(absent, "x5")) // an aborted update
		case changing:
			// never came out
		default:
			bad = append(bad, r)
		}
	}
	bad = append(bad, out[0], &kgo.Record{Key: []byte("o999999"), Value: []byte("c1=v0")})
	bad = append(bad, &kgo.Record{Key: []byte(probeKey(1, 0, "c0")), Value: []byte("c0=v3")}) // of a wave never produced
	v = judgeGlobal(g, t0, bad)
	if v.GlobalWrongRow != 1 || v.GlobalAbortedRow != 1 || v.GlobalMissing != 1 || v.GlobalDuplicates != 1 || v.GlobalUnexpected != 2 {
		t.Fatalf("%s %v: want one of each difference", v, v.GlobalExamples)
	}
	problems := func(v GlobalVerdict) []Problem {
		var names []Problem
		globalProblems(Result{GlobalVerdict: &v}, func(cond bool, p Problem, _ string, _ ...any) {
			if cond {
				names = append(names, p)
			}
		})
		return names
	}
	want := []Problem{ProblemGlobalMissing, ProblemGlobalDuplicates, ProblemGlobalWrongRow, ProblemGlobalAbortedRow, ProblemGlobalUnexpected}
	if !v.GlobalCurrent {
		t.Fatalf("%s: the probes came out current", v)
	}
	// No aborted record in the table's log: the run cannot show an
	// aborted row, whatever it judged.
	if names := problems(v); !slices.Equal(names, append([]Problem{ProblemGlobalNoUpdates}, want...)) {
		t.Fatalf("no aborted record in the log: problems %v, want global_no_updates and %v", names, want)
	}
	v.TableAbortedPresent = 2
	if names := problems(v); !slices.Equal(names, want) {
		t.Fatalf("problems %v, want %v", names, want)
	}
}

// current sets g's table as read after the run: customer c's last row is
// row, every other customer's its seeded one.
func current(g *globalRun, c, row string) {
	g.read.last = map[string]string{}
	for k, kind := range g.kind {
		if kind != customerAbsent {
			g.read.last[k] = globalInitial
		}
	}
	g.read.last[c] = row
}

// probeRecords produces wave w of g's probes for c0, one per partition,
// after the bound when w is the last, and returns their output records,
// each joined with row.
func probeRecords(g *globalRun, w int, row string) []*kgo.Record {
	wave := probeWave{lag: time.Duration(w) * time.Second, orders: map[string]string{}}
	var out []*kgo.Record
	for p := range g.partitions {
		k := probeKey(w, p, "c0")
		wave.orders[k], g.probes[k] = "c0", "c0"
		out = append(out, &kgo.Record{Key: []byte(k), Value: []byte("c0=" + row)})
	}
	g.waves = append(g.waves, wave)
	return out
}

// The last probe wave decides: earlier waves may join older rows; the
// last must come out whole, every probe with its customer's last row.
func TestJudgeGlobalProbes(t *testing.T) {
	t0 := tableOutcome{committed: map[string]map[string]bool{"c0": {"v3": true, "v5": true}}, aborted: map[string]bool{}, commits: 2}
	seed := func() (*globalRun, []*kgo.Record) {
		g := newGlobalRun(Options{Records: 60, Keys: 50, Partitions: 3, Seed: 5, TableLag: 2 * time.Second}, "in", "table")
		current(g, "c0", "v5")
		var out []*kgo.Record
		for o, c := range g.orders {
			row := globalInitial
			if g.kind[c] == customerAbsent {
				row = globalNone
			}
			out = append(out, &kgo.Record{Key: []byte(o), Value: []byte(c + "=" + row)})
		}
		return g, out
	}
	g, out := seed()
	out = append(out, probeRecords(g, 0, "v3")...)
	out = append(out, probeRecords(g, 1, "v5")...)
	v := judgeGlobal(g, t0, out)
	if !v.OK() || v.GlobalStaleEarly != 3 || v.GlobalStale != 0 || v.GlobalProbeWaves != 2 || v.GlobalProbes != 6 || v.GlobalLastWave != 3 {
		t.Fatalf("a stale wave, then a current one: %s %v", v, v.GlobalExamples)
	}

	g, out = seed()
	out = append(out, probeRecords(g, 0, "v3")...)
	last := probeRecords(g, 2, "v5")
	last[1].Value = []byte("c0=v3")
	v = judgeGlobal(g, t0, append(out, last...))
	if v.OK() || v.GlobalCurrent || v.GlobalStale != 1 || v.GlobalProbeLag != 2 || v.GlobalWrongRow != 0 || len(v.GlobalExamples) != 1 {
		t.Fatalf("one probe of the last wave joined an older row: %s %v", v, v.GlobalExamples)
	}

	g, out = seed()
	v = judgeGlobal(g, t0, append(out, probeRecords(g, 0, "v5")[1:]...))
	if v.OK() || v.GlobalCurrent || v.GlobalStale != 0 || v.GlobalLastWaveOut != 2 || v.GlobalMissing != 1 {
		t.Fatalf("a probe of the last wave never came out: %s %v", v, v.GlobalExamples)
	}

	g, out = seed()
	g.probeNote = "no customer's row changed"
	v = judgeGlobal(g, t0, out)
	var failed []Problem
	var why string
	globalProblems(Result{GlobalVerdict: &v}, func(cond bool, p Problem, format string, a ...any) {
		if cond {
			failed, why = append(failed, p), fmt.Sprintf(format, a...)
		}
	})
	if v.OK() || !slices.Contains(failed, ProblemGlobalStale) || !strings.Contains(why, "no customer's row changed") {
		t.Fatalf("no wave: %s, failed %v (%s)", v, failed, why)
	}
}

// A probe's key names its customer, which identify checks against the
// value, and no key of the seed is a probe's.
func TestProbeKeys(t *testing.T) {
	g := newGlobalRun(Options{Records: 60, Keys: 50, Partitions: 3, Seed: 5}, "in", "table")
	k := probeKey(3, 2, "c17")
	if c, ok := probeCustomer(k); !ok || c != "c17" {
		t.Fatalf("probeCustomer(%q) = %q, %v", k, c, ok)
	}
	for _, bad := range []string{"o12", "p1.2", "px.1.c3", "p1.2.o3", "p1.2.c3.4"} {
		if _, ok := probeCustomer(bad); ok {
			t.Errorf("probeCustomer(%q) accepted", bad)
		}
	}
	for v, want := range map[string]bool{"c17=v4": true, "c18=v4": false, "c17": false} {
		if _, ok := g.identify(&kgo.Record{Key: []byte(k), Value: []byte(v)}); ok != want {
			t.Errorf("identify(%s, %s) = %v, want %v", k, v, ok, want)
		}
	}
}

// The default lag bound is the runtime's for the workers' settings.
func TestTableLagBound(t *testing.T) {
	for _, c := range []struct {
		base    config.Config
		session time.Duration
		want    time.Duration
	}{
		{config.Default(), 6 * time.Second, 30 * time.Second},
		{config.Config{}, 6 * time.Second, 30 * time.Second},
		{config.Config{TransactionTimeout: 40 * time.Second}, 6 * time.Second, time.Minute},
		{config.Config{}, 20 * time.Second, 50 * time.Second},
		{config.Config{ConnectTimeout: 2 * time.Minute}, 6 * time.Second, 2 * time.Minute},
	} {
		if got := tableLagBound(c.base, c.session); got != c.want {
			t.Errorf("tableLagBound(txn %s, connect %s, session %s) = %s, want %s",
				c.base.TransactionTimeout, c.base.ConnectTimeout, c.session, got, c.want)
		}
	}
}

// A transaction that failed before its commit could only abort, whatever
// it meant to do; only a commit that failed after every record was
// written has an unknown outcome.
func TestTableTxnEnd(t *testing.T) {
	fail := errors.New("broker down")
	for _, c := range []struct {
		commit             bool
		produceErr, endErr error
		want               txnEnd
	}{
		{true, nil, nil, txnCommitted},
		{true, fail, nil, txnAborted},
		{true, fail, fail, txnAborted},
		{true, nil, fail, txnUncertain},
		{false, nil, nil, txnAborted},
		{false, nil, fail, txnAborted},
		{false, fail, fail, txnAborted},
	} {
		if got := endOf(c.commit, c.produceErr, c.endErr); got != c.want {
			t.Errorf("commit %v, produce %v, end %v: %d, want %d", c.commit, c.produceErr, c.endErr, got, c.want)
		}
	}
}

// An uncertain transaction is accepted only when the table shows its
// rows read_committed; one the table does not show is aborted, and so is
// every one when the table could not be read.
func TestSettleUncertain(t *testing.T) {
	g := newGlobalRun(Options{Records: 600, Keys: 50, Partitions: 6, Seed: 5}, "in", "table")
	fresh := func() tableOutcome {
		out := tableOutcome{committed: map[string]map[string]bool{}, aborted: map[string]bool{}}
		out.uncertain = []tableTxn{{"c0": "v7", "c1": "v8"}, {"c2": "v9", "c10": "v10"}}
		out.unknown = 2
		return out
	}
	order := func(c string) string {
		for o, oc := range g.orders {
			if oc == c {
				return o
			}
		}
		t.Fatalf("no order of %s", c)
		return ""
	}
	joins := []*kgo.Record{{Key: []byte(order("c0")), Value: []byte("c0=v7")}, {Key: []byte(order("c2")), Value: []byte("c2=v9")}}

	t1 := fresh()
	t1.settle(map[string]map[string]bool{"c0": {"v0": true, "v7": true}, "c1": {"v8": true}, "c2": {"v0": true}})
	if t1.commits != 1 || t1.aborts != 1 || t1.unsettled != 0 || !t1.committed["c1"]["v8"] || !t1.aborted["v9"] || !t1.aborted["v10"] {
		t.Fatalf("settled %+v: want v7, v8 committed and v9, v10 aborted", t1)
	}
	v := judgeGlobal(g, t1, joins)
	if v.GlobalAbortedRow != 1 || v.GlobalWrongRow != 0 || v.TableUnknown != 2 || v.TableCommits != 1 || v.TableAborts != 1 {
		t.Fatalf("%s %v: want the join of v9 judged an aborted row", v, v.GlobalExamples)
	}

	t2 := fresh()
	t2.settle(nil)
	v = judgeGlobal(g, t2, joins)
	if v.TableUnsettled != 2 || v.GlobalWrongRow != 2 || v.OK() {
		t.Fatalf("%s %v: unread, both joins are of rows never shown committed", v, v.GlobalExamples)
	}
}

// Each transaction's records are its recorded rows, one per customer, a
// new version each, and a commit updates only customers that have a row.
func TestTableWriterDraw(t *testing.T) {
	g := newGlobalRun(Options{Records: 100, Keys: 20, Partitions: 3, Seed: 7}, "in", "table")
	seen := map[string]bool{}
	for i := range 500 {
		commit := i%3 != 0
		rows, recs := g.w.draw(commit)
		if len(rows) != tableRowsPerTxn || len(recs) != tableRowsPerTxn {
			t.Fatalf("draw %d: %d rows, %d records, want %d each", i, len(rows), len(recs), tableRowsPerTxn)
		}
		for _, r := range recs {
			c, v := string(r.Key), string(r.Value)
			if rows[c] != v || seen[v] || (commit && v[0] != 'v') || (!commit && v[0] != 'x') {
				t.Fatalf("draw %d: record %s=%s against rows %v", i, c, v, rows)
			}
			seen[v] = true
			if kindOf(customerNum(c)) == customerStable || (commit && kindOf(customerNum(c)) == customerAbsent) {
				t.Fatalf("draw %d (commit %v) updates %s", i, commit, c)
			}
		}
	}
}
