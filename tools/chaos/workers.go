package chaos

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

// ExitInjected is the exit code of a worker that stopped on ErrInjected,
// so the supervisor can tell injected failures from real crashes.
const ExitInjected = 3

// intent is what the supervisor meant to happen to a worker process.
type intent int

const (
	intentNone   intent = iota // running; an exit is a failure to restart from
	intentKill                 // SIGKILLed: restart it
	intentTerm                 // SIGTERMed: restart it
	intentRemove               // SIGTERMed for good: a scale-down
	intentStop                 // the run is over
)

// stdoutLog keeps what a worker prints on stdout and notes when its
// first-commit line arrives. The process's output copier writes to it
// while the supervisor reads it, so it locks.
type stdoutLog struct {
	mu          sync.Mutex
	buf         bytes.Buffer
	scanned     int       // bytes of buf already split into lines
	firstCommit time.Time // when the EventFirstCommit line arrived
}

// Write appends b and looks at each line it completes.
func (w *stdoutLog) Write(b []byte) (int, error) {
	now := time.Now()
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Write(b)
	for {
		rest := w.buf.Bytes()[w.scanned:]
		i := bytes.IndexByte(rest, '\n')
		if i < 0 {
			return len(b), nil
		}
		w.scanned += i + 1
		var ev WorkerEvent
		if w.firstCommit.IsZero() && json.Unmarshal(rest[:i], &ev) == nil && ev.Event == EventFirstCommit {
			w.firstCommit = now
		}
	}
}

// bytes returns a copy of everything written so far.
func (w *stdoutLog) bytes() []byte {
	w.mu.Lock()
	defer w.mu.Unlock()
	return bytes.Clone(w.buf.Bytes())
}

// firstCommitAt is when the worker said its first batch committed, or
// the zero time.
func (w *stdoutLog) firstCommitAt() time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.firstCommit
}

// proc is one worker process.
type proc struct {
	id      string
	cmd     *exec.Cmd
	out     stdoutLog
	started time.Time
	after   intent // what ended the previous process of this worker id
	noted   bool   // its first commit was announced
	intent  intent
	forced  bool // SIGKILLed because it did not stop in time after a SIGTERM
	done    chan struct{}
	code    int            // exit code, -1 when killed by a signal
	signal  syscall.Signal // the signal that ended it, when code is -1
	reaped  bool           // its exit has been accounted for
}

func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// report parses the worker's exit report, the last JSON line that says
// why it stopped, if it printed one.
func (p *proc) report() (WorkerReport, bool) {
	var rep WorkerReport
	sc := bufio.NewScanner(bytes.NewReader(p.out.bytes()))
	ok := false
	for sc.Scan() {
		var r WorkerReport
		if json.Unmarshal(sc.Bytes(), &r) == nil && r.Stopped != "" {
			rep, ok = r, true
		}
	}
	return rep, ok
}

// fleet starts, signals and restarts the worker processes. Only the
// supervisor's loop uses it, so it needs no locks.
type fleet struct {
	exe    string
	env    []string
	logDir string
	// stateDir holds one directory per worker id for its state stores,
	// kept across its restarts; "" when the pipeline keeps no state.
	stateDir string
	argsFor  func(id string) []string
	procs    map[string]*proc // the current process of each worker id
	pending  map[string]time.Time
	began    time.Time // when the first worker started, for failure times
	next     int       // the number of the next worker id to hand out
	// killRestarts counts processes started after a SIGKILL, and
	// firstCommits holds how long those that committed took to.
	killRestarts int
	firstCommits []time.Duration
	// unfinished and inOutage: see RestartLatency.
	unfinished []time.Duration
	inOutage   int
	fatal      error // set when a worker can never run, e.g. its flags were refused
	// outages are the injected broker restarts: start and end (zero while
	// the broker is still down).
	outages [][2]time.Time
}

