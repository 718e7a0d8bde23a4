package main

import (
	"fmt"
	"time"

	"github.com/eosflow/eosflow/tools/chaos"
)

// addNetRows adds the network faults of a verify result: the count of
// each kind, each fault with the status line that showed it and the
// group's recovery after it, and the recoveries by action.
func addNetRows(t *table, r chaos.Result) {
	addNetFaultRows(t, r.NetCuts, r.Pauses, r.CoordinatorCuts, r.NetFaults, r.Recovery, "records committed")
}

// addNetFaultRows adds the rows of network faults, whose progress is
// counted in unit (input records committed, or rows written).
func addNetFaultRows(t *table, cuts, pauses, coordinatorCuts int, fs []chaos.NetFault, recovery []chaos.Recovery, unit string) {
	if len(fs) == 0 {
		return
	}
	t.add("network faults", fmt.Sprintf("%d net cuts, %d pauses, %d coordinator cuts fired", cuts, pauses, coordinatorCuts))
	for _, f := range fs {
		t.add("  "+f.Action, netFaultCell(f, unit))
	}
	for _, rec := range recovery {
		t.add("recovery after "+rec.Action, rec.String())
	}
}

// netFaultCell is one network fault on one line.
func netFaultCell(f chaos.NetFault, unit string) string {
	held := (time.Duration(f.HeldMs) * time.Millisecond).Round(100 * time.Millisecond)
	cell := fmt.Sprintf("broker %d at %.1fs for %s, %d %s meanwhile", f.Node, f.AtSeconds, held, f.ConsumedDuring, unit)
	if f.Key != "" {
		cell += ", coordinator of " + f.Key
	}
	switch {
	case !f.Fired:
		cell += "; did not fire: " + f.Error
	case f.RecoveryMs >= 0:
		cell += fmt.Sprintf("; progress %s after it was undone", time.Duration(f.RecoveryMs)*time.Millisecond)
	default:
		cell += "; no progress left to measure"
	}
	return cell
}
