package eos

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/eosflow/eosflow/internal/store"

	"github.com/eosflow/eosflow/internal/engine"
	"github.com/eosflow/eosflow/state"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"
)

// runnerTimers is what the runtime knows of the topology's timers
// (processor.Schedule), found once the processors' Init ran.
type runnerTimers struct {
	stream bool     // some node has stream-time timers
	wall   []string // topics whose tasks have wall-clock timers
	next   time.Time
}

// findTimers reads the timers the processors of proc scheduled in Init;
// a topology without state stores has none.
func findTimers(proc *engine.Engine, stores bool) runnerTimers {
	if !stores {
		return runnerTimers{}
	}
	return runnerTimers{stream: proc.HasStreamTimers(), wall: proc.WallClockSources()}
}

// streamTime advances the stream time of rec's task after rec settled
// (processed, dead-lettered or skipped), and fires the stream-time timers
// it passed, in the batch: their effects commit with rec's offset, or are
// redone with it.
func (b *batch) streamTime(rec *kgo.Record) {
	if !b.l.timers.stream {
		return
	}
	outcome, err := b.l.proc.StreamTime(rec, b.beginUpdate, b.emit, b.endUpdate)
	b.cur = nil
	b.timerOutcome(outcome, err)
}

// wallClock fires the wall-clock timers due now of the tasks this instance
// owns (see timerTasks), whose stores are ready, at the end of the batch,
// so that they commit in its transaction. It reports whether the batch may still commit.
// Under exactly-once, a batch that saw a revoke is doomed: the timers fire
// in the next one, for the tasks still owned.
func (b *batch) wallClock() bool {
	l := b.l
	if len(l.timers.wall) == 0 || b.failed != nil {
		return true
	}
	if b.revokedSince() {
		return true
	}
	now := time.Now()
	ready, _, _ := l.state.timerTasks(l.timers.wall, b.s)
	for _, task := range ready {
		next, ok, err := l.proc.NextWallClock(task, func(name string) (*store.Store, error) { return l.state.peek(name, task) })
		if err != nil {
			b.failed = fmt.Errorf("eos: reading the timer state of task %s: %w", task, err)
			return false
		}
		if !ok || now.Before(next) {
			continue
		}
		n, outcome, err := l.proc.WallClock(task, now, b.beginUpdate, b.emit, b.endUpdate)
		b.cur = nil
		b.fired += n
		if !b.timerOutcome(outcome, err) {
			return false
		}
	}
	return true
}

// timerTasks lists the ready tasks whose wall-clock timers may fire on s.
// Under exactly-once, those are the tasks whose partition the client holds
// a committed offset for, with those offsets (heldTasks), and whether a
// task waits for its offset; the other sessions fire for every task the
// runtime owns.
func (ts *taskStores) timerTasks(wall []string, s session) ([]state.Task, map[string]map[int32]kgo.EpochOffset, bool) {
	ready, _ := ts.ownedOf(wall)
	if _, ok := s.(*txnSession); !ok {
		return ready, nil, false
	}
	n := len(ready)
	tasks, held := heldTasks(ready, s.client().CommittedOffsets())
	return tasks, held, len(tasks) < n
}

// heldTasks keeps the tasks of ready whose partition has an offset in
// held, the client's committed offsets, with those. franz-go's transact
// session passes on only the first revoke of a transaction, so the
// runtime's view of its tasks can keep one revoked since; the client
// drops a revoked partition's offsets whatever its callbacks passed on.
// A task whose partition has no committed offset waits for its first
// records to commit: nothing else could fence a transaction that fires
// its timers alone (the group's generation check, KIP-447).
func heldTasks(ready []state.Task, held map[string]map[int32]kgo.EpochOffset) ([]state.Task, map[string]map[int32]kgo.EpochOffset) {
	offsets := map[string]map[int32]kgo.EpochOffset{}
	tasks := ready[:0]
	for _, task := range ready {
		o, ok := held[task.Topic][task.Partition]
		if !ok || o.Offset < 0 {
			continue
		}
		tasks = append(tasks, task)
		if offsets[task.Topic] == nil {
			offsets[task.Topic] = map[int32]kgo.EpochOffset{}
		}
		offsets[task.Topic][task.Partition] = o
	}
	return tasks, offsets
}

