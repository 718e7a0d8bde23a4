package sim

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

const (
	stopBound   = 20 * time.Second // a Run must return this soon after Close or a crash
	maxRestarts = 8                // Runs that end on their own before the run is a restart loop
	maxMembers  = 3
)

// supervisor keeps the members running through the schedule, as a process
// manager would: a crashed or stopped member comes back, a Run that ends
// on its own is restarted, and the run ends once the group has committed
// the whole input.
type supervisor struct {
	s        *sim
	live     map[int]*instance
	zombies  []*instance // crashed incarnations, whose Run must still return
	next     int
	errs     []string
	restarts int

	lastCheck time.Time // of the group's offsets, after a lost commit
	progress  int64     // their sum then
	movedAt   time.Time // when it last changed
}

// supervise runs the members until the group has committed all the
// input, then closes them. It returns what each Run that ended on its
// own returned, and an error when an invariant of liveness broke.
func (s *sim) supervise(ctx context.Context) ([]string, error) {
	sv := &supervisor{s: s, live: map[int]*instance{}}
	err := s.withStacks(sv.loop(ctx))
	sv.finish()
	if cerr := sv.closeAll(); err == nil {
		err = s.withStacks(cerr)
	}
	return sv.errs, err
}

// withStacks adds to err, when set, the file holding the stacks of the
// run's goroutines as they are when err is found, before the members are
// closed: what the runtime was doing, as a hang may not come again.
func (s *sim) withStacks(err error) error {
	if err == nil {
		return nil
	}
	if path, derr := dumpStacks(s.label, s.sched); derr == nil {
		return fmt.Errorf("%w (the run's goroutines: %s)", err, path)
	}
	return err
}

