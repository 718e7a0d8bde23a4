package chaos

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// NetHold is how NetHarness.Hold holds a fault.
type NetHold struct {
	For   time.Duration // how long the fault holds, unless ctx ends first
	Start time.Time     // the run's start, for NetFault.AtSeconds
	// Progress reads the pipeline's progress in the caller's unit (input
	// records committed, or rows written), for NetFault.ConsumedDuring.
	Progress func() int64
	Event    func(format string, a ...any) // reports the fault in place
}

// Hold makes fault nf (its Action, and its Node or Key), checks that the
// harness's status shows it, holds it, checks again, undoes it and checks
// that the broker shows no fault. It returns nf with the evidence and
// the outcome filled in, when the broker was given back, and the progress
// read then. ctx ends the hold early.
func (h *NetHarness) Hold(ctx context.Context, nf NetFault, how NetHold) (NetFault, time.Time, int64) {
	bg := context.WithoutCancel(ctx)
	args := strings.Fields(nf.Action)
	if nf.Key != "" {
		args = append(args, nf.Key)
	} else {
		args = append(args, strconv.Itoa(nf.Node))
	}
	out, err := h.run(bg, args...)
	if err == nil && nf.Key != "" {
		if nf.Node, err = strconv.Atoi(out); err != nil {
			err = fmt.Errorf("chaos: %s %s printed %q, not a broker number", h.cmd, strings.Join(args, " "), out)
		}
	}
	begin, c0 := time.Now(), how.Progress()
	nf.AtSeconds = begin.Sub(how.Start).Seconds()
	if err == nil {
		err = h.shows(bg, &nf, netToken(nf.Action))
	}
	if err == nil {
		how.Event("%s%s: the harness shows %q; holding it %s", nf.Action, keyNote(nf.Key), nf.Status, how.For)
		select {
		case <-ctx.Done():
		case <-time.After(how.For):
		}
		err = h.shows(bg, &nf, netToken(nf.Action))
	}
	healed, c, undoErr := h.undo(bg, nf, how.Progress)
	nf.HeldMs = healed.Sub(begin).Milliseconds()
	nf.ConsumedDuring = c - c0
	nf.Fired = err == nil && undoErr == nil
	if e := errors.Join(err, undoErr); e != nil {
		nf.Error = e.Error()
	}
	return nf, healed, c
}

// keyNote names a coordinator cut's key in an event.
func keyNote(key string) string {
	if key == "" {
		return ""
	}
	return " (the coordinator of " + key + ")"
}

// shows checks that the harness's status lists token among nf.Node's
// faults, and keeps the line as evidence.
func (h *NetHarness) shows(ctx context.Context, nf *NetFault, token string) error {
	line, faults, err := h.status(ctx, nf.Node)
	if err != nil {
		return err
	}
	nf.Status = line
	if !slices.Contains(strings.Fields(faults), token) {
		return fmt.Errorf("chaos: %s did not take: the harness's status shows %q, without %s", nf.Action, line, token)
	}
	return nil
}

// undo heals or resumes nf's broker (every broker when the fault never
// named one) and checks that the status shows it without faults; it
// returns when the broker was given back and the progress then, read
// before the status check so that progress after the heal counts
// towards the recovery, not the fault.
func (h *NetHarness) undo(ctx context.Context, nf NetFault, progress func() int64) (time.Time, int64, error) {
	verb := "heal"
	if nf.Action == "pause" {
		verb = "resume"
	}
	args := []string{verb}
	if nf.Node > 0 {
		args = append(args, strconv.Itoa(nf.Node))
	}
	_, err := h.run(ctx, args...)
	healed, c := time.Now(), progress()
	if err != nil || nf.Node == 0 {
		return healed, c, errors.Join(err, h.WholeAgain())
	}
	line, faults, err := h.status(ctx, nf.Node)
	if err == nil && faults != "none" {
		err = fmt.Errorf("chaos: %s %d did not take: the harness's status shows %q", verb, nf.Node, line)
	}
	return healed, c, err
}
