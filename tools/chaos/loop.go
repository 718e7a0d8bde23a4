package chaos

import (
	"cmp"
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"syscall"
	"time"

	"github.com/eosflow/eosflow/config"
)

// loopState is where the run's main loop stands: the fault plan, a
// broker restart under way and the watch for a wedged coordinator.
type loopState struct {
	next          int       // the plan's next fault
	lastFault     time.Time // when the last fault fired
	consumedFault int64     // consumed when the last fault fired
	eligibleAt    time.Time // when the next fault may fire, once it is due
	brokerBusy    bool      // a broker restart is under way
	brokerDone    chan error
	wedge         wedgeWatch
	wedged        chan wedgeProbe
	wedgeRestart  bool // the restart under way ends a wedge
	deadline      time.Time
	// lastDrainCheck and lastWaitEvent pace and report the check of the
	// repartition topic once the input is consumed.
	lastDrainCheck, lastWaitEvent time.Time
}

// announce reports what the run is about to do.
func (r *run) announce() {
	o, res := r.o, &r.res
	if len(o.Scale) > 0 {
		r.event("writing up to %d records over %d partitions into %s at %d records/s while the workers scale %v, %d sessions each, %s, %s group protocol",
			o.Records, o.Partitions, res.Input, o.InputRate, o.Scale, o.ProcessWorkers, o.Guarantee, cmp.Or(o.GroupProtocol, config.GroupProtocolClassic))
	} else {
		r.event("seeded %d records over %d partitions into %s; %d workers, %s, %d faults planned, rate %d records/s per worker",
			o.Records, o.Partitions, res.Input, o.Workers, o.Guarantee, len(r.plan), res.Rate)
	}
	if r.ev != nil {
		r.event("pipeline %s with %s state; each worker keeps its stores in %s, across its restarts, removed at the end; %s",
			o.Pipeline, o.State, filepath.Join(r.stateDir, "<worker>"), r.ev.describe())
	}
	if r.counting {
		r.event("pipeline %s with %s state, changelog %s; each worker keeps its stores in %s, across its restarts, removed at the end",
			o.Pipeline, o.State, res.Changelog, filepath.Join(r.stateDir, "<worker>"))
	}
	if r.grouped {
		r.event("counting by value through the repartition topic %s; the input's keys are unique, so every counting key is spread over all input partitions",
			res.Repartition)
	}
}

// startWorkers starts the first workers, or the first step of a scale
// run.
func (r *run) startWorkers() error {
	workers := r.o.Workers
	if len(r.o.Scale) > 0 {
		var err error
		if r.sc, err = startScale(r.o, r.fl, r.cl, r.app, r.res.Input, &r.res, r.event); err != nil {
			return err
		}
		r.atEnd(func() { r.res.Steps = r.sc.end(&r.res) })
		workers = 0 // started by the first step
	}
	for range workers {
		if _, err := r.fl.add(); err != nil {
			return err
		}
		r.res.WorkerStarts++
	}
	return nil
}

// loop runs the workers under the fault plan until the group has
// consumed the input or Options.Duration is over.
func (r *run) loop(ctx context.Context) error {
	r.consumedFault = -1
	r.brokerDone = make(chan error, 1)
	r.wedge = wedgeWatch{after: wedgeAfter}
	r.wedged = make(chan wedgeProbe, 1)
	r.deadline = r.began.Add(r.o.Duration)
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		if err := r.wait(ctx, tick.C); err != nil {
			return err
		}
		now := time.Now()
		if err := r.tend(now); err != nil {
			return err
		}
		c := r.consumed.Load()
		r.noteRecovery(now, c)
		r.watch(now, c)
		if r.drained(ctx, now, c) || r.timedOut(now) {
			return nil
		}
		r.injectDue(ctx, now, c)
	}
}

// wait waits for the next tick, the end of a broker restart or the
// report of a wedge probe, and handles the latter two.
func (r *run) wait(ctx context.Context, tick <-chan time.Time) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case err := <-r.brokerDone:
		return r.brokerBack(err)
	case p := <-r.wedged:
		r.probed(ctx, p)
	case o := <-r.nw.done:
		r.netBack(o)
	case <-tick:
	}
	return nil
}

// brokerBack notes the end of a broker restart; err is its failure.
func (r *run) brokerBack(err error) error {
	r.brokerBusy = false
	r.fl.brokerUp(time.Now())
	if err != nil {
		return err
	}
	if !r.wedgeRestart {
		r.res.BrokerRestarts++
	}
	r.wedgeRestart = false
	r.event("broker is back")
	return nil
}

