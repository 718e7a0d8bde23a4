package chaos

import (
	"encoding/json"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestNewRestartLatency(t *testing.T) {
	ms := func(v ...int) []time.Duration {
		var d []time.Duration
		for _, x := range v {
			d = append(d, time.Duration(x)*time.Millisecond)
		}
		return d
	}
	for _, tc := range []struct {
		name        string
		restarts    int
		samples     []time.Duration
		median, max time.Duration
		words       string
	}{
		{"none", 0, nil, 0, 0, "no restart"},
		{"none committed", 2, nil, 0, 0, "none of 2"},
		{"odd", 3, ms(900, 100, 400), 400 * time.Millisecond, 900 * time.Millisecond, "median 400ms, max 900ms (3 of 3"},
		{"even", 5, ms(100, 400, 300, 200), 250 * time.Millisecond, 400 * time.Millisecond, "(4 of 5"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := newRestartLatency(tc.restarts, tc.samples)
			if l.Restarts != tc.restarts || l.Count != len(tc.samples) || l.Median != tc.median || l.Max != tc.max {
				t.Fatalf("got %+v, want median %s max %s", l, tc.median, tc.max)
			}
			if !slices.Equal(l.Samples, tc.samples) {
				t.Fatalf("samples %v reordered, want %v", l.Samples, tc.samples)
			}
			if !strings.Contains(l.String(), tc.words) {
				t.Fatalf("String() = %q, want it to contain %q", l.String(), tc.words)
			}
		})
	}
}

func TestRestartLatencyJSON(t *testing.T) {
	l := newRestartLatency(3, []time.Duration{1200 * time.Millisecond, 800 * time.Millisecond})
	b, err := json.Marshal(Result{RestartToFirstCommit: l})
	if err != nil {
		t.Fatal(err)
	}
	var raw struct {
		R map[string]any `json:"restart_to_first_commit"`
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		t.Fatal(err)
	}
	want := map[string]float64{"restarts": 3, "count": 2, "median_ms": 1000, "max_ms": 1200}
	for k, v := range want {
		if raw.R[k] != v {
			t.Errorf("%s = %v, want %v in %s", k, raw.R[k], v, b)
		}
	}
	var back Result
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if back.RestartToFirstCommit.Max != l.Max || back.RestartToFirstCommit.Median != l.Median ||
		!slices.Equal(back.RestartToFirstCommit.Samples, l.Samples) || back.RestartToFirstCommit.Count != 2 {
		t.Fatalf("round trip %+v, want %+v", back.RestartToFirstCommit, l)
	}
}

func TestStdoutLogNotesTheFirstCommitLine(t *testing.T) {
	var w stdoutLog
	ev, _ := json.Marshal(WorkerEvent{Event: EventFirstCommit, Instance: "worker-0", AfterMs: 5})
	line := append(ev, '\n')
	// The copier may split a line anywhere.
	if _, err := w.Write([]byte("not json\n" + string(line[:7]))); err != nil {
		t.Fatal(err)
	}
	if !w.firstCommitAt().IsZero() {
		t.Fatal("first commit noted before its line was complete")
	}
	before := time.Now()
	if _, err := w.Write(line[7:]); err != nil {
		t.Fatal(err)
	}
	at := w.firstCommitAt()
	if at.Before(before) {
		t.Fatalf("first commit at %v, want when its line completed (after %v)", at, before)
	}
	_, _ = w.Write(line) // a second one changes nothing
	rep, _ := json.Marshal(WorkerReport{Instance: "worker-0", Stopped: StopCancelled, FirstCommitMs: 5})
	_, _ = w.Write(append(rep, '\n'))
	if w.firstCommitAt() != at {
		t.Fatal("a later line moved the first commit")
	}
	p := &proc{}
	_, _ = p.out.Write(w.bytes())
	if r, ok := p.report(); !ok || r.Stopped != StopCancelled || r.FirstCommitMs != 5 {
		t.Fatalf("report %+v %v: want the exit report, not the event line", r, ok)
	}
}

