package chaos

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestClassify(t *testing.T) {
	injected := WorkerReport{Stopped: StopInjected, Error: ErrInjected.Error()}
	cancelled := WorkerReport{Stopped: StopCancelled}
	failed := WorkerReport{Stopped: StopError, Error: "eos: fenced: PRODUCER_FENCED"}
	for _, tc := range []struct {
		name string
		x    exitFacts
		want exitClass
		why  string // a part of the reason, for failures
	}{
		{"our SIGKILL", exitFacts{intent: intentKill, code: -1, signal: syscall.SIGKILL}, exitKilled, ""},
		{"clean stop after our SIGTERM", exitFacts{intent: intentTerm, report: cancelled, hasRep: true}, exitStopped, ""},
		{"clean stop after removal", exitFacts{intent: intentRemove, report: cancelled, hasRep: true}, exitStopped, ""},
		{"clean stop at the end", exitFacts{intent: intentStop, report: cancelled, hasRep: true}, exitStopped, ""},
		{"SIGTERMed before its handler", exitFacts{intent: intentRemove, code: -1, signal: syscall.SIGTERM}, exitStopped, ""},
		{"injected", exitFacts{code: ExitInjected, report: injected, hasRep: true}, exitInjected, ""},
		{"injected as we SIGTERMed it", exitFacts{intent: intentTerm, code: ExitInjected, report: injected, hasRep: true}, exitInjected, ""},
		{"unreachable at start during a broker outage", exitFacts{code: 1, report: WorkerReport{Stopped: StopUnreachable, Error: "eos: brokers unreachable"}, hasRep: true, outage: true}, exitOutage, ""},
		{"unreachable with the broker up", exitFacts{code: 1, report: WorkerReport{Stopped: StopUnreachable, Error: "eos: brokers unreachable"}, hasRep: true}, exitFailed, "exit status 1: eos: brokers unreachable"},
		{"refused settings", exitFacts{code: exitUsage, report: WorkerReport{Stopped: StopError, Error: "config: invalid"}, hasRep: true}, exitRefused, ""},
		{"refused flags", exitFacts{code: exitUsage, log: "Error: unknown flag: --nope"}, exitRefused, ""},

		{"real error", exitFacts{code: 1, report: failed, hasRep: true}, exitFailed, "PRODUCER_FENCED"},
		{"real error as we SIGKILLed it", exitFacts{intent: intentKill, code: 1, report: failed, hasRep: true}, exitFailed, "PRODUCER_FENCED"},
		{"real error after our SIGTERM", exitFacts{intent: intentTerm, code: 1, report: failed, hasRep: true}, exitFailed, "after the verifier's SIGTERM"},
		{"exit 3 without saying injected", exitFacts{code: ExitInjected, report: failed, hasRep: true}, exitFailed, "PRODUCER_FENCED"},
		{"says injected, exits 1", exitFacts{code: 1, report: injected, hasRep: true}, exitFailed, "exit status 1"},
		{"clean stop nobody asked for", exitFacts{report: cancelled, hasRep: true}, exitFailed, "did not stop it"},
		{"a SIGKILL we did not send", exitFacts{code: -1, signal: syscall.SIGKILL}, exitFailed, "did not send"},
		{"a SIGTERM we did not send", exitFacts{code: -1, signal: syscall.SIGTERM}, exitFailed, "did not send"},
		{"ignored our SIGTERM", exitFacts{intent: intentStop, code: -1, signal: syscall.SIGKILL, forced: true}, exitFailed, "grace period"},
		{"panic", exitFacts{code: exitUsage, panic: "panic: boom", log: "goroutine 1"}, exitFailed, "panic: boom"},
		{"no report", exitFacts{code: 1, log: "dial tcp: refused"}, exitFailed, "dial tcp: refused"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, why := classify(tc.x)
			if got != tc.want {
				t.Fatalf("class %d (%q), want %d", got, why, tc.want)
			}
			if (got == exitFailed) != (why != "") || !strings.Contains(why, tc.why) {
				t.Fatalf("reason %q, want one mentioning %q for failures only", why, tc.why)
			}
		})
	}
}