// probed restarts the broker, as an operator would, when probe p found
// the group's coordinator wedged and nothing moved while it probed.
func (r *run) probed(ctx context.Context, p wedgeProbe) {
	r.wedge.probed(time.Now())
	if p.why != "" && !r.brokerBusy && r.consumed.Load() == p.consumed && r.res.BrokerRestarts == p.restarts && r.res.WedgeRestarts < maxWedgeRestarts {
		r.event("the group committed nothing for %s and %s; restarting the broker, as an operator would", wedgeAfter, p.why)
		r.wedgeRestart = r.fire(ctx, fault{kind: faultBrokerRestart})
		r.res.WedgeRestarts++
	}
}

// tend reaps the workers that exited, restarts those due and moves a
// scale run on.
func (r *run) tend(now time.Time) error {
	r.res.AbortedTransactions += r.fl.reapExited(&r.res, r.event, true)
	r.fl.noteFirstCommits(r.event)
	if r.fl.fatal != nil {
		return r.fl.fatal
	}
	for id, at := range r.fl.pending {
		// A worker started while the broker is down fails fast by
		// design (Run's start-up check); running ones ride it out.
		if now.After(at) && !r.brokerBusy {
			if err := r.fl.start(id); err != nil {
				return err
			}
			r.res.WorkerStarts++
		}
	}
	if r.sc != nil {
		n, ends, fed, err := r.sc.tick(r.fl, &r.res, r.event)
		if err != nil {
			return err
		}
		if fed {
			r.o.Records = n // the run ends once the group committed them all
			go pollConsumed(r.pctx, r.adm, r.app, ends, &r.consumed)
		}
	}
	return nil
}

// watch probes the group's coordinator when the group has committed
// nothing for a while, and reports progress; c is consumed.
func (r *run) watch(now time.Time, c int64) {
	if r.o.BrokerRestartCmd != "" && r.sc == nil && r.wedge.observe(now, c, r.brokerBusy || r.nw.busy) {
		restarts := r.res.BrokerRestarts
		go func() { r.wedged <- wedgeProbe{unservedGroup(r.pctx, r.adm, r.app, coordinatorProbe), c, restarts} }()
	}
	if r.o.Progress != nil {
		r.report.Lock()
		defer r.report.Unlock()
		r.o.Progress(Progress{
			Records: r.o.Records, Consumed: int(c), LiveRead: int(r.live.read.Load()),
			Kills: r.res.WorkerKills, BrokerRestarts: r.res.BrokerRestarts,
			Faults: r.next, FaultsPlanned: len(r.plan), Elapsed: time.Since(r.start),
		})
	}
}

// drained reports whether the group has consumed every input record, c
// of them so far, and counting by value every record of the repartition
// topic too, with no broker restart under way.
func (r *run) drained(ctx context.Context, now time.Time, c int64) bool {
	if c < int64(r.o.Records) || r.brokerBusy || r.nw.busy {
		return false
	}
	if !r.grouped {
		r.event("the group committed every input offset")
		return true
	}
	// Records sit in the repartition topic between the two
	// sub-topologies: the run is over once the group has committed past
	// every committed record there too.
	if now.Sub(r.lastDrainCheck) < time.Second {
		return false
	}
	r.lastDrainCheck = now
	dctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	left, why := repartitionLeft(dctx, r.adm, r.base, r.app, r.res.Repartition)
	cancel()
	if left == 0 && why == "" {
		r.event("the group committed every input offset and every record of %s", r.res.Repartition)
		return true
	}
	if why == "" {
		why = fmt.Sprintf("the group to consume %d records of %s", left, r.res.Repartition)
	}
	if now.Sub(r.lastWaitEvent) >= 10*time.Second {
		r.lastWaitEvent = now
		r.event("every input offset committed; waiting for %s", why)
	}
	return false
}

// timedOut reports whether Options.Duration is over.
func (r *run) timedOut(now time.Time) bool {
	if !now.After(r.deadline) {
		return false
	}
	r.res.TimedOut = true
	r.event("--duration %s is over; stopping", r.o.Duration)
	return true
}

