package chaos

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kgo"
)

// The checks of PipelineGlobalJoin, named as in Result.Failed.
const (
	// ProblemGlobalMissing: an order never came out.
	ProblemGlobalMissing Problem = "global_missing"
	// ProblemGlobalDuplicates: an order came out again, with whatever row.
	ProblemGlobalDuplicates Problem = "global_duplicates"
	// ProblemGlobalWrongRow: an order came out joined with a row its
	// customer never committed: not its seeded row nor a committed
	// update, or a row for a customer that has none.
	ProblemGlobalWrongRow Problem = "global_wrong_row"
	// ProblemGlobalAbortedRow: an order joined the value of an aborted
	// update of the table.
	ProblemGlobalAbortedRow Problem = "global_aborted_row"
	// ProblemGlobalUnexpected: an output record is no order of the seed.
	ProblemGlobalUnexpected Problem = "global_unexpected"
	// ProblemGlobalNoUpdates: the run committed or aborted no update,
	// no aborted update reached the table's log, no order joined an
	// updated row, or the seed lacks orders of a kind of customer: it
	// cannot show what it is for.
	ProblemGlobalNoUpdates Problem = "global_no_updates"
	// ProblemGlobalStale: the workers' tables were not seen current.
	// After the last fault, once the table stopped changing, no wave of
	// late orders came out with every order joined to its customer's
	// last committed row, though the last wave was produced past the
	// lag bound (or no wave could be produced).
	ProblemGlobalStale Problem = "global_stale"
	// ProblemGlobalUnsettled: an update transaction whose commit failed
	// could not be settled by reading the table, so its rows are not
	// known to be committed or aborted.
	ProblemGlobalUnsettled Problem = "global_unsettled"
)

// GlobalVerdict is the order-by-order judgement of PipelineGlobalJoin:
// each order exactly once, joined with a row its customer committed.
type GlobalVerdict struct {
	// GlobalOrders is how many orders the seed holds; of them
	// GlobalStableOrders are of customers whose row never changes,
	// GlobalChangingOrders of customers updated while the workers ran and
	// GlobalNoneOrders of customers without a row.
	GlobalOrders         int `json:"global_orders"`
	GlobalStableOrders   int `json:"global_stable_orders"`
	GlobalChangingOrders int `json:"global_changing_orders"`
	GlobalNoneOrders     int `json:"global_none_orders"`
	// GlobalSeen is how many distinct orders came out.
	GlobalSeen int `json:"global_seen"`
	// GlobalUpdatedJoins is how many output records joined a row updated
	// while the workers ran.
	GlobalUpdatedJoins int `json:"global_updated_joins"`
	// GlobalMissing is how many orders never came out.
	GlobalMissing int `json:"global_missing"`
	// GlobalDuplicates is how many output records repeat an order.
	GlobalDuplicates int `json:"global_duplicates"`
	// GlobalWrongRow is how many joined a row their customer never
	// committed; GlobalAbortedRow how many an aborted update's value.
	GlobalWrongRow   int `json:"global_wrong_row"`
	GlobalAbortedRow int `json:"global_aborted_row"`
	// GlobalUnexpected is how many output records are no order of the seed.
	GlobalUnexpected int `json:"global_unexpected"`
	// TableCommits and TableAborts count the update transactions on the
	// table's topic while the workers ran, committed and aborted.
	// TableUnknown counts those whose commit failed with an unknown
	// outcome: each is settled, committed or aborted, by whether its rows
	// show in the table read read_committed after the run, and counted so;
	// TableUnsettled counts those that read could not settle, whose rows
	// no order may join.
	TableCommits   int `json:"table_commits"`
	TableAborts    int `json:"table_aborts"`
	TableUnknown   int `json:"table_unknown"`
	TableUnsettled int `json:"table_unsettled"`
	// TableAbortedPresent is how many records of aborted update
	// transactions the table's topic holds, read read_uncommitted after
	// the run: the aborted values the workers' read_committed readers had
	// to skip. None, and no run could show global_aborted_row.
	TableAbortedPresent int `json:"table_aborted_present"`
	// GlobalProbes is how many late orders the probe phase produced, in
	// GlobalProbeWaves waves (each one order per customer whose row
	// changed, in every input partition); they are judged as orders too.
	// GlobalProbeLag is how long after the table's last update became
	// readable the last wave was produced, in seconds, and TableLagBound
	// the lag bound past which a wave must come out current.
	GlobalProbes     int     `json:"global_probes"`
	GlobalProbeWaves int     `json:"global_probe_waves"`
	GlobalProbeLag   float64 `json:"global_probe_lag_s"`
	TableLagBound    float64 `json:"table_lag_bound_s"`
	// GlobalLastWave is how many probes the last wave holds, and
	// GlobalLastWaveOut how many of them came out.
	GlobalLastWave    int `json:"global_last_wave"`
	GlobalLastWaveOut int `json:"global_last_wave_out"`
	// GlobalCurrent reports whether the last wave came out current: every
	// probe joined with its customer's last committed row. GlobalStale
	// is how many of its probes joined an older row, GlobalStaleEarly
	// how many of the earlier waves' did (allowed within the bound).
	GlobalCurrent    bool `json:"global_current"`
	GlobalStale      int  `json:"global_stale"`
	GlobalStaleEarly int  `json:"global_stale_early"`
	// GlobalProbeNote says why no wave was produced.
	GlobalProbeNote string `json:"global_probe_note,omitempty"`
	// GlobalExamples names the first few differences, for the logs.
	GlobalExamples []string `json:"global_examples,omitempty"`
}

