package eos

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/eosflow/eosflow/config"
	"github.com/eosflow/eosflow/internal/engine"
	"github.com/eosflow/eosflow/state"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"
)

// streamLoop is a worker's loop: it polls, runs each batch of records
// through the engine and ends it under the guarantee (consume.go);
// between batches it restores the stores a batch left behind and fires
// due wall-clock timers (timer.go); at a session's start it settles a
// batch whose commit answer was lost (recovery.go). What it learns (the
// poll size, a batch in doubt, how long it has failed) outlives the
// sessions the supervisor makes; the services it uses are the Runner's.
type streamLoop struct {
	cfg        config.Config
	contract   contract
	log        *zap.Logger
	waits      waits
	proc       *engine.Engine
	state      *taskStores // nil without state stores
	changelogs *changelogReader
	globals    *globalTables // nil without global tables
	members    *membership
	hanging    *hangingRepair
	stall      *stallCheck
	metrics    *metrics // nil when metrics are off
	tracing    *tracing // nil without Tracing
	purge      *purger
	contexts   *recordContexts
	counts     *counters
	floor      *offsetFloor
	idleWake   *pollWake
	idle       *taskIdle // nil unless co-partitioned tasks may wait (max_task_idle)
	authz      *authz
	inputs     []string                               // the topics consumed: the sources' and the repartition topics
	beforeEnd  func(context.Context, BatchInfo) error // BeforeCommit, if given
	admin      func() *kgo.Client                     // preflight's client, once made
	mirror     func() *offsetsMirror                  // exactly-once: the offsets mirror, once preflight made it

	pollMax        int                 // records per poll, sized by adaptPollSize
	polled         time.Time           // when a poll last returned (staleFor)
	pending        *pendingBatch       // a batch whose commit outcome is unknown
	failingSince   time.Time           // first failure since the pipeline was last healthy; zero when healthy
	failingNow     atomic.Bool         // failingSince is set: sessions follow their records (unackedOutputs)
	slowSeen       *string             // record that last carried a batch past transaction_timeout
	rejects        rejections          // outputs the broker refused, and what to do about them
	restorePending map[state.Task]bool // tasks whose records wait for a restore
	timers         runnerTimers        // the topology's timers, found at start; see timer.go
	abortNoted     bool                // the current batch's abort was counted, under abortReason
	abortReason    abortReason
	revokesAtEnd   int64 // contexts.callbacks when the last End began (rewindRest)
	// flaggedAtEnd is contexts.revokes when the last End began: a batch
	// begun since is doomed by any revoke counted after it (see onRevoked).
	flaggedAtEnd int64
	unsettled    unsettledGroup // checks of the group that did not settle, for the log
}

// newStreamLoop is r's loop, over r's services.
func newStreamLoop(r *Runner) *streamLoop {
	return &streamLoop{cfg: r.cfg, contract: r.contract, log: r.log, waits: r.waits, proc: r.proc, state: r.state, changelogs: r.changelogs, globals: r.globals,
		members: r.members, hanging: r.hanging, stall: r.stall, metrics: r.metrics, tracing: r.tracing, purge: r.purge,
		contexts: &r.contexts, counts: &r.counts, floor: &r.floor, idleWake: &r.idleWake, authz: r.authz, inputs: r.inputs,
		beforeEnd: r.beforeEnd, admin: func() *kgo.Client { return r.admin }, mirror: func() *offsetsMirror { return r.mirror },
		rejects: newRejections(r), idle: newTaskIdle(r)}
}

// healthy records a commit, or an idle check that found the brokers
// answering and nothing waiting: failures from here start a new
// recovery_timeout.
func (l *streamLoop) healthy() {
	l.failingSince = time.Time{}
	l.failingNow.Store(false)
	l.stall.stalls = 0
	l.slowSeen = nil
}

// failing returns how long the pipeline has been failing, starting the
// clock at the first failure after it was healthy.
func (l *streamLoop) failing() time.Duration {
	if l.failingSince.IsZero() {
		l.failingSince = time.Now()
		l.failingNow.Store(true)
	}
	return time.Since(l.failingSince)
}

// noteAbort counts a batch that did not commit, under its reason.
func (l *streamLoop) noteAbort(reason abortReason) {
	l.counts.aborted.Add(1)
	l.abortNoted, l.abortReason = true, reason
	if m := l.metrics; m != nil {
		m.aborts[reason].Inc()
	}
}
