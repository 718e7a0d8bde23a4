package chaos

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// fakeHarness writes a stand-in for netcluster.sh that keeps each
// broker's faults in files under its directory and answers bootstrap,
// status, the cuts, pause, heal and resume as the harness does; with
// inert, the cuts and pause change nothing, like a harness whose rules
// did not take. It returns the command line to run it with.
func fakeHarness(t *testing.T, inert bool) string {
	t.Helper()
	dir := t.TempDir()
	apply := `touch "$D/$2.$1"`
	if inert {
		apply = `:`
	}
	script := `#!/usr/bin/env bash
D=` + dir + `
fault() { ` + apply + `; }
case $1 in
bootstrap) echo 10.9.0.11:9,10.9.0.12:9,10.9.0.13:9 ;;
status)
	for i in 1 2 3; do
		f=""
		[[ -e $D/$i.paused ]] && f+=" paused"
		[[ -e $D/$i.cut-clients ]] && f+=" cut-from-clients"
		[[ -e $D/$i.cut-peers ]] && f+=" cut-from-peers"
		[[ -e $D/$i.isolate ]] && f+=" isolated"
		echo "node $i: running (pid 10$i) 10.9.0.1$i:9 in t-b$i, faults:${f:- none}"
	done ;;
cut-clients | cut-peers | isolate) fault "$1" "$2" ;;
pause) fault paused "$2" ;;
cut-coordinator) fault cut-clients 2; echo 2 ;;
heal) rm -f "$D"/${2:-*}.cut-* "$D"/${2:-*}.isolate ;;
resume) rm -f "$D"/${2:-*}.paused ;;
*) exit 2 ;;
esac
`
	path := filepath.Join(dir, "netcluster.sh")
	if err := os.WriteFile(path, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestOpenNetHarness(t *testing.T) {
	ctx := context.Background()
	cmd := fakeHarness(t, false)
	o := Options{NetClusterCmd: cmd, Brokers: []string{"10.9.0.12:9"}}
	h, err := openNetHarness(ctx, o, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if h.nodes != 3 {
		t.Fatalf("%d nodes, want 3", h.nodes)
	}
	o.Brokers = []string{"127.0.0.1:9092"}
	if _, err := openNetHarness(ctx, o, io.Discard); err == nil || !strings.Contains(err.Error(), "is not the cluster of --net-cmd") {
		t.Fatalf("another cluster's brokers: %v", err)
	}
	o.Brokers = []string{"10.9.0.11:9"}
	if _, err := h.run(ctx, "pause", "3"); err != nil {
		t.Fatal(err)
	}
	if _, err := openNetHarness(ctx, o, io.Discard); err == nil || !strings.Contains(err.Error(), "paused") {
		t.Fatalf("a paused broker before the run: %v", err)
	}
	o.NetClusterCmd = "false"
	if _, err := openNetHarness(ctx, o, io.Discard); err == nil || !strings.Contains(err.Error(), "does not answer bootstrap") {
		t.Fatalf("no harness: %v", err)
	}
}

// holdNet makes the fault, holds it, undoes it and leaves the broker
// whole; a harness whose cut does not show in its status fails the
// fault instead of passing it as fired.
func TestHoldNet(t *testing.T) {
	for _, tc := range []struct {
		action string
		inert  bool
		fired  bool
		node   int
	}{
		{"cut-clients", false, true, 3},
		{"cut-peers", false, true, 1},
		{"isolate", false, true, 2},
		{"pause", false, true, 2},
		{"cut-coordinator txn", false, true, 0},
		{"cut-peers", true, false, 1},
		{"pause", true, false, 3},
	} {
		t.Run(tc.action, func(t *testing.T) {
			h := &NetHarness{cmd: fakeHarness(t, tc.inert), log: io.Discard, nodes: 3}
			var events []string
			r := &run{o: Options{Records: 100, Events: func(s string) { events = append(events, s) }}, net: h, start: time.Now()}
			nf := NetFault{Action: tc.action, Node: tc.node, RecoveryMs: -1}
			if tc.node == 0 {
				nf.Key = "app:worker-1"
			}
			out := r.holdNet(context.Background(), nf, 50*time.Millisecond)
			if out.f.Fired != tc.fired {
				t.Fatalf("fired %v, want %v; error %q, events %q", out.f.Fired, tc.fired, out.f.Error, events)
			}
			if tc.fired && !strings.Contains(out.f.Status, netToken(tc.action)) {
				t.Errorf("the status kept as evidence is %q, without %s", out.f.Status, netToken(tc.action))
			}
			if !tc.fired && !strings.Contains(out.f.Error, "did not take") {
				t.Errorf("error %q does not say the fault did not take", out.f.Error)
			}
			if tc.node == 0 && out.f.Node != 2 {
				t.Errorf("the coordinator cut names broker %d, the harness printed 2", out.f.Node)
			}
			if tc.fired && out.f.HeldMs < 50 {
				t.Errorf("held %dms, want at least the 50ms hold", out.f.HeldMs)
			}
			for node := 1; node <= 3; node++ {
				if line, faults, err := h.status(context.Background(), node); err != nil || faults != "none" {
					t.Errorf("after the fault: %q, %v", line, err)
				}
			}
		})
	}
}

// The recovery after a fault is the time from its undoing to the next
// committed progress; a run that consumed the input before the heal has
// none to measure.
func TestNoteRecovery(t *testing.T) {
	r := &run{o: Options{Records: 1000, Events: func(string) {}}, start: time.Now()}
	healed := time.Now()
	r.nw.recovering = -1
	r.netBack(netOutcome{f: NetFault{Kind: "pause", Action: "pause", Fired: true, RecoveryMs: -1}, healed: healed, consumed: 400})
	r.noteRecovery(healed.Add(time.Second), 400)
	if r.nw.recovering != 0 || r.res.NetFaults[0].RecoveryMs != -1 {
		t.Fatalf("no progress yet, but recovery %d", r.res.NetFaults[0].RecoveryMs)
	}
	r.noteRecovery(healed.Add(2500*time.Millisecond), 401)
	if r.nw.recovering != -1 || r.res.NetFaults[0].RecoveryMs != 2500 {
		t.Fatalf("recovery %dms, want 2500", r.res.NetFaults[0].RecoveryMs)
	}
	r.netBack(netOutcome{f: NetFault{Kind: "net-cut", Action: "isolate", Fired: true, RecoveryMs: -1}, healed: healed, consumed: 1000})
	r.noteRecovery(healed.Add(time.Second), 1000)
	if r.nw.recovering != -1 || r.res.NetFaults[1].RecoveryMs != -1 {
		t.Fatalf("input consumed before the heal: recovery %d, still waiting %v", r.res.NetFaults[1].RecoveryMs, r.nw.recovering >= 0)
	}
	if r.res.Pauses != 1 || r.res.NetCuts != 1 {
		t.Errorf("pauses %d, net cuts %d; want 1 each", r.res.Pauses, r.res.NetCuts)
	}
}

func TestRecoveries(t *testing.T) {
	got := Recoveries([]NetFault{
		{Action: "pause", Fired: true, RecoveryMs: 4000},
		{Action: "isolate", Fired: true, RecoveryMs: 100},
		{Action: "pause", Fired: true, RecoveryMs: 9000},
		{Action: "isolate", Fired: true, RecoveryMs: -1},
		{Action: "cut-peers", RecoveryMs: -1},
	})
	want := []Recovery{
		{Action: "pause", Fired: 2, Measured: 2, MedianMs: 6500, MaxMs: 9000},
		{Action: "isolate", Fired: 2, Measured: 1, MedianMs: 100, MaxMs: 100},
		{Action: "cut-peers"},
	}
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("%d: got %+v, want %+v", i, got[i], want[i])
		}
	}
}
