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

// proc is one worker process.
type proc struct {
	id      string
	cmd     *exec.Cmd
	out     bytes.Buffer
	started time.Time
	intent  intent
	done    chan struct{}
	code    int  // exit code, -1 when killed by a signal
	reaped  bool // its exit has been accounted for
}

func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// report parses the worker's last JSON line, if it printed one.
func (p *proc) report() (WorkerReport, bool) {
	var rep WorkerReport
	sc := bufio.NewScanner(bytes.NewReader(p.out.Bytes()))
	ok := false
	for sc.Scan() {
		if json.Unmarshal(sc.Bytes(), &rep) == nil {
			ok = true
		}
	}
	return rep, ok
}

// fleet starts, signals and restarts the worker processes. Only the
// supervisor's loop uses it, so it needs no locks.
type fleet struct {
	exe     string
	env     []string
	logDir  string
	argsFor func(id string) []string
	procs   map[string]*proc // the current process of each worker id
	pending map[string]time.Time
	next    int   // the number of the next worker id to hand out
	fatal   error // set when a worker can never run, e.g. its flags were refused
}

// start launches worker id, appending its stderr to its log file.
func (f *fleet) start(id string) error {
	lf, err := os.OpenFile(filepath.Join(f.logDir, id+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("chaos: opening the log of %s: %w", id, err)
	}
	p := &proc{id: id, started: time.Now(), done: make(chan struct{})}
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
	go func() {
		err := p.cmd.Wait()
		p.code = 0
		if ee, ok := errors.AsType[*exec.ExitError](err); ok {
			p.code = ee.ExitCode()
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

// active counts the workers that are meant to be running.
func (f *fleet) active() int {
	n := 0
	for _, p := range f.procs {
		if p.intent != intentRemove && p.intent != intentStop {
			n++
		}
	}
	return n
}

// stopAll SIGTERMs every worker and waits up to grace for them, then
// SIGKILLs the rest.
func (f *fleet) stopAll(grace time.Duration) {
	for id, p := range f.procs {
		if !p.exited() {
			f.signal(id, syscall.SIGTERM, intentStop)
		} else {
			p.intent = intentStop
		}
	}
	deadline := time.Now().Add(grace)
	for _, p := range f.procs {
		select {
		case <-p.done:
		case <-time.After(time.Until(deadline)):
			_ = p.cmd.Process.Signal(syscall.SIGKILL)
			<-p.done
		}
	}
}

// reapExited accounts for workers that exited since the last call and
// schedules their restarts: at once after a kill or a SIGTERM, shortly
// after an injected error, after a second after a crash. It returns the
// aborted batches the exited workers reported.
func (f *fleet) reapExited(res *Result, event func(string, ...any)) uint64 {
	var aborted uint64
	now := time.Now()
	for id, p := range f.procs {
		if p.reaped || !p.exited() {
			continue
		}
		p.reaped = true
		if rep, ok := p.report(); ok {
			aborted += rep.Aborted
		}
		switch p.intent {
		case intentKill, intentTerm:
			f.pending[id] = now
		case intentRemove:
			delete(f.procs, id)
		case intentNone:
			if p.code == exitUsage {
				f.fatal = fmt.Errorf("chaos: worker %s refused its command line (exit %d): %s",
					id, p.code, logTail(filepath.Join(f.logDir, id+".log"), 5))
				continue
			}
			if p.code == ExitInjected {
				res.InjectedAborts++
				event("%s stopped on an injected processing error; restarting it", id)
				f.pending[id] = now.Add(200 * time.Millisecond)
			} else {
				res.WorkerCrashes++
				event("%s exited with status %d; restarting it (see %s.log)", id, p.code, id)
				f.pending[id] = now.Add(time.Second)
			}
		}
	}
	return aborted
}

// reap returns the aborted batches reported by stopped workers not yet
// accounted for.
func (f *fleet) reap(res *Result) uint64 {
	var aborted uint64
	for _, p := range f.procs {
		if p.reaped || !p.exited() {
			continue
		}
		p.reaped = true
		if rep, ok := p.report(); ok {
			aborted += rep.Aborted
		}
		if p.intent == intentNone && p.code == ExitInjected {
			res.InjectedAborts++
		}
	}
	return aborted
}

// exitUsage is eosctl's exit code for a command line it refuses.
const exitUsage = 2

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