// brokerDown and brokerUp record an injected broker outage.
func (f *fleet) brokerDown(at time.Time) { f.outages = append(f.outages, [2]time.Time{at}) }
func (f *fleet) brokerUp(at time.Time) {
	if n := len(f.outages); n > 0 && f.outages[n-1][1].IsZero() {
		f.outages[n-1][1] = at
	}
}

// startedInOutage reports whether a process started at from, before or
// during an injected outage, and still starting up when the broker went.
func (f *fleet) startedInOutage(from, to time.Time) bool {
	for _, o := range f.outages {
		if from.Before(o[1]) || o[1].IsZero() {
			if to.After(o[0]) {
				return true
			}
		}
	}
	return false
}

// start launches worker id, appending its stderr to its log file.
func (f *fleet) start(id string) error {
	lf, err := os.OpenFile(filepath.Join(f.logDir, id+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("chaos: opening the log of %s: %w", id, err)
	}
	p := &proc{id: id, started: time.Now(), done: make(chan struct{})}
	if prev := f.procs[id]; prev != nil {
		p.after = prev.intent
	}
	if p.after == intentKill {
		f.killRestarts++
	}
	p.cmd = exec.Command(f.exe, f.argsFor(id)...)
	p.cmd.Env = append(os.Environ(), f.env...)
	p.cmd.Stdout = &p.out
	p.cmd.Stderr = lf
	p.cmd.SysProcAttr = childAttr()
	if err := p.cmd.Start(); err != nil {
		lf.Close()
		return fmt.Errorf("chaos: starting worker %s (%s): %w", id, f.exe, err)
	}
	fmt.Fprintf(lf, "--- %s started pid %d\n", time.Now().Format(time.RFC3339Nano), p.cmd.Process.Pid)
	if f.stateDir != "" {
		fmt.Fprintf(lf, "--- state stores in %s\n", filepath.Join(f.stateDir, id))
	}
	go func() {
		err := p.cmd.Wait()
		p.code = 0
		if ee, ok := errors.AsType[*exec.ExitError](err); ok {
			p.code = ee.ExitCode()
			if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
				p.signal = ws.Signal()
			}
		} else if err != nil {
			p.code = -1
		}
		fmt.Fprintf(lf, "--- %s exited: %v\n", time.Now().Format(time.RFC3339Nano), err)
		lf.Close()
		close(p.done)
	}()
	f.procs[id] = p
	delete(f.pending, id)
	return nil
}

// add starts a worker under a new id.
func (f *fleet) add() (string, error) {
	id := fmt.Sprintf("worker-%d", f.next)
	f.next++
	return id, f.start(id)
}

// signal sends sig to id's process and records why.
func (f *fleet) signal(id string, sig syscall.Signal, why intent) {
	p := f.procs[id]
	if p == nil || p.exited() {
		return
	}
	p.intent = why
	_ = p.cmd.Process.Signal(sig)
}

// running lists the workers whose process runs, has run for at least
// minAge, and has not been signalled.
func (f *fleet) running(minAge time.Duration) []string {
	var ids []string
	for id, p := range f.procs {
		if !p.exited() && p.intent == intentNone && time.Since(p.started) >= minAge {
			ids = append(ids, id)
		}
	}
	return ids
}

// committing is running, limited to workers whose process has committed a
// batch, so it has taken over its transactional.id: a scale-down removes
// an instance that is up. One removed while it starts would leave the
// transaction its killed predecessor had open to the coordinator's
// timeout, which the embedded broker forgets across its own restart.
func (f *fleet) committing() []string {
	var ids []string
	for _, id := range f.running(0) {
		if !f.procs[id].out.firstCommitAt().IsZero() {
			ids = append(ids, id)
		}
	}
	return ids
}

// stopAll SIGTERMs every running worker and waits up to grace for them,
// then SIGKILLs the rest, which counts as their failure. A worker that
// already exited keeps the intent it had, so its exit is judged as such.
func (f *fleet) stopAll(grace time.Duration) {
	for id, p := range f.procs {
		if !p.exited() {
			f.signal(id, syscall.SIGTERM, intentStop)
		}
	}
	deadline := time.Now().Add(grace)
	for _, p := range f.procs {
		select {
		case <-p.done:
		case <-time.After(time.Until(deadline)):
			p.forced = true
			_ = p.cmd.Process.Signal(syscall.SIGKILL)
			<-p.done
		}
	}
}

