package main

import (
	"fmt"

	"github.com/eosflow/eosflow/tools/chaos"
)

// eventClaim is what a passing run of an event-time pipeline (windowed,
// join, outer-join, global-join) proved, or "" for the other pipelines.
func eventClaim(r chaos.Result) string {
	switch {
	case r.GlobalVerdict != nil:
		return fmt.Sprintf("every order exactly once, joined with a row its customer committed, never an aborted update's (%d orders, %d joined a row updated while the workers ran; %d update transactions committed, %d aborted), through %d faults; then %d late orders joined their customers' last rows",
			r.GlobalOrders, r.GlobalUpdatedJoins, r.TableCommits, r.TableAborts, r.FaultsPlanned, r.GlobalLastWave)
	case r.WindowVerdict != nil:
		return fmt.Sprintf("every window's final count exactly once, as computed from the seed (%d windows; %d late records counted nowhere), through %d faults",
			r.WindowVerdict.WindowsExpected, r.WindowVerdict.LateRecords, r.FaultsPlanned)
	case r.LonelyVerdict != nil && r.JoinVerdict != nil:
		return fmt.Sprintf("every joined pair and every record that joined nothing exactly once, and nothing else, as computed from the seed (%d pairs, %d lonely orders, %d lonely payments, %d of them expired while the workers ran), through %d faults",
			r.JoinVerdict.PairsExpected, r.LonelyOrders, r.LonelyPayments, r.LonelyEarly, r.FaultsPlanned)
	case r.JoinVerdict != nil:
		return fmt.Sprintf("every joined pair exactly once and nothing else, as computed from the seed (%d pairs), through %d faults",
			r.JoinVerdict.PairsExpected, r.FaultsPlanned)
	}
	return ""
}

// verifyTopics names a run's input topics and its output.
func verifyTopics(r chaos.Result) string {
	if r.Payments != "" {
		return r.Input + " + " + r.Payments + " → " + r.Output
	}
	if r.Table != "" {
		return r.Input + " ⋈ global " + r.Table + " → " + r.Output
	}
	return r.Input + " → " + r.Output
}

// addEventRows adds the window-by-window or pair-by-pair verdict of an
// event-time pipeline to t.
func addEventRows(t *table, r chaos.Result) {
	if v := r.WindowVerdict; v != nil {
		t.add("windows expected", fmt.Sprintf("%d (computed from the seed)", v.WindowsExpected))
		t.add("late records", fmt.Sprintf("%d (in the seed; they must count in no window)", v.LateRecords))
		t.add("window missing", fmt.Sprintf("%d (never emitted: lost final results)", v.WindowMissing))
		t.add("window duplicates", fmt.Sprintf("%d (final results emitted again)", v.WindowDuplicates))
		t.add("window wrong count", fmt.Sprintf("%d (emitted with another count)", v.WindowWrongCount))
		t.add("window unexpected", fmt.Sprintf("%d (windows the seed does not close)", v.WindowUnexpected))
		t.add("window unreadable", v.WindowUnreadable)
		for _, e := range v.WindowExamples {
			t.add("  e.g.", e)
		}
	}
	if v := r.JoinVerdict; v != nil {
		t.add("pairs expected", fmt.Sprintf("%d (computed from the seed)", v.PairsExpected))
		t.add("pair missing", fmt.Sprintf("%d (never joined)", v.PairMissing))
		t.add("pair duplicates", fmt.Sprintf("%d (joined again)", v.PairDuplicates))
		t.add("pair unexpected", fmt.Sprintf("%d (no pair of the seed)", v.PairUnexpected))
		for _, e := range v.PairExamples {
			t.add("  e.g.", e)
		}
	}
	if v := r.LonelyVerdict; v != nil {
		t.add("lonely expected", fmt.Sprintf("%d orders, %d payments (computed from the seed; %d expire before the closing records)",
			v.LonelyOrders, v.LonelyPayments, v.LonelyEarly))
		t.add("lonely seen", v.LonelySeen)
		t.add("lonely missing", fmt.Sprintf("%d (never came out alone: lost expiries)", v.LonelyMissing))
		t.add("lonely duplicates", fmt.Sprintf("%d (came out alone again)", v.LonelyDuplicates))
		t.add("lonely joined", fmt.Sprintf("%d (came out alone, but joined)", v.LonelyJoined))
		t.add("lonely unexpected", fmt.Sprintf("%d (no record of the seed)", v.LonelyUnexpected))
		for _, e := range v.LonelyExamples {
			t.add("  e.g.", e)
		}
	}
	if v := r.GlobalVerdict; v != nil {
		addGlobalRows(t, *v)
	}
}

// addGlobalRows adds the order-by-order verdict of the global join to t.
func addGlobalRows(t *table, v chaos.GlobalVerdict) {
	t.add("orders expected", fmt.Sprintf("%d (%d of unchanging customers, %d of updated ones, %d of customers without a row)",
		v.GlobalOrders, v.GlobalStableOrders, v.GlobalChangingOrders, v.GlobalNoneOrders))
	t.add("table updates", fmt.Sprintf("%d transactions committed, %d aborted; of them %d failed at the commit, settled by reading the table, %d unsettled",
		v.TableCommits, v.TableAborts, v.TableUnknown, v.TableUnsettled))
	t.add("aborted in log", fmt.Sprintf("%d (aborted updates' records in the table's topic, read read_uncommitted)", v.TableAbortedPresent))
	t.add("orders seen", fmt.Sprintf("%d (%d joined an updated row)", v.GlobalSeen, v.GlobalUpdatedJoins))
	t.add("order missing", fmt.Sprintf("%d (never came out)", v.GlobalMissing))
	t.add("order duplicates", fmt.Sprintf("%d (came out again)", v.GlobalDuplicates))
	t.add("wrong row", fmt.Sprintf("%d (a row the customer never committed)", v.GlobalWrongRow))
	t.add("aborted row", fmt.Sprintf("%d (an aborted update's value)", v.GlobalAbortedRow))
	t.add("unexpected", fmt.Sprintf("%d (no order of the seed nor a probe)", v.GlobalUnexpected))
	t.add("table probes", globalProbeRow(v))
	for _, e := range v.GlobalExamples {
		t.add("  e.g.", e)
	}
}

// globalProbeRow says what the global join's probe phase found.
func globalProbeRow(v chaos.GlobalVerdict) string {
	if v.GlobalProbeWaves == 0 {
		return "none produced: " + v.GlobalProbeNote
	}
	return fmt.Sprintf("%d late orders in %d waves; the last, produced %.1fs after the table's last update became readable (bound %.0fs): %d of %d came out, %d joined an older row than their customer's last (earlier waves: %d)",
		v.GlobalProbes, v.GlobalProbeWaves, v.GlobalProbeLag, v.TableLagBound, v.GlobalLastWaveOut, v.GlobalLastWave, v.GlobalStale, v.GlobalStaleEarly)
}