func (sv *supervisor) loop(ctx context.Context) error {
	if err := sv.add(); err != nil {
		return as(KindSetup, err)
	}
	cl, err := kgo.NewClient(sv.s.base()...)
	if err != nil {
		return as(KindSetup, err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	deadline := time.NewTimer(sv.s.cfg.Bound)
	defer deadline.Stop()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	sv.s.hearing.reset()
	for {
		select {
		case ev := <-sv.s.events:
			if err := sv.handle(ev); err != nil {
				return err
			}
		case <-tick.C:
			if err := sv.reap(); err != nil {
				return err
			}
			if len(sv.s.events) == 0 && sv.s.caughtUp(ctx, adm) {
				return nil
			}
			if err := sv.unstick(ctx, adm); err != nil {
				return err
			}
			if err := sv.s.hearing.silent(); err != nil {
				return err
			}
		case <-deadline.C:
			return fmt.Errorf("not done within %v: the group did not commit the whole input (Runs ended: %v)", sv.s.cfg.Bound, sv.errs)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// stallAfter is how long the group's offsets may stand still, input
// left, after a lost commit before the members are restarted.
const stallAfter = 3 * time.Second

// unstick restarts every member when a lost commit left the group's
// offsets short of input that no member will consume again: a member
// that took the commit at its word has moved past its records, and only a
// new start, from the group's offsets, reads them again. An operator
// restarting a stuck app does the same.
func (sv *supervisor) unstick(ctx context.Context, adm *kadm.Client) error {
	sv.s.mu.Lock()
	lost := len(sv.s.flipped)
	sv.s.mu.Unlock()
	if lost == 0 || len(sv.s.events) > 0 || time.Since(sv.lastCheck) < 200*time.Millisecond {
		return nil
	}
	sv.lastCheck = time.Now()
	offs, err := adm.FetchOffsets(ctx, appID)
	if err != nil {
		return nil
	}
	var sum int64
	offs.Each(func(o kadm.OffsetResponse) { sum += o.At })
	if sum != sv.progress || sv.movedAt.IsZero() {
		sv.progress, sv.movedAt = sum, time.Now()
		return nil
	}
	if time.Since(sv.movedAt) < stallAfter {
		return nil
	}
	sv.movedAt = time.Now()
	sv.errs = append(sv.errs, fmt.Sprintf("restarted all: the group's offsets stood at %d for %v after a lost commit", sum, stallAfter))
	for _, idx := range sv.order() {
		in := sv.live[idx]
		in.wire.quiesce()
		if err := in.stop(false, stopBound); err != nil && !in.wire.isDead() {
			return fmt.Errorf("instance %d: Run returned %v after Close, want nil", idx, err)
		}
		if err := sv.restart(idx); err != nil {
			return err
		}
	}
	return nil
}

// finish ends the schedule: no step strikes from now on, what faults were
// under way complete, and a crash left in the queue makes its incarnation
// a zombie (the input is done; nothing needs a successor).
func (sv *supervisor) finish() {
	s := sv.s
	s.mu.Lock()
	s.over = true // what the members do while closing is not the schedule's
	clear(s.flips)
	s.mu.Unlock()
	for deadline := time.Now().Add(stopBound); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		s.mu.Lock()
		acting := s.acting
		s.mu.Unlock()
		if acting == 0 {
			break
		}
	}
	for {
		select {
		case ev := <-s.events:
			if in := sv.live[ev.idx]; ev.fault == Crash && in != nil && in.wire == ev.wire {
				sv.bury(ev.idx)
			}
		default:
			return
		}
	}
}

// bury moves member idx's incarnation, crashed, to the zombies: it runs
// down against dead connections, and its Run must still return.
func (sv *supervisor) bury(idx int) {
	in := sv.live[idx]
	in.wire.kill()
	in.cancel()
	sv.zombies = append(sv.zombies, in)
	delete(sv.live, idx)
}

// add starts the next member.
func (sv *supervisor) add() error {
	in, err := sv.s.start(sv.next)
	if err != nil {
		return err
	}
	sv.live[sv.next] = in
	sv.next++
	return nil
}

// handle acts on a fault that needs the supervisor: a crash or a clean
// leave is followed by a fresh incarnation; a join adds a member.
func (sv *supervisor) handle(ev event) error {
	if ev.fault == Join {
		if len(sv.live) >= maxMembers {
			return nil
		}
		sv.s.strike(ev.step)
		return sv.add()
	}
	in := sv.live[ev.idx]
	if in == nil || in.wire != ev.wire {
		return nil // from an incarnation already gone
	}
	if ev.fault == Crash {
		// A crashed process is gone at once: its successor starts now,
		// while what is left of it runs down against dead connections.
		sv.bury(ev.idx)
		return sv.restart(ev.idx)
	}
	if in.wire.isDead() {
		return nil // it crashed after asking to leave: its crash event follows
	}
	sv.s.strike(ev.step)
	in.wire.quiesce()
	err := in.stop(false, stopBound)
	if herr := (*HangError)(nil); errors.As(err, &herr) {
		return herr
	}
	if err != nil && !in.wire.isDead() {
		return fmt.Errorf("instance %d: Run returned %v after Close, want nil", ev.idx, err)
	}
	return sv.restart(ev.idx)
}

func (sv *supervisor) restart(idx int) error {
	in, err := sv.s.start(idx)
	if err != nil {
		return err
	}
	sv.live[idx] = in
	return nil
}

// reap restarts each member whose Run ended on its own, keeping its error.
func (sv *supervisor) reap() error {
	for _, idx := range sv.order() {
		in := sv.live[idx]
		if in.wire.isDead() {
			continue // crashed: its Crash event buries it and starts its successor
		}
		select {
		case err := <-in.done:
			in.cancel()
			sv.errs = append(sv.errs, fmt.Sprintf("i%d: %v", idx, err))
			if sv.restarts++; sv.restarts > maxRestarts {
				return fmt.Errorf("restart loop: %d Runs ended on their own, the last with %v", sv.restarts, err)
			}
			if err := sv.restart(idx); err != nil {
				return err
			}
		default:
		}
	}
	return nil
}

// closeAll closes every member; each Run must return nil, in bound. A
// crashed incarnation's Run may return anything, but must return.
func (sv *supervisor) closeAll() error {
	var first error
	for _, idx := range sv.order() {
		in := sv.live[idx]
		in.wire.quiesce()
		if in.wire.isDead() {
			sv.bury(idx)
			continue
		}
		if err := in.stop(false, stopBound); err != nil && !in.wire.isDead() && first == nil {
			first = fmt.Errorf("instance %d: Run returned %v after Close, want nil", idx, err)
		}
	}
	for _, z := range sv.zombies {
		select {
		case <-z.done:
		case <-time.After(stopBound):
			if first == nil {
				first = &HangError{Instance: z.idx, Crash: true, Bound: stopBound}
			}
		}
	}
	return first
}

// order is the live members' indexes, ascending.
func (sv *supervisor) order() []int { return slices.Sorted(maps.Keys(sv.live)) }