// noteFirstCommits announces each worker restarted after a kill that has
// committed its first batch since the last call.
func (f *fleet) noteFirstCommits(event func(string, ...any)) {
	for id, p := range f.procs {
		if p.after != intentKill || p.noted {
			continue
		}
		if at := p.out.firstCommitAt(); !at.IsZero() {
			p.noted = true
			event("%s committed its first batch %s after its restart", id, at.Sub(p.started).Round(time.Millisecond))
		}
	}
}

// noteRestart records how long p, started after a kill and now exited at
// end, took to its first commit, or ran without one. A process that
// exited without committing counts when the verifier cut it short mid-run
// (a kill, a SIGTERM) or it failed a batch on an injected error, not when
// the run's end stopped it (intentStop, after the work was done).
func (f *fleet) noteRestart(p *proc, end time.Time) {
	at := p.out.firstCommitAt()
	if !at.IsZero() {
		end = at
	}
	switch {
	case f.startedInOutage(p.started, end):
		f.inOutage++
	case !at.IsZero():
		f.firstCommits = append(f.firstCommits, at.Sub(p.started))
	case p.intent == intentKill || p.intent == intentTerm || p.intent == intentNone && p.code == ExitInjected:
		f.unfinished = append(f.unfinished, end.Sub(p.started))
	}
}

// restartLatency summarises the first commits of the workers restarted
// after a kill that have exited and been reaped.
func (f *fleet) restartLatency() RestartLatency {
	l := newRestartLatency(f.killRestarts, f.firstCommits)
	for _, d := range f.unfinished {
		l.unfinished(d)
	}
	l.InOutage = f.inOutage
	return l
}

// exitClass is the supervisor's judgement of one worker exit.
type exitClass int

const (
	exitKilled   exitClass = iota // died of the SIGKILL the supervisor sent
	exitStopped                   // stopped after the SIGTERM the supervisor sent
	exitInjected                  // stopped on an injected processing error, as report and status agree
	exitOutage                    // started into an injected broker outage and failed its start-up check
	exitRefused                   // refused its command line or settings: no restart can help
	exitFailed                    // anything else: the run fails
)

// exitFacts is what the supervisor knows about a worker that exited.
type exitFacts struct {
	intent intent         // what the supervisor meant to happen to it
	code   int            // exit status, -1 when a signal ended it
	signal syscall.Signal // that signal
	forced bool           // SIGKILLed after it ignored a SIGTERM
	report WorkerReport   // its last report, if hasRep
	hasRep bool
	outage bool   // its life overlapped an injected broker outage
	panic  string // the panic line from its log, if it panicked
	log    string // the tail of its log, for exits without a report
}

// classify judges an exit. Only what the supervisor caused passes: its own
// SIGKILL, a clean stop after its own SIGTERM, or an injected processing
// error that the worker reports as injected and exits ExitInjected for.
// Everything else is a failure, returned with the reason in words.
func classify(x exitFacts) (exitClass, string) {
	terminated := x.intent == intentTerm || x.intent == intentRemove || x.intent == intentStop
	if x.hasRep && x.report.Stopped == StopInjected && x.code == ExitInjected {
		return exitInjected, ""
	}
	if x.hasRep && x.report.Stopped == StopUnreachable && x.outage {
		return exitOutage, ""
	}
	if x.code == -1 {
		switch {
		case x.signal == syscall.SIGKILL && x.intent == intentKill:
			return exitKilled, ""
		case x.forced:
			return exitFailed, "did not stop within the grace period after SIGTERM and was SIGKILLed"
		case x.signal == syscall.SIGTERM && terminated:
			return exitStopped, "" // SIGTERMed before it installed its handler
		case x.signal != 0:
			return exitFailed, fmt.Sprintf("ended by a signal (%v) that the verifier did not send", x.signal)
		}
		return exitFailed, "ended without an exit status"
	}
	if x.code == 0 && x.hasRep && x.report.Stopped == StopCancelled {
		if terminated {
			return exitStopped, ""
		}
		return exitFailed, "stopped cleanly though the verifier did not stop it"
	}
	if x.code == exitUsage && x.intent == intentNone && x.panic == "" {
		return exitRefused, ""
	}
	why := ""
	switch {
	case x.panic != "":
		why = x.panic
	case x.hasRep && x.report.Error != "":
		why = x.report.Error
	case x.hasRep:
		why = fmt.Sprintf("reported stopped=%q", x.report.Stopped)
	default:
		why = "printed no report; log: " + x.log
	}
	why = fmt.Sprintf("exit status %d: %s", x.code, why)
	if terminated {
		why = "after the verifier's SIGTERM, " + why
	}
	return exitFailed, why
}

