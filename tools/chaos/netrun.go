package chaos

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/eosflow/eosflow/config"
	"github.com/eosflow/eosflow/internal/runcfg"
)

// NetFault is one network fault of a run, made through the harness: what
// it did, the evidence that it held, and how the group fared.
type NetFault struct {
	// Kind is the planned kind: net-cut, pause or coordinator-cut.
	Kind string `json:"kind"`
	// Action is the harness command: cut-clients, cut-peers, isolate,
	// pause, or "cut-coordinator txn" or "cut-coordinator group".
	Action string `json:"action"`
	Node   int    `json:"node"`          // the broker it cut or paused, from 1
	Key    string `json:"key,omitempty"` // a coordinator cut's transactional id or group
	// Fired is true when the harness's status listed the fault on Node
	// right after it was made and again just before it was undone, and
	// listed Node without faults once it was.
	Fired bool `json:"fired"`
	// Status is the harness's status line of Node just before the fault
	// was undone.
	Status    string  `json:"status"`
	AtSeconds float64 `json:"at_seconds"` // when the fault was in place, since the workers started
	HeldMs    int64   `json:"held_ms"`    // from then to its heal or resume
	// ConsumedDuring is how many input records the group committed while
	// the fault held (rows written, under verify --sink): 0 when it
	// stalled the group.
	ConsumedDuring int64 `json:"consumed_during"`
	// RecoveryMs is the time from the heal or resume to the group's next
	// committed progress (input offsets committed in a transaction, read
	// every 250ms); -1 when there was none to see, the input being
	// consumed already.
	RecoveryMs int64  `json:"recovery_ms"`
	Error      string `json:"error,omitempty"` // why it did not fire, hold or heal
}

// Recovery sums up the recoveries after the network faults of one action.
type Recovery struct {
	// Action is the harness action, e.g. cut-clients or pause.
	Action string `json:"action"`
	// Fired is how many faults of the action fired; Measured how many
	// of them have a RecoveryMs.
	Fired    int `json:"fired"`
	Measured int `json:"measured"`
	// MedianMs and MaxMs sum up the measured recoveries.
	MedianMs int64 `json:"median_ms"`
	MaxMs    int64 `json:"max_ms"`
}

// String is the summary on one line, for the result table.
func (r Recovery) String() string {
	if r.Measured == 0 {
		return fmt.Sprintf("%d fired, no recovery measured", r.Fired)
	}
	return fmt.Sprintf("%d fired; recovery median %s, max %s", r.Fired,
		time.Duration(r.MedianMs)*time.Millisecond, time.Duration(r.MaxMs)*time.Millisecond)
}

// Recoveries sums up fs by action, in the order the actions first came.
func Recoveries(fs []NetFault) []Recovery {
	var (
		out     []Recovery
		samples = map[string][]int64{}
	)
	for _, f := range fs {
		i := slices.IndexFunc(out, func(r Recovery) bool { return r.Action == f.Action })
		if i < 0 {
			out, i = append(out, Recovery{Action: f.Action}), len(out)
		}
		if f.Fired {
			out[i].Fired++
		}
		if f.RecoveryMs >= 0 {
			samples[f.Action] = append(samples[f.Action], f.RecoveryMs)
		}
	}
	for i := range out {
		s := samples[out[i].Action]
		if len(s) == 0 {
			continue
		}
		slices.Sort(s)
		out[i].Measured, out[i].MaxMs = len(s), s[len(s)-1]
		out[i].MedianMs = s[len(s)/2]
		if len(s)%2 == 0 {
			out[i].MedianMs = (s[len(s)/2-1] + s[len(s)/2]) / 2
		}
	}
	return out
}

// netOutcome is the end of a network fault: the fault, when it was
// undone and what the group had consumed then.
type netOutcome struct {
	f        NetFault
	healed   time.Time
	consumed int64
}

// netWatch is the network fault under way, or the recovery awaited
// after the last one.
type netWatch struct {
	busy       bool // a fault holds
	done       chan netOutcome
	cancel     context.CancelFunc // ends the hold early when the run ends
	recovering int                // index in Result.NetFaults awaiting progress; -1 for none
	healed     time.Time
	consumed   int64
}

// startNet checks the harness when the run plans network faults; the
// cluster is made whole again when the run ends.
func (r *run) startNet(ctx context.Context) error {
	r.nw.recovering = -1
	if r.o.counts().network() == 0 {
		return nil
	}
	h, err := openNetHarness(ctx, r.o, r.brokerLog)
	if err != nil {
		return err
	}
	r.net, r.nw.done = h, make(chan netOutcome, 1)
	r.atEnd(func() {
		if r.nw.busy {
			r.nw.cancel()
			r.netBack(<-r.nw.done)
		}
		if err := h.WholeAgain(); err != nil {
			r.event("making the cluster whole again: %v", err)
		}
		r.res.Recovery = Recoveries(r.res.NetFaults)
	})
	return nil
}

