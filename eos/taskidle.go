package eos

import (
	"time"

	"github.com/eosflow/eosflow/state"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"
)

// idleLoud is how long a task waits before its wait is logged at info.
const idleLoud = time.Second

// taskIdle decides whether a co-partitioned task (a join's) holds back
// the records it has while one of its partitions has none fetched
// (max_task_idle, Kafka Streams' max.task.idle.ms): processing them
// would run the join one side ahead of the other. Held records are left
// for the next batch, so a wait never holds a transaction open.
type taskIdle struct {
	max      time.Duration // max_task_idle
	lagBound time.Duration // the least bound of a wait for records known to be on the broker
	log      *zap.Logger
	counts   *counters
	members  map[string][]string // a task's topic: the topics of its group
	// end is the last stable offset the last fetch carried for a
	// partition; next the offset after its last record polled.
	end, next map[topicPartition]int64
	// since: when a task's wait began; enforced: its wait ran out and it
	// goes on without the partitions it lacks. A wait belongs to the task,
	// not to a partition: held records are rewound and come back in a
	// later poll, so the partitions of a task can have records in turn,
	// and a wait per partition would start afresh each time, for ever.
	since          map[state.Task]time.Time
	enforced, loud map[state.Task]bool
	batch          int64                // counts batches, to log each wait once per batch
	logged         map[state.Task]int64 // the batch a task's wait was last logged in
	gen            int32                // the group generation of the last batch
}

// newTaskIdle is r's task idling, nil without co-partitioned tasks or
// with a negative max_task_idle (never wait).
func newTaskIdle(r *Runner) *taskIdle {
	groups := r.proc.CoPartitioned()
	if len(groups) == 0 || r.state == nil || r.cfg.MaxTaskIdle < 0 {
		return nil
	}
	return makeTaskIdle(r.cfg.MaxTaskIdle, r.cfg.CommitInterval, groups, r.log, &r.counts)
}

// makeTaskIdle is the task idling of the co-partitioned groups (each
// named by its first topic).
func makeTaskIdle(maxIdle, lagBound time.Duration, groups [][]string, log *zap.Logger, counts *counters) *taskIdle {
	ti := &taskIdle{max: maxIdle, lagBound: lagBound, log: log, counts: counts,
		members: map[string][]string{}, end: map[topicPartition]int64{}, next: map[topicPartition]int64{},
		since:    map[state.Task]time.Time{},
		enforced: map[state.Task]bool{}, loud: map[state.Task]bool{}, logged: map[state.Task]int64{}}
	for _, g := range groups {
		ti.members[g[0]] = g
	}
	return ti
}

// observe notes what a fetch says of partition p: how far the broker has
// records for it, and how far they were polled.
func (ti *taskIdle) observe(p kgo.FetchTopicPartition) {
	if ti == nil || p.Err != nil {
		return
	}
	tp := topicPartition{p.Topic, p.Partition}
	if end := p.LastStableOffset; end >= 0 {
		ti.end[tp] = end
	} else if p.HighWatermark >= 0 {
		ti.end[tp] = p.HighWatermark
	}
	if n := len(p.Records); n > 0 {
		ti.next[tp] = p.Records[n-1].Offset + 1
	}
}

// rewound notes that the consumer goes back to rest.
func (ti *taskIdle) rewound(rest map[string]map[int32]kgo.EpochOffset) {
	if ti == nil {
		return
	}
	for topic, ps := range rest {
		for p, eo := range ps {
			ti.next[topicPartition{topic, p}] = eo.Offset
		}
	}
}

// lagging reports whether the broker is known to have records of tp
// past what was polled. Under read_committed one offset past the last
// record can be a transaction marker, never delivered: it does not count.
func (ti *taskIdle) lagging(tp topicPartition) bool {
	end, ok := ti.end[tp]
	next, polled := ti.next[tp]
	return ok && polled && end-next > 1
}

// hold reports whether task t, whose fetched records are runs (one per
// partition), waits for its partitions without records: while one is known
// to lag, up to max(max_task_idle, commit_interval) from the wait's start;
// otherwise up to max_task_idle. Past that the task goes on without them
// (counted as enforced) until it has records of every partition at once.
func (ti *taskIdle) hold(t state.Task, runs [][]*kgo.Record, now time.Time) bool {
	if ti == nil {
		return false
	}
	has := map[string]bool{}
	for _, run := range runs {
		if len(run) > 0 {
			has[run[0].Topic] = true
		}
	}
	if len(has) == 0 {
		return false
	}
	var missing []topicPartition
	for _, topic := range ti.members[t.Topic] {
		if !has[topic] {
			missing = append(missing, topicPartition{topic, t.Partition})
		}
	}
	if len(missing) == 0 {
		ti.forget(t)
		return false
	}
	return ti.waits(t, missing, now)
}