// shellFleet runs each worker as sh -c script[id], so tests can make
// processes that exit any way a worker can.
func shellFleet(t *testing.T, scripts map[string]string) *fleet {
	t.Helper()
	return &fleet{
		exe: "/bin/sh", logDir: t.TempDir(), began: time.Now(),
		procs: map[string]*proc{}, pending: map[string]time.Time{},
		argsFor: func(id string) []string { return []string{"-c", scripts[id]} },
	}
}

func reportLine(t *testing.T, r WorkerReport) string {
	t.Helper()
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	return "echo '" + string(b) + "'"
}

func waitExited(t *testing.T, f *fleet, ids ...string) {
	t.Helper()
	for _, id := range ids {
		select {
		case <-f.procs[id].done:
		case <-time.After(10 * time.Second):
			t.Fatalf("%s did not exit", id)
		}
	}
}

func TestReapExitedJudgesEachExit(t *testing.T) {
	clean := filepath.Join(t.TempDir(), "clean.json")
	if err := os.WriteFile(clean, []byte(`{"stopped":"cancelled"}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// Each trapping worker says when its trap is set, so that no signal
	// comes before it, however late the shell starts on a loaded machine.
	ready := t.TempDir()
	set := func(id string) string { return "; : > " + filepath.Join(ready, id) + "; " }
	term := "trap 'cat " + clean + "; exit 0' TERM" + set("termed") + "while :; do sleep 0.05; done"
	f := shellFleet(t, map[string]string{
		"injected":   reportLine(t, WorkerReport{Stopped: StopInjected, Aborted: 2, Error: ErrInjected.Error()}) + "; exit 3",
		"failed":     reportLine(t, WorkerReport{Stopped: StopError, Aborted: 1, Error: "eos: fenced: PRODUCER_FENCED"}) + "; exit 1",
		"unasked":    reportLine(t, WorkerReport{Stopped: StopCancelled}) + "; exit 0",
		"selfkill":   "kill -9 $$",
		"killed":     "while :; do sleep 0.05; done",
		"termed":     term,
		"removed":    strings.Replace(term, filepath.Join(ready, "termed"), filepath.Join(ready, "removed"), 1),
		"ignoreterm": "trap '' TERM; while :; do sleep 0.05; done",
	})
	for _, id := range []string{"injected", "failed", "unasked", "selfkill", "killed", "termed", "removed", "ignoreterm"} {
		if err := f.start(id); err != nil {
			t.Fatal(err)
		}
	}
	for _, id := range []string{"termed", "removed"} {
		waitFile(t, filepath.Join(ready, id))
	}
	f.signal("killed", syscall.SIGKILL, intentKill)
	f.signal("termed", syscall.SIGTERM, intentTerm)
	f.signal("removed", syscall.SIGTERM, intentRemove)
	waitExited(t, f, "injected", "failed", "unasked", "selfkill", "killed", "termed", "removed")

	var res Result
	var events []string
	event := func(format string, a ...any) { events = append(events, format) }
	if aborted := f.reapExited(&res, event, true); aborted != 3 {
		t.Errorf("aborted %d, want the 3 that the reports name", aborted)
	}
	if res.InjectedAborts != 1 {
		t.Errorf("injected aborts %d, want 1", res.InjectedAborts)
	}
	failed := map[string]WorkerFailure{}
	for _, wf := range res.WorkerFailures {
		failed[wf.Worker] = wf
	}
	if len(failed) != 3 || res.WorkerCrashes != 3 {
		t.Fatalf("failures %+v, want failed, unasked and selfkill", res.WorkerFailures)
	}
	if wf := failed["failed"]; wf.Exit != 1 || wf.Stopped != StopError || !strings.Contains(wf.Error, "PRODUCER_FENCED") || wf.Pid == 0 {
		t.Errorf("failure %+v does not carry the worker's error", wf)
	}
	if wf := failed["selfkill"]; wf.Exit != -1 || wf.Signal != "killed" {
		t.Errorf("failure %+v does not name the signal", wf)
	}
	if _, ok := failed["unasked"]; !ok {
		t.Errorf("a clean exit nobody asked for is not a failure: %+v", res.WorkerFailures)
	}
	for _, id := range []string{"injected", "failed", "unasked", "selfkill", "killed", "termed"} {
		if _, ok := f.pending[id]; !ok {
			t.Errorf("%s is not scheduled to restart", id)
		}
	}
	if _, ok := f.procs["removed"]; ok {
		t.Error("a removed worker is still in the fleet")
	}

	// At the end, one worker ignores SIGTERM: it is SIGKILLed and fails.
	f.stopAll(300 * time.Millisecond)
	before := len(res.WorkerFailures)
	f.reapExited(&res, event, false)
	if len(res.WorkerFailures) != before+1 || res.WorkerFailures[before].Worker != "ignoreterm" ||
		!strings.Contains(res.WorkerFailures[before].Error, "grace period") {
		t.Fatalf("failures %+v, want ignoreterm's forced kill last", res.WorkerFailures)
	}
	names, words := problems(res, 0)
	if len(names) != 1 || names[0] != ProblemWorkerStopped || !strings.Contains(words[0], "PRODUCER_FENCED") {
		t.Fatalf("problems %v %q, want worker_stopped naming the error", names, words)
	}
}

func TestStopAllKeepsTheIntentOfExitedWorkers(t *testing.T) {
	f := shellFleet(t, map[string]string{"w": "while :; do sleep 0.05; done"})
	if err := f.start("w"); err != nil {
		t.Fatal(err)
	}
	f.signal("w", syscall.SIGKILL, intentKill)
	waitExited(t, f, "w")
	f.stopAll(time.Second) // the run ends before the kill was reaped
	var res Result
	f.reapExited(&res, func(string, ...any) {}, false)
	if len(res.WorkerFailures) != 0 {
		t.Fatalf("our own kill judged a failure: %+v", res.WorkerFailures)
	}
}

func TestReapExitedStopsOnRefusedFlags(t *testing.T) {
	f := shellFleet(t, map[string]string{"w": "echo 'Error: unknown flag: --nope' >&2; exit 2"})
	if err := f.start("w"); err != nil {
		t.Fatal(err)
	}
	waitExited(t, f, "w")
	var res Result
	f.reapExited(&res, func(string, ...any) {}, true)
	if f.fatal == nil || !strings.Contains(f.fatal.Error(), "unknown flag") {
		t.Fatalf("fatal %v, want the refused flag named", f.fatal)
	}
}

func TestPanicLine(t *testing.T) {
	path := filepath.Join(t.TempDir(), "w.log")
	log := "--- t started pid 1\npanic: old\n--- t exited\n--- t started pid 2\n{\"level\":\"info\"}\npanic: runtime error: nil map\n\ngoroutine 1 [running]:\n"
	if err := os.WriteFile(path, []byte(log), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := panicLine(path); got != "panic: runtime error: nil map" {
		t.Fatalf("panicLine = %q", got)
	}
	if err := os.WriteFile(path, []byte("--- t started pid 1\npanic: old\n--- t started pid 2\nfine\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := panicLine(path); got != "" {
		t.Fatalf("panicLine = %q, want none from the current process", got)
	}
}

func TestDescribeFailures(t *testing.T) {
	fs := []WorkerFailure{
		{Worker: "worker-0", Pid: 1, Error: strings.Repeat("x", 500)},
		{Worker: "worker-1", Pid: 2, Error: "b"},
		{Worker: "worker-2", Pid: 3, Error: "c"},
	}
	got := describeFailures(fs, 2)
	if !strings.Contains(got, "worker-0") || !strings.Contains(got, "worker-1") || strings.Contains(got, "worker-2") ||
		!strings.Contains(got, "1 more") || len(got) > 500 {
		t.Fatalf("describeFailures = %q", got)
	}
}

func TestStartedInOutage(t *testing.T) {
	t0 := time.Now()
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	f := &fleet{}
	f.brokerDown(at(10))
	f.brokerUp(at(20))
	f.brokerDown(at(40)) // still down
	for _, tc := range []struct {
		from, to int
		want     bool
	}{{0, 5, false}, {5, 12, true}, {12, 25, true}, {21, 30, false}, {35, 41, true}, {45, 50, true}} {
		if got := f.startedInOutage(at(tc.from), at(tc.to)); got != tc.want {
			t.Errorf("process %ds..%ds: overlaps an outage %v, want %v", tc.from, tc.to, got, tc.want)
		}
	}
}

// waitFile waits, up to 30 s, until path exists.
func waitFile(t *testing.T, path string) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if _, err := os.Stat(path); err == nil {
			return
		}
	}
	t.Fatalf("%s was not written within 30s", path)
}