// reapExited accounts for workers that exited since the last call and,
// with restart, schedules their restarts: at once after a kill or a
// SIGTERM, shortly after an injected error, after a second after a
// failure, which is recorded in res and fails the run. It returns the
// aborted batches the exited workers reported.
func (f *fleet) reapExited(res *Result, event func(string, ...any), restart bool) uint64 {
	var aborted uint64
	now := time.Now()
	for id, p := range f.procs {
		if p.reaped || !p.exited() {
			continue
		}
		p.reaped = true
		if p.after == intentKill {
			f.noteRestart(p, now)
		}
		rep, hasRep := p.report()
		if hasRep {
			aborted += rep.Aborted
		}
		logPath := filepath.Join(f.logDir, id+".log")
		x := exitFacts{intent: p.intent, code: p.code, signal: p.signal, forced: p.forced, report: rep, hasRep: hasRep,
			outage: f.startedInOutage(p.started, now)}
		if !hasRep {
			x.log = logTail(logPath, 5)
			x.panic = panicLine(logPath)
		}
		class, why := classify(x)
		var after time.Duration // when to restart it
		switch class {
		case exitRefused:
			f.fatal = fmt.Errorf("chaos: worker %s refused its command line or settings (exit %d): %s",
				id, p.code, logTail(logPath, 5))
			continue
		case exitInjected:
			res.InjectedAborts++
			event("%s stopped on an injected processing error", id)
			after = 200 * time.Millisecond
		case exitOutage:
			event("%s started while the broker was down and stopped at its start-up check, as designed", id)
			after = 200 * time.Millisecond
		case exitFailed:
			fail := WorkerFailure{Worker: id, Pid: p.cmd.Process.Pid, Exit: p.code, Stopped: rep.Stopped,
				Error: why, AtSeconds: now.Sub(f.began).Seconds()}
			if p.signal != 0 {
				fail.Signal = p.signal.String()
			}
			res.WorkerFailures = append(res.WorkerFailures, fail)
			res.WorkerCrashes++
			event("FAILURE: %s (pid %d) stopped on its own: %s (see %s.log)", id, fail.Pid, why, id)
			after = time.Second
		}
		switch {
		case !restart || p.intent == intentStop:
		case p.intent == intentRemove:
			delete(f.procs, id)
		case p.intent == intentKill || p.intent == intentTerm:
			f.pending[id] = now
		default:
			f.pending[id] = now.Add(after)
		}
	}
	return aborted
}

// exitUsage is eosctl's exit code for a command line it refuses.
const exitUsage = 2

// panicLine returns the "panic: " line that the last process logged to
// path, or "" if it did not panic.
func panicLine(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	s := string(b)
	if i := strings.LastIndex(s, " started pid "); i >= 0 {
		s = s[i:]
	}
	for line := range strings.Lines(s) {
		if strings.HasPrefix(line, "panic: ") {
			return strings.TrimSpace(line)
		}
	}
	return ""
}

// logTail returns the last n lines of a log file, joined by " | ".
func logTail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	lines = lines[max(0, len(lines)-n):]
	return strings.Join(lines, " | ")
}