// OK reports whether every order came out once, with a committed row.
func (v GlobalVerdict) OK() bool {
	return v.GlobalMissing == 0 && v.GlobalDuplicates == 0 && v.GlobalWrongRow == 0 && v.GlobalAbortedRow == 0 && v.GlobalUnexpected == 0 &&
		v.TableUnsettled == 0 && v.GlobalCurrent
}

// String is the global verdict on one line, for logs.
func (v GlobalVerdict) String() string {
	return fmt.Sprintf("orders=%d (stable %d, changing %d, none %d) probes=%d (waves %d, last at %.1fs, bound %.0fs, current %v, stale %d, stale early %d) seen=%d updated_joins=%d missing=%d duplicates=%d wrong_row=%d aborted_row=%d unexpected=%d table_commits=%d table_aborts=%d table_unknown=%d table_unsettled=%d table_aborted_present=%d",
		v.GlobalOrders, v.GlobalStableOrders, v.GlobalChangingOrders, v.GlobalNoneOrders,
		v.GlobalProbes, v.GlobalProbeWaves, v.GlobalProbeLag, v.TableLagBound, v.GlobalCurrent, v.GlobalStale, v.GlobalStaleEarly, v.GlobalSeen, v.GlobalUpdatedJoins,
		v.GlobalMissing, v.GlobalDuplicates, v.GlobalWrongRow, v.GlobalAbortedRow, v.GlobalUnexpected, v.TableCommits, v.TableAborts, v.TableUnknown, v.TableUnsettled, v.TableAbortedPresent)
}

// allowed reports whether customer c's order may join row: its seeded
// row, a committed update (one whose commit failed counts once a read of
// the table settled it committed), or none for a customer that has no
// row.
func (g *globalRun) allowed(t tableOutcome, c, row string) bool {
	switch g.kind[c] {
	case customerStable:
		return row == globalInitial
	case customerChanging:
		return row == globalInitial || t.committed[c][row]
	}
	return row == globalNone
}

// judgeGlobal compares the output of PipelineGlobalJoin with g's seed and
// the table's updates t, settled.
func judgeGlobal(g *globalRun, t tableOutcome, out []*kgo.Record) GlobalVerdict {
	v := GlobalVerdict{GlobalOrders: len(g.orders), GlobalStableOrders: g.counts[customerStable],
		GlobalChangingOrders: g.counts[customerChanging], GlobalNoneOrders: g.counts[customerAbsent],
		TableCommits: t.commits, TableAborts: t.aborts, TableUnknown: t.unknown, TableUnsettled: t.unsettled}
	seen, first := map[string]int{}, map[string]string{}
	for _, r := range out {
		order := string(r.Key)
		c, row, ok := strings.Cut(string(r.Value), "=")
		if want, known := g.customerOf(order); !ok || !known || want != c {
			v.GlobalUnexpected++
			addExample(&v.GlobalExamples, "%s=%s is no order of the seed nor a probe", order, r.Value)
			continue
		}
		seen[order]++
		if seen[order] == 1 {
			first[order] = row
		}
		_, probe := g.probes[order]
		switch {
		case seen[order] > 1:
			v.GlobalDuplicates++
			addExample(&v.GlobalExamples, "order %s came out %d times (now %s=%s)", order, seen[order], c, row)
		case t.aborted[row]:
			v.GlobalAbortedRow++
			addExample(&v.GlobalExamples, "order %s joined %s=%s, an aborted update", order, c, row)
		case !g.allowed(t, c, row):
			v.GlobalWrongRow++
			addExample(&v.GlobalExamples, "order %s joined %s=%s, a row %s never committed", order, c, row, c)
		case row != globalInitial && row != globalNone && !probe:
			v.GlobalUpdatedJoins++
		}
	}
	v.GlobalSeen = len(seen)
	v.GlobalMissing = addUnseen(&v.GlobalExamples, g.orders, seen, "order %s never came out") +
		addUnseen(&v.GlobalExamples, g.probes, seen, "probe order %s never came out")
	g.judgeProbes(&v, first)
	return v
}