// timerOutcome fails the batch after a timer firing that failed or was
// interrupted, and reports whether it may go on.
func (b *batch) timerOutcome(outcome engine.Outcome, err error) bool {
	switch outcome {
	case engine.Failed:
		b.failed = err
	case engine.Interrupted:
		if b.revokedSince() {
			b.revoked = true // a revoke came: the batch aborts, as any revoked batch
			return false
		}
		b.failed = &rebuildError{errors.New("a timer firing was interrupted (a shutdown, or a revoke outside exactly-once, ended its context); " +
			"the batch is aborted, and a new client redoes it from the committed offsets")}
	default:
		return true
	}
	return false
}

// restoreTimerTasks catches up the stores of owned tasks with wall-clock
// timers that are not ready: without records they would never be
// restored, and their timers never fire. Called between batches.
func (l *streamLoop) restoreTimerTasks(ctx context.Context) error {
	if len(l.timers.wall) == 0 {
		return nil
	}
	_, unready := l.state.ownedOf(l.timers.wall)
	if len(unready) == 0 {
		return nil
	}
	return l.changelogs.restore(ctx, unready)
}

// idleTimers runs a batch of its own for the wall-clock timers due while
// no records arrive: a transaction with the firings' outputs and
// changelog writes under exactly-once, produced and flushed otherwise. It
// reports whether it ran one and whether that committed.
//
// Such a transaction consumed nothing, so it would carry no offsets, and
// the group's generation check (KIP-447) would not fence an instance that
// lost its tasks without noticing. It therefore commits again the committed
// offsets of the tasks it fires for (see timerTasks).
func (l *streamLoop) idleTimers(ctx context.Context, s session, log *zap.Logger) (ran, committed bool, err error) {
	t := &l.timers
	if len(t.wall) == 0 || ctx.Err() != nil {
		return false, false, nil
	}
	if err := l.restoreTimerTasks(ctx); err != nil {
		return false, false, err
	}
	now := time.Now()
	t.next = now.Add(l.waits.idleCheck)
	ready, held, waiting := l.state.timerTasks(l.timers.wall, s)
	if waiting {
		// A task without a committed offset in the client: just assigned,
		// its offsets not fetched yet, or never committed. Look again
		// within a commit interval, not an idle check later.
		t.next = minTime(t.next, now.Add(l.cfg.CommitInterval))
	}
	var due []state.Task
	for _, task := range ready {
		next, ok, err := l.proc.NextWallClock(task, func(name string) (*store.Store, error) { return l.state.peek(name, task) })
		if err != nil {
			return false, false, fmt.Errorf("eos: reading the timer state of task %s: %w", task, err)
		}
		switch {
		case !ok:
		case now.Before(next):
			t.next = minTime(t.next, next)
		default:
			due = append(due, task)
		}
	}
	if len(due) == 0 {
		return false, false, nil
	}
	if ts, ok := s.(*txnSession); ok {
		fence := map[string]map[int32]kgo.EpochOffset{}
		for _, task := range due {
			if fence[task.Topic] == nil {
				fence[task.Topic] = map[int32]kgo.EpochOffset{}
			}
			fence[task.Topic][task.Partition] = held[task.Topic][task.Partition]
		}
		ts.fence = fence
	}
	committed, err = l.runTimerBatch(ctx, s, log)
	t.next = time.Now() // look for the next due timers at once
	return true, committed, err
}

