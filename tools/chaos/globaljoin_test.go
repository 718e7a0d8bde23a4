package chaos

import (
	"errors"
	"slices"
	"testing"

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
	v := judgeGlobal(g, t0, out)
	if !v.OK() || v.GlobalSeen != 600 || v.GlobalNoneOrders == 0 {
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
	v = judgeGlobal(g, t0, bad)
	if v.GlobalWrongRow != 1 || v.GlobalAbortedRow != 1 || v.GlobalMissing != 1 || v.GlobalDuplicates != 1 || v.GlobalUnexpected != 1 {
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