// judgeProbes judges the probe waves by first, the row each order's
// first output record joined: the last wave must have come out whole,
// every probe joined with its customer's last committed row.
func (g *globalRun) judgeProbes(v *GlobalVerdict, first map[string]string) {
	v.GlobalProbes, v.GlobalProbeWaves, v.TableLagBound = len(g.probes), len(g.waves), g.lagBound.Seconds()
	if len(g.waves) == 0 {
		v.GlobalProbeNote = g.probeNote
		return
	}
	for i, w := range g.waves {
		last := i == len(g.waves)-1
		stale, out := g.staleProbes(w, first, last, &v.GlobalExamples)
		if !last {
			v.GlobalStaleEarly += stale
			continue
		}
		v.GlobalStale, v.GlobalProbeLag, v.GlobalLastWave, v.GlobalLastWaveOut = stale, w.lag.Seconds(), len(w.orders), out
		v.GlobalCurrent = stale == 0 && out == len(w.orders)
	}
}

// staleProbes counts the orders of wave w that came out (a row in
// first), and of them those that joined another row than their
// customer's last; when name is set, examples names the first of those.
func (g *globalRun) staleProbes(w probeWave, first map[string]string, name bool, examples *[]string) (stale, out int) {
	for _, o := range slices.Sorted(maps.Keys(w.orders)) {
		row, ok := first[o]
		if !ok {
			continue
		}
		out++
		c := w.orders[o]
		if last := g.read.last[c]; row != last {
			stale++
			if name {
				addExample(examples, "probe order %s, produced %.1fs after the table's last update became readable, joined %s=%s, not its last row %s",
					o, w.lag.Seconds(), c, row, last)
			}
		}
	}
	return stale, out
}

// globalProblems names the global-join checks r fails, through add.
func globalProblems(r Result, add func(cond bool, name Problem, format string, a ...any)) {
	v := r.GlobalVerdict
	if v == nil {
		return
	}
	add(v.TableCommits == 0 || v.TableAborts == 0 || v.TableAbortedPresent == 0 || v.GlobalUpdatedJoins == 0 ||
		v.GlobalStableOrders == 0 || v.GlobalChangingOrders == 0 || v.GlobalNoneOrders == 0, ProblemGlobalNoUpdates,
		"%d update transactions committed and %d aborted while the workers ran (%d aborted records in the table's log), %d orders joined an updated row, and the seed has %d orders of unchanging customers, %d of updated ones and %d of customers without a row: the run cannot show every case under faults; raise --records or --keys, or lower --rate",
		v.TableCommits, v.TableAborts, v.TableAbortedPresent, v.GlobalUpdatedJoins, v.GlobalStableOrders, v.GlobalChangingOrders, v.GlobalNoneOrders)
	add(v.GlobalMissing > 0, ProblemGlobalMissing, "%d of %d orders never came out", v.GlobalMissing, v.GlobalOrders)
	add(v.GlobalDuplicates > 0, ProblemGlobalDuplicates, "%d output records repeat an order", v.GlobalDuplicates)
	add(v.GlobalWrongRow > 0, ProblemGlobalWrongRow, "%d orders joined a row their customer never committed", v.GlobalWrongRow)
	add(v.GlobalAbortedRow > 0, ProblemGlobalAbortedRow, "%d orders joined the value of an aborted update", v.GlobalAbortedRow)
	add(v.GlobalUnexpected > 0, ProblemGlobalUnexpected, "%d output records are no order of the seed", v.GlobalUnexpected)
	switch {
	case v.GlobalProbeWaves == 0:
		add(true, ProblemGlobalStale, "no late order probed the workers' global tables after the last update (%s): the run cannot show them kept current", v.GlobalProbeNote)
	case !v.GlobalCurrent:
		add(true, ProblemGlobalStale, "the workers' global tables were not kept current: of %d late orders produced %.1fs after the table's last update became readable (bound %.0fs), %d joined an older row than their customer's last and %d never came out",
			v.GlobalLastWave, v.GlobalProbeLag, v.TableLagBound, v.GlobalStale, v.GlobalLastWave-v.GlobalLastWaveOut)
	}
	add(v.TableUnsettled > 0, ProblemGlobalUnsettled, "%d update transactions failed at the commit and reading the table did not settle them", v.TableUnsettled)
}