// waits reports whether t still waits for its partitions missing records.
func (ti *taskIdle) waits(t state.Task, missing []topicPartition, now time.Time) bool {
	tp, lag := missing[0], false
	for _, m := range missing {
		if ti.lagging(m) {
			tp, lag = m, true
			break
		}
	}
	bound := ti.max
	if lag {
		bound = max(ti.max, ti.lagBound)
	}
	if bound <= 0 {
		return false
	}
	start, ok := ti.since[t]
	if !ok {
		start, ti.since[t] = now, now
		ti.enforced[t], ti.loud[t] = false, false
		ti.counts.idleWaits.Add(1)
	}
	waited := now.Sub(start)
	if waited >= bound {
		if !ti.enforced[t] {
			ti.enforced[t] = true
			ti.counts.idleEnforced.Add(1)
			ti.note(t, tp, lag, waited, bound, "a co-partitioned task waited max_task_idle for a partition without fetched records; processing the records of its other partitions without it")
		}
		return false
	}
	if waited >= idleLoud && !ti.loud[t] {
		ti.loud[t] = true
		ti.note(t, tp, lag, waited, bound, "a co-partitioned task waits for a partition without fetched records before processing its other partitions (max_task_idle)")
	} else if b, ok := ti.logged[t]; !ok || b != ti.batch {
		ti.logged[t] = ti.batch
		if ce := ti.log.Check(zap.DebugLevel, "a co-partitioned task holds its records back for the next batch, waiting for a partition without fetched records (max_task_idle)"); ce != nil {
			ce.Write(ti.fields(t, tp, lag, waited, bound)...)
		}
	}
	return true
}

// note logs a wait that lasted long (at info), or one that ran out (at
// debug when it was short).
func (ti *taskIdle) note(t state.Task, tp topicPartition, lag bool, waited, bound time.Duration, msg string) {
	level := zap.DebugLevel
	if waited >= idleLoud {
		level = zap.InfoLevel
	}
	if ce := ti.log.Check(level, msg); ce != nil {
		ce.Write(ti.fields(t, tp, lag, waited, bound)...)
	}
}

// fields name the task, the partition waited for, and what is known of it.
func (ti *taskIdle) fields(t state.Task, tp topicPartition, lag bool, waited, bound time.Duration) []zap.Field {
	fs := []zap.Field{zap.Stringer("task", t), zap.String("topic", tp.topic), zap.Int32("partition", tp.partition),
		zap.Bool("known_on_broker", lag), zap.Duration("waited", waited.Round(time.Millisecond)),
		zap.Duration("bound", bound), zap.Duration("max_task_idle", ti.max)}
	if end, ok := ti.end[tp]; ok {
		fs = append(fs, zap.Int64("last_stable_offset", end))
	}
	if next, ok := ti.next[tp]; ok {
		fs = append(fs, zap.Int64("position", next))
	}
	return fs
}

// forget ends t's wait: it has records of every partition.
func (ti *taskIdle) forget(t state.Task) { delete(ti.since, t) }

// newBatch starts a batch: each wait is logged once per batch. After a
// rebalance (a new generation) or an aborted batch, what was known of the
// partitions is stale (an assignment may have come back, an abort rewound
// the consumer to its committed offsets): waits and positions start
// afresh.
func (ti *taskIdle) newBatch(gen int32, aborted bool) {
	if ti == nil {
		return
	}
	ti.batch++
	if gen != ti.gen || aborted {
		ti.gen = gen
		clear(ti.end)
		clear(ti.next)
		clear(ti.since)
		clear(ti.enforced)
		clear(ti.loud)
	}
}

// capHeld ends the batch's polling once the records held for waiting
// tasks, with those taken, reach the record cap or the byte cap: held
// records are in memory as much as taken ones.
func (b *batch) capHeld(limit int) {
	if len(b.held) == 0 {
		return
	}
	n, size := 0, int64(0)
	for _, runs := range b.held {
		for _, run := range runs {
			n += len(run)
			for _, rec := range run {
				size += recordBytes(rec)
			}
		}
	}
	if b.in+n >= limit || b.maxBytes > 0 && b.bytes+size >= b.maxBytes {
		b.cut.Store(true)
	}
}

// leaveHeld leaves the records still held for the next batch.
func (b *batch) leaveHeld() {
	for t, runs := range b.held {
		for _, run := range runs {
			if len(run) > 0 {
				b.leave(run[0])
			}
		}
		delete(b.held, t)
	}
}