// fireNet starts network fault f on a goroutine of its own, or reports
// false when a coordinator cut finds no worker to take a transactional
// id from yet.
func (r *run) fireNet(ctx context.Context, f fault) bool {
	nf := NetFault{Kind: f.kind.String(), Node: 1 + r.rng.IntN(r.net.nodes), RecoveryMs: -1}
	switch f.kind {
	case faultNetCut:
		nf.Action = NetCutActions[f.variant]
	case faultPause:
		nf.Action = "pause"
	case faultCoordinatorCut:
		kind := coordinatorKinds[f.variant]
		nf.Action, nf.Node, nf.Key = "cut-coordinator "+kind, 0, r.app
		if kind == "txn" {
			ids := r.fl.committing()
			if len(ids) == 0 {
				return false
			}
			slices.Sort(ids)
			nf.Key = r.transactionalID(ids[r.rng.IntN(len(ids))])
		}
	}
	hctx, cancel := context.WithCancel(ctx)
	r.nw.busy, r.nw.cancel = true, cancel
	hold := r.o.CutFor
	if f.kind == faultPause {
		hold = r.o.PauseFor
	}
	go func() { r.nw.done <- r.holdNet(hctx, nf, hold) }()
	return true
}

// transactionalID is the transactional id of worker id's (first)
// session.
func (r *run) transactionalID(id string) string {
	c := config.Config{AppID: r.app, InstanceID: id}
	if r.o.ProcessWorkers > 1 {
		c.InstanceID = runcfg.WorkerInstanceID(c, 0)
	}
	return runcfg.TransactionalID(c)
}

// netToken is the word the harness's status shows for action.
func netToken(action string) string {
	switch action {
	case "cut-peers":
		return "cut-from-peers"
	case "isolate":
		return "isolated"
	case "pause":
		return "paused"
	}
	return "cut-from-clients" // cut-clients and cut-coordinator
}

// holdNet holds fault nf for hold on a goroutine of its own; ctx ends
// the hold early.
func (r *run) holdNet(ctx context.Context, nf NetFault, hold time.Duration) netOutcome {
	f, healed, c := r.net.Hold(ctx, nf, NetHold{For: hold, Start: r.start, Progress: r.consumed.Load, Event: r.event})
	return netOutcome{f: f, healed: healed, consumed: c}
}

// netBack records a network fault that ended, and awaits the group's
// progress after it.
func (r *run) netBack(o netOutcome) {
	r.nw.busy = false
	if r.nw.cancel != nil {
		r.nw.cancel()
	}
	res := &r.res
	res.NetFaults = append(res.NetFaults, o.f)
	if !o.f.Fired {
		r.event("%s on broker %d failed: %s", o.f.Action, o.f.Node, o.f.Error)
		return
	}
	switch o.f.Kind {
	case faultNetCut.String():
		res.NetCuts++
	case faultPause.String():
		res.Pauses++
	case faultCoordinatorCut.String():
		res.CoordinatorCuts++
	}
	r.event("%s on broker %d undone after %s; the group committed %d input records meanwhile",
		o.f.Action, o.f.Node, time.Duration(o.f.HeldMs)*time.Millisecond, o.f.ConsumedDuring)
	r.nw.recovering, r.nw.healed, r.nw.consumed = len(res.NetFaults)-1, o.healed, o.consumed
}

// noteRecovery times the group's first committed progress, c records,
// after the last network fault was undone.
func (r *run) noteRecovery(now time.Time, c int64) {
	i := r.nw.recovering
	if i < 0 {
		return
	}
	f := &r.res.NetFaults[i]
	switch {
	case c > r.nw.consumed:
		f.RecoveryMs = now.Sub(r.nw.healed).Milliseconds()
		r.event("the group progressed %s after %s on broker %d was undone", now.Sub(r.nw.healed).Round(time.Millisecond), f.Action, f.Node)
	case r.nw.consumed >= int64(r.o.Records):
		r.event("the input was consumed before %s on broker %d was undone: no recovery to measure", f.Action, f.Node)
	default:
		return
	}
	r.nw.recovering = -1
}

// netProblems fails a run whose network faults did not all fire.
func netProblems(r Result, add func(bool, Problem, string, ...any)) {
	failed := NetFailures(r.NetFaults)
	add(len(failed) > 0, ProblemNetFaultFailed, "%d network faults did not take, hold or heal: %s", len(failed), strings.Join(failed, "; "))
}

// NetFailures lists, one line each, the network faults of fs that did not
// take, hold or heal: each fails the run that made it.
func NetFailures(fs []NetFault) []string {
	var out []string
	for _, f := range fs {
		if !f.Fired {
			out = append(out, fmt.Sprintf("%s on broker %d: %s", f.Action, f.Node, f.Error))
		}
	}
	return out
}