// runTimerBatch is runBatch without records: the wall-clock timers fire
// when the batch decides.
func (l *streamLoop) runTimerBatch(ctx context.Context, s session, log *zap.Logger) (bool, error) {
	if err := s.begin(); err != nil {
		if isFenced(err) {
			return false, l.members.classifyFence(ctx, err, 0, s.client())
		}
		return false, &rebuildError{fmt.Errorf("begin transaction: %w", err)}
	}
	b := l.newBatch(ctx, s)
	defer b.stop()
	commit := b.decide()
	if b.fired == 0 && commit {
		commit = false // nothing was due after all (a revoke): nothing to commit
	}
	return b.end(commit, log)
}

// pollWait is how long an idle poll may wait: until the next wall-clock
// timer is due, at most idleCheck.
func (l *streamLoop) pollWait() time.Duration {
	d := l.waits.idleCheck
	if t := &l.timers; len(t.wall) > 0 {
		d = min(d, max(time.Millisecond, time.Until(t.next)))
	}
	return d
}

// fenceOffsets adds offsets to a TxnOffsetCommit that has none, so that a
// transaction of timer firings alone is checked against the group's
// generation like any other (see idleTimers). The offsets are the
// committed ones: committing them again moves nothing.
func fenceOffsets(req *kmsg.TxnOffsetCommitRequest, offsets map[string]map[int32]kgo.EpochOffset) {
	if len(req.Topics) > 0 {
		return
	}
	topics := make([]string, 0, len(offsets))
	for topic := range offsets {
		topics = append(topics, topic)
	}
	slices.Sort(topics)
	for _, topic := range topics {
		rt := kmsg.NewTxnOffsetCommitRequestTopic()
		rt.Topic = topic
		for p, o := range offsets[topic] {
			rp := kmsg.NewTxnOffsetCommitRequestTopicPartition()
			rp.Partition, rp.Offset, rp.LeaderEpoch, rp.Metadata = p, o.Offset, o.Epoch, &req.MemberID
			rt.Partitions = append(rt.Partitions, rp)
		}
		req.Topics = append(req.Topics, rt)
	}
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

// peek is the store called name of task as it stands, without taking
// part in a batch: for reading timer state between batches.
func (ts *taskStores) peek(name string, task state.Task) (*store.Store, error) {
	s := ts.open[task][name]
	if s == nil || !ts.ready[task] {
		return nil, fmt.Errorf("store %q of task %s is not open here", name, task)
	}
	return s, nil
}

// ownedOf lists the tasks of topics this instance owns, those whose stores
// are ready and those that must catch up first, each in a stable order.
func (ts *taskStores) ownedOf(topics []string) (ready, unready []state.Task) {
	ts.mu.Lock()
	for t := range ts.own {
		if !slices.Contains(topics, t.Topic) || ts.revoked[t] || ts.assigned[t] {
			continue
		}
		if ts.ready[t] {
			ready = append(ready, t)
		} else {
			unready = append(unready, t)
		}
	}
	ts.mu.Unlock()
	less := func(a, b state.Task) int {
		if a.Topic != b.Topic {
			if a.Topic < b.Topic {
				return -1
			}
			return 1
		}
		return int(a.Partition - b.Partition)
	}
	slices.SortFunc(ready, less)
	slices.SortFunc(unready, less)
	return ready, unready
}

// pollWake ends the poll the loop waits in, from a rebalance callback:
// an idle poll waits up to idleCheck, and the timers of tasks assigned
// meanwhile would wait as long.
type pollWake struct {
	mu     sync.Mutex
	cancel context.CancelFunc // of the current poll; nil between polls
	woken  bool               // a wake between polls, for the next poll
}

// set records the cancel of the poll about to start, or nil after it. A
// wake that came between polls ends the new poll at once: tasks assigned
// while no poll ran must not wait out a whole idle poll.
func (w *pollWake) set(cancel context.CancelFunc) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.cancel = cancel
	if cancel != nil && w.woken {
		w.woken = false
		cancel()
	}
}

// wake ends the current poll, or, between polls, the next one.
func (w *pollWake) wake() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.cancel != nil {
		w.cancel()
		return
	}
	w.woken = true
}
