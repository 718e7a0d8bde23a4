package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/eosflow/eosflow/tools/chaos"
)

// The result table names every network fault with its broker and its
// recovery, says which did not fire, and sums the recoveries up by
// action; a run without network faults shows none of it.
func TestVerifyTableNetFaults(t *testing.T) {
	render := func(r chaos.Result) string {
		var b bytes.Buffer
		if err := verifyTable(r).write(&b); err != nil {
			t.Fatal(err)
		}
		return b.String()
	}
	if out := render(chaos.Result{}); strings.Contains(out, "network faults") || strings.Contains(out, "recovery after") {
		t.Fatalf("a run without network faults shows them:\n%s", out)
	}
	r := chaos.Result{NetCuts: 1, Pauses: 1, NetFaults: []chaos.NetFault{
		{Kind: "net-cut", Action: "cut-peers", Node: 2, Fired: true, AtSeconds: 12.3, HeldMs: 12_040, ConsumedDuring: 400, RecoveryMs: 350},
		{Kind: "pause", Action: "pause", Node: 3, Fired: true, AtSeconds: 40, HeldMs: 15_000, RecoveryMs: 7_250},
		{Kind: "coordinator-cut", Action: "cut-coordinator group", Key: "eosverify-1", Error: "cut-coordinator did not take"},
	}}
	r.Recovery = []chaos.Recovery{{Action: "cut-peers", Fired: 1, Measured: 1, MedianMs: 350, MaxMs: 350}, {Action: "pause", Fired: 1, Measured: 1, MedianMs: 7250, MaxMs: 7250}}
	out := render(r)
	for _, want := range []string{
		"1 net cuts, 1 pauses, 0 coordinator cuts fired",
		"cut-peers", "broker 2 at 12.3s for 12s, 400 records committed meanwhile; progress 350ms after it was undone",
		"broker 3 at 40.0s for 15s, 0 records committed meanwhile; progress 7.25s after it was undone",
		"coordinator of eosverify-1; did not fire: cut-coordinator did not take",
		"recovery after pause", "1 fired; recovery median 7.25s, max 7.25s",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the table lacks %q:\n%s", want, out)
		}
	}
}