// injectDue fires the plan's next fault once the group has consumed its
// share of the input, c records, and moved on since the last fault.
func (r *run) injectDue(ctx context.Context, now time.Time, c int64) {
	due := r.next < len(r.plan) && !r.brokerBusy && !r.nw.busy && r.nw.recovering < 0 && len(r.fl.pending) == 0 &&
		float64(c) >= r.plan[r.next].at*float64(r.o.Records) && c > r.consumedFault && now.Sub(r.lastFault) >= 500*time.Millisecond
	if !due {
		return
	}
	if r.eligibleAt.IsZero() {
		// A random moment, so kills land anywhere in a batch.
		r.eligibleAt = now.Add(time.Duration(r.rng.Int64N(int64(400 * time.Millisecond))))
	}
	if now.After(r.eligibleAt) && r.fire(ctx, r.plan[r.next]) {
		r.next++
		r.lastFault, r.consumedFault, r.eligibleAt = now, c, time.Time{}
	}
}

// fire injects f now, or reports false when no worker fits yet.
func (r *run) fire(ctx context.Context, f fault) bool {
	fl := r.fl
	switch f.kind {
	case faultKill, faultTerm:
		ids := fl.running(time.Second)
		if len(ids) == 0 {
			return false
		}
		slices.Sort(ids)
		id := ids[r.rng.IntN(len(ids))]
		pid := fl.procs[id].cmd.Process.Pid
		if f.kind == faultKill {
			fl.signal(id, syscall.SIGKILL, intentKill)
			r.res.WorkerKills++
			r.event("SIGKILL %s (pid %d) while it works", id, pid)
		} else {
			fl.signal(id, syscall.SIGTERM, intentTerm)
			r.res.WorkerTerms++
			r.event("SIGTERM %s (pid %d)", id, pid)
		}
	case faultAddWorker:
		id, err := fl.add()
		if err != nil {
			r.event("adding a worker failed: %v", err)
			return false
		}
		r.res.WorkersAdded++
		r.res.WorkerStarts++
		r.event("added %s: rebalance", id)
	case faultRemoveWorker:
		ids := fl.committing()
		if len(ids) < 2 {
			return false
		}
		slices.SortFunc(ids, func(a, b string) int { return workerNum(b) - workerNum(a) })
		fl.signal(ids[0], syscall.SIGTERM, intentRemove)
		r.res.WorkersRemoved++
		r.event("removing %s for good: rebalance", ids[0])
	case faultNetCut, faultPause, faultCoordinatorCut:
		return r.fireNet(ctx, f)
	case faultBrokerRestart:
		r.brokerBusy = true
		fl.brokerDown(time.Now())
		r.event("hard-restarting the broker")
		go func() { r.brokerDone <- r.br.restart(ctx) }()
	}
	return true
}

// stopWorkers stops the workers once the loop is over, and notes what
// the run injected and what the live reader saw.
func (r *run) stopWorkers(ctx context.Context) {
	res := &r.res
	if r.nw.busy {
		r.nw.cancel() // the run timed out while a network fault held
		r.netBack(<-r.nw.done)
	}
	res.FaultsNotInjected = len(r.plan) - r.next
	if res.TimedOut {
		res.UnservedGroup = unservedGroup(ctx, r.adm, r.app, coordinatorProbe)
	}
	if r.sc != nil {
		res.Steps = r.sc.end(res)
	}
	r.fl.stopAll(stopGrace)
	res.AbortedTransactions += r.fl.reapExited(res, r.event, false)
	res.RestartToFirstCommit = r.fl.restartLatency()
	r.stopProgress()
	r.live.finish(2*time.Second, 2*time.Minute)
	res.LiveRead, res.LiveDuplicates = int(r.live.read.Load()), int(r.live.dups.Load())
}

// probe runs the pipeline's probe phase once the loop is over (see
// prober), tending the workers meanwhile as the loop does: one that
// stops on an injected error is restarted. No fault fires. A run that
// timed out probes nothing, and the phase ends with Options.Duration.
func (r *run) probe(ctx context.Context) error {
	p, ok := r.ev.(prober)
	if !ok || r.res.TimedOut {
		return nil
	}
	pctx, cancel := context.WithDeadline(ctx, r.deadline)
	done := make(chan struct{})
	go func() {
		defer close(done)
		p.probe(pctx, r.res.Input, r.res.Output)
	}()
	stop := func() { cancel(); <-done }
	defer stop()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-done:
			return nil
		case <-tick.C:
		}
		now := time.Now()
		if err := r.tend(now); err != nil {
			return err
		}
		if r.timedOut(now) {
			return nil
		}
	}
}
