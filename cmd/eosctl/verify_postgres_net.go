package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"time"

	"github.com/eosflow/eosflow/tools/chaos"
)

// The network faults of verify --sink, as the plan names them: the
// verifier's kinds, made through the same harness.
const (
	pgNetCut         = "net-cut"
	pgPause          = "pause"
	pgCoordinatorCut = "coordinator-cut"
)

// openNet checks the network harness when the run plans network faults;
// close makes the cluster whole again.
func (r *pgRun) openNet() (close func(), err error) {
	v := r.v
	if v.netCuts+v.pauses+v.coordinatorCuts == 0 {
		return func() {}, nil
	}
	if v.netCmd == "" || len(r.external) == 0 { // verifySink refuses it first
		return nil, usageErrorf("%v", chaos.ErrNoNetCluster)
	}
	r.net, err = chaos.OpenNetHarness(r.ctx, v.netCmd, v.netDir, r.external, os.Stderr)
	if err != nil {
		return nil, err
	}
	return func() {
		if err := r.net.WholeAgain(); err != nil {
			r.say("making the cluster whole again: %v", err)
		}
	}, nil
}

// fireNet makes network fault kind through the harness, holds it, undoes
// it, and times the table's first growth after it. A group-coordinator
// cut stands for both coordinator kinds: the sink commits no Kafka
// transaction, so it has no transaction coordinator to cut.
func (r *pgRun) fireNet(kind string) {
	v := r.v
	nf := chaos.NetFault{Kind: kind, Node: 1 + rand.IntN(r.net.Nodes()), RecoveryMs: -1}
	hold := v.cutFor
	switch kind {
	case pgNetCut:
		nf.Action = chaos.NetCutActions[r.cutTurn%len(chaos.NetCutActions)]
		r.cutTurn++
	case pgPause:
		nf.Action, hold = "pause", v.pauseFor
	case pgCoordinatorCut:
		nf.Action, nf.Node, nf.Key = "cut-coordinator group", 0, r.group
	}
	ctx, cancel := context.WithDeadline(r.ctx, r.deadline)
	defer cancel()
	f, healed, rows := r.net.Hold(ctx, nf, chaos.NetHold{For: hold, Start: r.start, Progress: r.rows, Event: r.say})
	if !f.Fired {
		r.say("%s on broker %d failed: %s", f.Action, f.Node, f.Error)
	} else {
		r.say("%s on broker %d undone after %s; %d rows were written meanwhile",
			f.Action, f.Node, time.Duration(f.HeldMs)*time.Millisecond, f.ConsumedDuring)
		f.RecoveryMs = r.recovery(ctx, f, healed, rows)
		r.countNet(kind)
	}
	r.res.NetFaults = append(r.res.NetFaults, f)
}

// countNet counts a network fault that fired.
func (r *pgRun) countNet(kind string) {
	switch kind {
	case pgNetCut:
		r.res.NetCuts++
	case pgPause:
		r.res.Pauses++
	case pgCoordinatorCut:
		r.res.CoordinatorCuts++
	}
}

// recovery is the time from healed to the table's first growth past
// rows, read every 250ms; -1 when every record was in already, or when
// none came before the run's --duration ran out, which then fails the
// run. Workers that stopped meanwhile are started again, as between
// faults.
func (r *pgRun) recovery(ctx context.Context, f chaos.NetFault, healed time.Time, rows int64) int64 {
	for ctx.Err() == nil {
		if n := r.rows(); n > rows {
			ms := time.Since(healed).Milliseconds()
			r.say("the table grew %dms after %s on broker %d was undone", ms, f.Action, f.Node)
			return ms
		}
		if r.done() {
			r.say("every record was in before %s on broker %d was undone: no recovery to measure", f.Action, f.Node)
			return -1
		}
		if err := r.restartDead(); err != nil {
			r.say("restarting workers: %v", err)
		}
		time.Sleep(250 * time.Millisecond)
	}
	r.say("the run ended %s after %s on broker %d was undone, before the table grew", time.Since(healed).Round(time.Millisecond), f.Action, f.Node)
	return -1
}

// rows counts the table's rows, the progress a network fault is judged
// by; the last count when the database does not answer within 5s.
func (r *pgRun) rows() int64 {
	ctx, cancel := context.WithTimeout(r.ctx, 5*time.Second)
	defer cancel()
	var n int64
	if err := r.pool.QueryRow(ctx, "SELECT count(*) FROM "+r.table).Scan(&n); err == nil {
		r.lastRows = n
	}
	return r.lastRows
}

// netSummary is the network faults and recoveries of a result, for the
// verdict's line; "" without any.
func netSummary(res pgVerifyResult) string {
	if len(res.NetFaults) == 0 {
		return ""
	}
	parts := make([]string, 0, len(res.Recovery))
	for _, rc := range res.Recovery {
		parts = append(parts, rc.Action+": "+rc.String())
	}
	return fmt.Sprintf(", %d network cuts, %d pauses and %d coordinator cuts (%s)",
		res.NetCuts, res.Pauses, res.CoordinatorCuts, strings.Join(parts, "; "))
}