// A worker restarted after a kill is measured from its start to its
// first-commit line, though it is SIGKILLed again and never reports.
func TestFleetMeasuresRestartsAfterKills(t *testing.T) {
	ev, _ := json.Marshal(WorkerEvent{Event: EventFirstCommit})
	f := shellFleet(t, map[string]string{
		"w": "sleep 0.3; echo '" + string(ev) + "'; while :; do sleep 0.05; done",
		"x": "while :; do sleep 0.05; done", // restarted after a kill, never commits
	})
	for _, id := range []string{"w", "x"} {
		if err := f.start(id); err != nil {
			t.Fatal(err)
		}
		f.signal(id, syscall.SIGKILL, intentKill)
	}
	waitExited(t, f, "w", "x")
	var res Result
	var events []string
	event := func(format string, a ...any) { events = append(events, format) }
	f.reapExited(&res, event, true)
	for _, id := range []string{"w", "x"} {
		if err := f.start(id); err != nil {
			t.Fatal(err)
		}
	}
	if f.restartLatency().Restarts != 2 {
		t.Fatalf("restarts %d, want 2", f.restartLatency().Restarts)
	}
	deadline := time.Now().Add(10 * time.Second)
	for f.procs["w"].out.firstCommitAt().IsZero() && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	f.noteFirstCommits(event)
	if len(events) != 1 || !strings.Contains(events[0], "first batch") {
		t.Fatalf("events %q, want the first commit announced once", events)
	}
	f.signal("w", syscall.SIGKILL, intentKill)
	f.signal("x", syscall.SIGKILL, intentKill)
	waitExited(t, f, "w", "x")
	f.reapExited(&res, event, false)
	l := f.restartLatency()
	if l.Restarts != 2 || l.Count != 1 || l.Max < 300*time.Millisecond || l.Max > 5*time.Second {
		t.Fatalf("latency %+v, want one sample of about 0.3s out of 2 restarts", l)
	}
	// x never committed: killed again, it counts as a restart that took
	// at least as long as it ran.
	if len(l.Unfinished) != 1 || l.MaxUnfinished < 300*time.Millisecond || l.MaxUnfinished > 10*time.Second {
		t.Fatalf("unfinished %v (max %s), want x's run without a commit", l.Unfinished, l.MaxUnfinished)
	}
	if !strings.Contains(l.String(), "1 ended without a commit") {
		t.Fatalf("String() = %q, want the restart without a commit named", l)
	}
	if len(res.WorkerFailures) != 0 {
		t.Fatalf("failures %+v", res.WorkerFailures)
	}
}

// A restart that waits through an injected broker outage is left out of
// the measurement, committed or not; the run's own end does not count as
// cutting a restart short.
func TestFleetLeavesOutRestartsInOutages(t *testing.T) {
	f := &fleet{}
	t0 := time.Now()
	f.brokerDown(t0.Add(time.Second))
	f.brokerUp(t0.Add(18 * time.Second))
	killed := func(start time.Duration, intent intent) *proc {
		return &proc{started: t0.Add(start), after: intentKill, intent: intent}
	}
	f.noteRestart(killed(500*time.Millisecond, intentKill), t0.Add(5*time.Second)) // through the outage
	f.noteRestart(killed(20*time.Second, intentKill), t0.Add(30*time.Second))      // after it: 10s without a commit
	f.noteRestart(killed(40*time.Second, intentStop), t0.Add(60*time.Second))      // stopped at the end of the run
	l := f.restartLatency()
	if l.InOutage != 1 || len(l.Unfinished) != 1 || l.MaxUnfinished != 10*time.Second || l.Count != 0 {
		t.Fatalf("latency %+v: want 1 in the outage, 1 unfinished after 10s, the stopped one left out", l)
	}
	b, err := json.Marshal(l)
	if err != nil {
		t.Fatal(err)
	}
	var back RestartLatency
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if back.MaxUnfinished != l.MaxUnfinished || back.InOutage != 1 || !slices.Equal(back.Unfinished, l.Unfinished) {
		t.Fatalf("round trip %+v of %s, want %+v", back, b, l)
	}
}
