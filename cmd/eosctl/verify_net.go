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
	if len(r.NetFaults) == 0 {
		return
	}
	t.add("network faults", fmt.Sprintf("%d net cuts, %d pauses, %d coordinator cuts fired", r.NetCuts, r.Pauses, r.CoordinatorCuts))
	for _, f := range r.NetFaults {
		t.add("  "+f.Action, netFaultCell(f))
	}
	for _, rec := range r.Recovery {
		t.add("recovery after "+rec.Action, rec.String())
	}
}

// netFaultCell is one network fault on one line.
func netFaultCell(f chaos.NetFault) string {
	held := (time.Duration(f.HeldMs) * time.Millisecond).Round(100 * time.Millisecond)
	cell := fmt.Sprintf("broker %d at %.1fs for %s, %d records committed meanwhile", f.Node, f.AtSeconds, held, f.ConsumedDuring)
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
