package eos

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/eosflow/eosflow/internal/graph"
	"github.com/eosflow/eosflow/internal/kafkautil"
	"github.com/eosflow/eosflow/state"
	"github.com/eosflow/eosflow/topology"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/plugin/kzap"
	"go.uber.org/zap"
)

// taskStores keeps the state stores of the tasks this instance runs. A task
// (an input partition) is ready once its stores caught up with their
// changelogs since it was last assigned; its records wait until then. A
// batch's writes stay in the stores' overlays: their last value per key goes
// to the changelog inside the batch's transaction, and only a committed
// batch applies them (Commit); any other outcome drops them (Abort) and has
// the task restored from the changelog, which says what committed.
type taskStores struct {
	specs     []graph.Store
	bySource  map[string][]graph.Store // stores whose tasks are a source topic's partitions
	taskTopic map[string]string        // co-partitioned topics: the topic naming their tasks
	dir       string
	appID     string
	log       *zap.Logger

	open  map[state.Task]map[string]*state.Store
	ready map[state.Task]bool
	dirty map[*state.Store]state.Task // written in the current batch
	last  map[*state.Store]*kgo.Record
	// Savepoints per record: the stores the current record reached, each
	// marked once, so that a record that fails leaves no writes behind.
	seq     uint64
	markSeq map[*state.Store]uint64
	touched []*state.Store

	// sized are the open stores, for the store-size metric, which reads
	// them from scrapes: a store leaves it before it closes.
	sizeMu sync.Mutex
	sized  map[*state.Store]bool

	mu            sync.Mutex
	own           map[state.Task]bool // assigned to this instance now
	assigned      map[state.Task]bool // since the last batch: must catch up first
	revoked       map[state.Task]bool // since the last batch: close after it
	allNeedReload bool                // a new client: every task catches up
}

func newTaskStores(specs []graph.Store, taskTopic map[string]string, dir, appID string, log *zap.Logger) *taskStores {
	ts := &taskStores{specs: specs, bySource: map[string][]graph.Store{}, taskTopic: taskTopic, dir: dir, appID: appID, log: log,
		open: map[state.Task]map[string]*state.Store{}, ready: map[state.Task]bool{},
		dirty: map[*state.Store]state.Task{}, last: map[*state.Store]*kgo.Record{}, markSeq: map[*state.Store]uint64{},
		own: map[state.Task]bool{}, assigned: map[state.Task]bool{}, revoked: map[state.Task]bool{}}
	for _, s := range specs {
		ts.bySource[s.Source] = append(ts.bySource[s.Source], s)
	}
	return ts
}

// assign and revoke note rebalances; franz-go calls them from its
// callbacks, the batch loop acts on them between batches.
func (ts *taskStores) assign(got map[string][]int32) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	for topic, parts := range got {
		for _, p := range parts {
			t := ts.task(topic, p)
			ts.assigned[t], ts.revoked[t], ts.own[t] = true, false, true
		}
	}
}

func (ts *taskStores) revoke(gone map[string][]int32) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	for topic, parts := range gone {
		for _, p := range parts {
			t := ts.task(topic, p)
			ts.revoked[t] = true
			delete(ts.own, t)
		}
	}
}

// reload makes every task catch up before its next record: a new client
// may have been given partitions another instance wrote meanwhile.
func (ts *taskStores) reload() {
	ts.mu.Lock()
	ts.allNeedReload = true
	ts.mu.Unlock()
}

// sync applies the rebalances noted since the last batch; called between
// batches, with no transaction open.
func (ts *taskStores) sync() {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if ts.allNeedReload {
		clear(ts.ready)
		ts.allNeedReload = false
	}
	for t := range ts.assigned {
		delete(ts.ready, t)
	}
	clear(ts.assigned)
	for t, gone := range ts.revoked {
		if gone {
			ts.closeTask(t)
		}
	}
	clear(ts.revoked)
}

func (ts *taskStores) closeTask(t state.Task) {
	for name, s := range ts.open[t] {
		delete(ts.markSeq, s)
		s.Abort()
		ts.track(s, false)
		if err := s.Close(); err != nil {
			ts.log.Warn("closing a state store", zap.String("store", name), zap.Stringer("task", t), zap.Error(err))
		}
	}
	delete(ts.open, t)
	delete(ts.ready, t)
}

// owned keeps the tasks this instance is assigned now: a record fetched
// before its partition was revoked needs no restore.
func (ts *taskStores) owned(tasks []state.Task) []state.Task {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	out := tasks[:0]
	for _, t := range tasks {
		if ts.own[t] {
			out = append(out, t)
		}
	}
	return out
}

// task is the task of partition p of topic: of the topic itself, or of
// the first topic of its co-partitioned group.
func (ts *taskStores) task(topic string, p int32) state.Task {
	if t, ok := ts.taskTopic[topic]; ok {
		topic = t
	}
	return state.Task{Topic: topic, Partition: p}
}

// unready lists, in order, the tasks assigned here whose stores have not
// caught up since they were last assigned (or since an abort or a new
// client): the batch loop restores them all before a batch begins, rather
// than each when its first record turns up, which would cost a batch per
// task, and one that commits empty when that record comes first.
func (ts *taskStores) unready() []state.Task {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	var out []state.Task
	for t := range ts.own {
		if len(ts.bySource[t.Topic]) > 0 && !ts.ready[t] {
			out = append(out, t)
		}
	}
	slices.SortFunc(out, func(a, b state.Task) int {
		return cmp.Or(strings.Compare(a.Topic, b.Topic), cmp.Compare(a.Partition, b.Partition))
	})
	return out
}

// needs reports whether rec's task has stores that have not caught up.
func (ts *taskStores) needs(rec *kgo.Record) bool {
	t := ts.task(rec.Topic, rec.Partition)
	if len(ts.bySource[t.Topic]) == 0 {
		return false
	}
	return !ts.ready[t]
}

// store is the engine's Stores hook: the store called name of task, marked
// as written by the batch.
func (ts *taskStores) store(name string, task state.Task) (*state.Store, error) {
	s := ts.open[task][name]
	if s == nil || !ts.ready[task] {
		return nil, fmt.Errorf("store %q of task %s is not open here; it is read by nodes fed by another topic", name, task)
	}
	ts.dirty[s] = task
	if ts.markSeq[s] != ts.seq {
		s.Mark()
		ts.markSeq[s] = ts.seq
		ts.touched = append(ts.touched, s)
	}
	return s, nil
}

// beginRecord starts a record: its writes can be undone alone.
func (ts *taskStores) beginRecord() {
	ts.seq++
	ts.touched = ts.touched[:0]
}

// failRecord undoes the writes of a record that was not processed
// (dead-lettered, skipped, interrupted or failed), while the batch's other
// writes stay.
func (ts *taskStores) failRecord() {
	for _, s := range ts.touched {
		s.Rollback()
	}
	ts.touched = ts.touched[:0]
}

// produceChanges hands each written store's last value per key to the
// producer, for its changelog partition, inside the batch's transaction.
func (ts *taskStores) produceChanges(produce func(*kgo.Record)) {
	for s, task := range ts.dirty {
		topic := topology.ChangelogTopic(ts.appID, s.Name())
		for _, w := range s.Changes() {
			rec := &kgo.Record{Topic: topic, Partition: task.Partition, Key: w.Key, Value: w.Value}
			produce(rec)
			ts.last[s] = rec
		}
	}
}

// maxUnchecked bounds the batches a store applies on End's word before
// its task reads them back from the changelog (see Runner.restore): what
// a store writes with each batch, and what a restore at open must check.
const maxUnchecked = 512

// committed applies the batch's overlays, each with the changelog offset
// it reached; a store that fails to is restored before its next record,
// and so is one whose unchecked batches reached maxUnchecked, which the
// restore reads back.
func (ts *taskStores) committed() {
	for s, task := range ts.dirty {
		rec := ts.last[s]
		if rec == nil {
			s.Abort() // read, not written
			continue
		}
		if ce := ts.log.Check(zap.DebugLevel, "applying a committed batch to its state store"); ce != nil {
			ce.Write(zap.String("store", s.Name()), zap.Stringer("task", task), zap.Int64("from_offset", s.Offset()), zap.Int64("to_offset", rec.Offset))
		}
		if err := s.Commit(rec.Offset); err != nil {
			ts.log.Warn("applying a committed batch to its state store failed; restoring it from its changelog",
				zap.String("store", s.Name()), zap.Stringer("task", task), zap.Error(err))
			s.Abort()
			delete(ts.ready, task)
		} else if len(s.Position().Unchecked) >= maxUnchecked {
			delete(ts.ready, task)
		}
	}
	clear(ts.dirty)
	clear(ts.last)
}

// aborted drops the batch's overlays. The tasks catch up from their
// changelogs before their next record, since a batch whose outcome was
// unknown may have committed.
func (ts *taskStores) aborted() {
	for s, task := range ts.dirty {
		s.Abort()
		delete(ts.ready, task)
	}
	clear(ts.dirty)
	clear(ts.last)
}

// closeAll closes every store; Run calls it when it returns.
// track adds an opened store to, or removes a closing one from, what the
// store-size metric reads.
func (ts *taskStores) track(s *state.Store, open bool) {
	ts.sizeMu.Lock()
	defer ts.sizeMu.Unlock()
	if ts.sized == nil {
		ts.sized = map[*state.Store]bool{}
	}
	if open {
		ts.sized[s] = true
	} else {
		delete(ts.sized, s)
	}
}

// sizes sums, per store name, the bytes its open tasks hold, over the
// stores whose engines can tell.
func (ts *taskStores) sizes() map[string]int64 {
	ts.sizeMu.Lock()
	defer ts.sizeMu.Unlock()
	out := map[string]int64{}
	for s := range ts.sized {
		if n, ok, err := s.SizeBytes(); ok && err == nil {
			out[s.Name()] += n
		}
	}
	return out
}

func (ts *taskStores) closeAll() {
	for t := range ts.open {
		ts.closeTask(t)
	}
}

// restore opens and catches up the stores of tasks, reading their
// changelogs read_committed from each store's offset to the changelog's
// last stable offset, as it was when the restore began. It holds no
// transaction open, however long it takes.
//
// A store is trusted only once every batch it applied has been read back
// as committed: a batch is applied after EndTxn reports a commit, but a
// broker that restarts before writing the commit's markers can skip them
// (Apache Kafka logs "Couldn't find leader endpoint ... these partitions
// are likely deleted already and hence can be skipped"), and the repair
// of the hanging transaction then aborts the batch, after later batches
// committed. The store keeps, with its data, the offset it was read back
// to and the last changelog offset of each batch applied since (see
// state.Position); the restore reads from the first of those, and each
// must be delivered read_committed. A store holding a batch the changelog
// does not would count that batch's input twice once it is redone; it is
// wiped and restored in full instead. Aborted records the store never
// applied (batches End reported aborted) are not among them, and wipe
// nothing.
func (r *Runner) restore(ctx context.Context, tasks []state.Task) error {
	if len(tasks) == 0 {
		return nil
	}
	for {
		err := r.restoreOnce(ctx, tasks)
		if !errors.Is(err, errRestoreAgain) {
			return err
		}
	}
}

// errRestoreAgain: a store was wiped during a restore, which starts over.
var errRestoreAgain = errors.New("restore again")

func (r *Runner) restoreOnce(ctx context.Context, tasks []state.Task) error {
	targets, topics, err := r.restoreTargets(tasks)
	if err != nil {
		return err
	}
	// The target is the high watermark, not the last stable offset: a
	// previous owner's committed batch whose marker has not reached the
	// changelog yet sits above the LSO, and must not be missed. Reading
	// read_committed waits at an open transaction until it ends.
	starts, ends, err := r.changelogBounds(ctx, topics)
	if err != nil {
		return err
	}
	consume := map[string]map[int32]kgo.Offset{}
	remaining := 0
	for topic, ps := range targets {
		for p, tg := range ps {
			if err := r.startTarget(ctx, tg, topic, p, starts, ends); err != nil {
				return err
			}
			if tg.done {
				continue
			}
			if consume[topic] == nil {
				consume[topic] = map[int32]kgo.Offset{}
			}
			consume[topic][p] = kgo.NewOffset().At(tg.pos)
			remaining++
		}
	}
	if remaining > 0 {
		if err := r.readChangelogs(ctx, consume, targets, remaining); err != nil {
			return err
		}
		if ctx.Err() != nil {
			return nil // shutting down: the tasks stay unrestored
		}
	}
	for _, t := range tasks {
		r.state.ready[t] = true
	}
	return nil
}

// restoreTargets opens the stores of tasks that are not open, and lists
// them per changelog topic and partition, with the topics in order.
func (r *Runner) restoreTargets(tasks []state.Task) (map[string]map[int32]*restoreTarget, []string, error) {
	ts := r.state
	targets := map[string]map[int32]*restoreTarget{}
	var topics []string
	for _, t := range tasks {
		if ts.open[t] == nil {
			ts.open[t] = map[string]*state.Store{}
		}
		for _, spec := range ts.bySource[t.Topic] {
			s := ts.open[t][spec.Name]
			if s == nil {
				var err error
				if s, err = state.Open(spec.Engine, ts.dir, spec.Name, t); err != nil {
					return nil, nil, fmt.Errorf("eos: opening state store %q of task %s in %s: %w", spec.Name, t, ts.dir, err)
				}
				ts.open[t][spec.Name] = s
				ts.track(s, true)
			}
			topic := topology.ChangelogTopic(ts.appID, spec.Name)
			if targets[topic] == nil {
				targets[topic] = map[int32]*restoreTarget{}
				topics = append(topics, topic)
			}
			targets[topic][t.Partition] = &restoreTarget{store: s, task: t}
		}
	}
	return targets, topics, nil
}

// startTarget sets where tg's restore from topic/p starts and ends: at
// the changelog's end, from the store's first unchecked batch if it has
// one (they are read back first, see restore), else past what it
// applied. A store caught up already is done.
func (r *Runner) startTarget(ctx context.Context, tg *restoreTarget, topic string, p int32, starts, ends kadm.ListedOffsets) error {
	o, ok := ends.Lookup(topic, p)
	if !ok {
		return fmt.Errorf("eos: changelog %s has no partition %d; its partition count must equal the input's (inspect with `eosctl topic describe %s`)", topic, p, topic)
	}
	tg.end = o.Offset
	start, _ := starts.Lookup(topic, p)
	if err := r.wipeIfBehind(tg, topic, start.Offset); err != nil {
		return err
	}
	if err := r.wipeIfLogLost(ctx, tg, topic); err != nil {
		return err
	}
	at := tg.store.Position()
	from := max(at.Offset+1, start.Offset)
	if from > tg.end {
		return fmt.Errorf("eos: state store %q of task %s has applied changelog offset %d, but %s/%d ends at %d: the changelog lost records the store applied (deleted and made again, or truncated) while the group kept the task's offsets, so this store is the last copy of that state; "+
			"to start the task's state over from what the changelog holds, losing it, delete the task's directory under %s",
			tg.store.Name(), tg.task, from-1, topic, p, tg.end, r.state.dir)
	}
	if len(at.Unchecked) > 0 {
		tg.unchecked, from = at.Unchecked, at.Unchecked[0]
	}
	if from == tg.end {
		tg.done = true
		return nil
	}
	tg.pos = from
	r.log.Debug("restoring a state store from its changelog", zap.String("store", tg.store.Name()), zap.Stringer("task", tg.task),
		zap.Int64("from", from), zap.Int64("end", tg.end))
	return nil
}

// changelogBounds lists the start and end offsets of topics. A changelog
// made moments ago can be in the metadata before its partitions answer
// (UNKNOWN_TOPIC_OR_PARTITION, NOT_LEADER…): such retriable errors are
// retried, with a log line each second, until connect_timeout, rather than
// failing the restore into a client rebuild. Past the bound it is a
// rebuildError naming the topics.
func (r *Runner) changelogBounds(ctx context.Context, topics []string) (starts, ends kadm.ListedOffsets, err error) {
	lctx, cancel := context.WithTimeout(ctx, r.cfg.ConnectTimeout)
	defer cancel()
	adm := kadm.NewClient(r.admin)
	began, logged := time.Now(), time.Now()
	var last error // the last retriable answer, which a timeout must not hide
	for {
		ends, err = adm.ListEndOffsets(lctx, topics...)
		if err == nil {
			err = ends.Error()
		}
		if err == nil {
			starts, err = adm.ListStartOffsets(lctx, topics...)
			if err == nil {
				err = starts.Error()
			}
		}
		if err == nil || !allRetriable(err) || ctx.Err() != nil {
			break
		}
		last = err
		if waited := time.Since(began); time.Since(logged) >= time.Second {
			level := zap.InfoLevel
			if waited >= 3*time.Second { // no longer a topic just made
				level = zap.WarnLevel
			}
			r.log.Log(level, "waiting for changelog partitions to answer before restoring", zap.Strings("topics", topics),
				zap.Duration("waited", waited.Round(time.Millisecond)), zap.Duration("bound", r.cfg.ConnectTimeout), zap.Error(err))
			logged = time.Now()
		}
		select {
		case <-lctx.Done():
		case <-time.After(100 * time.Millisecond):
		}
		if lctx.Err() != nil {
			break
		}
	}
	if err != nil && isFatal(err) {
		return nil, nil, r.authErrorOp(fmt.Errorf("reading the start and end of changelogs %v: %w", topics, err), "Read", topics...)
	}
	if err != nil {
		if last != nil && err != last {
			err = fmt.Errorf("%w, after retrying %w for %s", err, last, time.Since(began).Round(time.Millisecond))
		}
		return nil, nil, &rebuildError{fmt.Errorf("reading the start and end of changelogs %v: %w; inspect them with `eosctl topic describe %s`", topics, err, strings.Join(topics, " "))}
	}
	return starts, ends, nil
}

// allRetriable says whether err is a retriable Kafka error and, for the
// errors of a request sent to several brokers, whether every one is.
func allRetriable(err error) bool {
	var se *kadm.ShardErrors
	if errors.As(err, &se) {
		for _, e := range se.Errs {
			if !allRetriable(e.Err) {
				return false
			}
		}
		return len(se.Errs) > 0
	}
	var ke *kerr.Error
	return errors.As(err, &ke) && ke.Retriable
}

// wipeIfBehind empties a store its changelog partition can no longer
// bring up to date, so that it restores the partition in full: when the
// partition starts after the offset the store would read next (records
// were deleted), or when others wrote to it since the store last applied
// longer ago than its delete.retention.ms, after which compaction may
// have removed tombstones the store never saw (it would keep deleted
// keys forever), or when records of batches it applied on End's word
// were deleted before they were read back as committed. A store that is
// merely idle, with nothing after its offset but the marker of its own
// last commit, is not behind.
func (r *Runner) wipeIfBehind(tg *restoreTarget, topic string, start int64) error {
	at := tg.store.Position()
	off := at.Offset
	if off == state.NoOffset {
		return nil
	}
	var why string
	if off+1 < start {
		why = fmt.Sprintf("%s/%d now starts at offset %d, after offset %d that the store needs next: records it never read were deleted", topic, tg.task.Partition, start, off+1)
	} else if len(at.Unchecked) > 0 && at.Unchecked[0] < start {
		why = fmt.Sprintf("%s/%d now starts at offset %d, after offset %d of a batch the store applied but never read back as committed", topic, tg.task.Partition, start, at.Unchecked[0])
	} else if tg.end-(off+1) > 1 { // more than the marker of the store's own last commit
		at, err := tg.store.AppliedAt()
		if err != nil {
			return fmt.Errorf("eos: state store %q of task %s: %w", tg.store.Name(), tg.task, err)
		}
		retention, ok := r.deleteRetention[topic]
		if !ok {
			retention = defaultDeleteRetention
		}
		if age := time.Since(at); !at.IsZero() && age > retention {
			why = fmt.Sprintf("the store last applied %s ago, longer than %s's delete.retention.ms (%s), so compaction may have removed deletes it never saw", age.Round(time.Second), topic, retention)
		}
	}
	if why == "" {
		return nil
	}
	r.log.Warn("wiping a state store to restore it in full from its changelog", zap.String("store", tg.store.Name()),
		zap.Stringer("task", tg.task), zap.Int64("applied_offset", off), zap.String("reason", why))
	if err := tg.store.Wipe(); err != nil {
		return fmt.Errorf("eos: wiping state store %q of task %s (%s): %w; delete the task's directory under %s", tg.store.Name(), tg.task, why, err, r.state.dir)
	}
	r.wipes.Add(1)
	return nil
}

// wipeIfLogLost empties a store whose changelog partition ends at or
// before the offset it applied, when the cluster kept no trace of the
// task's progress either: the group has no offset committed for the
// task's partition, and the offsets mirror holds no record. That is a
// broker that lost its whole log (a development broker restarted), where
// the store is a cache of a log that is gone and the input starts over.
// A cluster that kept the offsets but lost the changelog lost the state
// with it, and the store is its last copy: the restore stops with an
// error (see startTarget) rather than wipe it on a guess.
func (r *Runner) wipeIfLogLost(ctx context.Context, tg *restoreTarget, topic string) error {
	off := tg.store.Position().Offset
	if off == state.NoOffset || off < tg.end || r.admin == nil {
		return nil
	}
	forgotten, err := r.progressForgotten(ctx, tg.task)
	if err != nil || !forgotten {
		return err
	}
	r.log.Warn("wiping a state store to restore it in full: its changelog ends before the offset it applied, and the group has no offsets for its task, so the broker lost its log and the input starts over",
		zap.String("store", tg.store.Name()), zap.Stringer("task", tg.task), zap.String("changelog", topic),
		zap.Int64("changelog_end", tg.end), zap.Int64("applied_offset", off))
	if err := tg.store.Wipe(); err != nil {
		return fmt.Errorf("eos: wiping state store %q of task %s, whose changelog %s ends at %d before its offset %d: %w; delete the task's directory under %s",
			tg.store.Name(), tg.task, topic, tg.end, off, err, r.state.dir)
	}
	r.wipes.Add(1)
	return nil
}

// progressForgotten reports whether the cluster holds no committed
// progress of task: no group offset for its partition, and no record in
// the offsets mirror.
func (r *Runner) progressForgotten(ctx context.Context, task state.Task) (bool, error) {
	adm := kadm.NewClient(r.admin)
	committed, err := adm.FetchOffsetsForTopics(ctx, r.cfg.AppID, task.Topic)
	if err != nil {
		return false, fmt.Errorf("eos: reading group %q's offsets for %s: %w", r.cfg.AppID, task, err)
	}
	if o, ok := committed.Lookup(task.Topic, task.Partition); ok && o.At >= 0 {
		return false, nil
	}
	mirror := topology.OffsetsTopic(r.cfg.AppID)
	starts, err := adm.ListStartOffsets(ctx, mirror)
	if err != nil {
		return false, fmt.Errorf("eos: listing the offsets mirror %s: %w", mirror, err)
	}
	ends, err := adm.ListEndOffsets(ctx, mirror)
	if err != nil {
		return false, fmt.Errorf("eos: listing the offsets mirror %s: %w", mirror, err)
	}
	empty := true
	ends.Each(func(e kadm.ListedOffset) {
		s, ok := starts.Lookup(e.Topic, e.Partition)
		if e.Err != nil || !ok || s.Err != nil || e.Offset > s.Offset {
			empty = false
		}
	})
	return empty, nil
}

// wipeAhead empties a store the last changelog record of one of whose
// applied batches, at missing, did not read back as committed (the next
// record read_committed delivered came at next), and has the restore
// start over: the store applied a batch that the changelog does not hold
// (see restore), or compaction removed that record since the key was
// written again. Either way a restore in full is right.
func (r *Runner) wipeAhead(tg *restoreTarget, topic string, missing, next int64) error {
	r.log.Warn("wiping a state store to restore it in full: a changelog record it applied is not committed, so it holds a batch the changelog does not",
		zap.String("store", tg.store.Name()), zap.Stringer("task", tg.task), zap.String("changelog", topic),
		zap.Int64("uncommitted_offset", missing), zap.Int64("next_committed_offset", next), zap.Int64("applied_offset", tg.store.Offset()))
	if err := tg.store.Wipe(); err != nil {
		return fmt.Errorf("eos: wiping state store %q of task %s, whose applied changelog offset %d is not committed: %w; delete the task's directory under %s",
			tg.store.Name(), tg.task, missing, err, r.state.dir)
	}
	r.wipes.Add(1)
	return errRestoreAgain
}

// defaultDeleteRetention is Kafka's default delete.retention.ms, assumed
// for a changelog whose configuration could not be read.
const defaultDeleteRetention = 24 * time.Hour

// restoreTarget is one store's changelog partition being read.
type restoreTarget struct {
	store *state.Store
	task  state.Task
	end   int64 // the high watermark when the restore began
	pos   int64 // the next offset to read
	// unchecked are the last changelog offsets of the store's batches
	// still to be read back as committed (see restore), ascending.
	unchecked []int64
	done      bool
}

// readChangelogs reads the partitions in consume until each reaches its
// target's end, applying its records to the target's store. Control
// records are kept so that the position is known even when the end is a
// transaction marker, which is never delivered as a record otherwise.
func (r *Runner) readChangelogs(ctx context.Context, consume map[string]map[int32]kgo.Offset, targets map[string]map[int32]*restoreTarget, left int) error {
	cl, err := r.restoreClient(consume)
	if err != nil {
		return err
	}
	defer cl.Close()
	r.health.restoring.Store(true)
	defer func() {
		r.health.restoreLeft.Store(0)
		r.health.restoring.Store(false)
	}()
	r.health.restoreLeft.Store(offsetsLeft(targets))
	now := time.Now()
	pr := &restoreProgress{begin: now, logged: now, progressed: now, left: left}
	for pr.left > 0 && ctx.Err() == nil {
		pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		fs := cl.PollFetches(pctx)
		cancel()
		if err := r.restoreFetchErrors(fs); err != nil {
			return err
		}
		if err := r.takeFetches(fs, targets, pr); err != nil {
			return err
		}
		if err := r.restoreProgressed(targets, pr); err != nil {
			return err
		}
	}
	r.restored.Add(pr.applied)
	if pr.applied > 0 && pr.left == 0 { // a cancelled restore did not end
		r.log.Info("state restored", zap.Uint64("records", pr.applied), zap.Duration("took", time.Since(pr.begin)))
	}
	return nil
}

// restoreProgress is how far readChangelogs got, and since when.
type restoreProgress struct {
	begin, logged time.Time
	progressed    time.Time // when a partition's position last moved
	applied       uint64    // records applied
	left          int       // partitions not at their end
}

// restoreClient is a client that reads the partitions in consume from
// the offsets given, read_committed, keeping control records.
func (r *Runner) restoreClient(consume map[string]map[int32]kgo.Offset) (*kgo.Client, error) {
	opts, err := kafkautil.ConnOptions(r.cfg, r.extra...)
	if err != nil {
		return nil, err
	}
	opts = append(opts, kgo.ConsumePartitions(consume), kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.KeepControlRecords(),
		kgo.ConsumeResetOffset(kgo.NoResetOffset()), // a store must not skip records it never saw
		kgo.WithLogger(kzap.New(r.log.Named("kgo"), kzap.LevelFn(r.clientLogLevel))))
	return kgo.NewClient(opts...)
}

// offsetsLeft is the changelog offsets the targets not done have to read.
func offsetsLeft(targets map[string]map[int32]*restoreTarget) int64 {
	var n int64
	for _, ps := range targets {
		for _, tg := range ps {
			if !tg.done {
				n += tg.end - tg.pos
			}
		}
	}
	return n
}

// restoreFetchErrors ends the restore on a fetch error it cannot outwait:
// a denied read, or a changelog that no longer holds the offset a store
// needs. Others are logged, and the next poll retries.
func (r *Runner) restoreFetchErrors(fs kgo.Fetches) error {
	for _, fe := range fs.Errors() {
		switch {
		case errors.Is(fe.Err, context.Canceled), errors.Is(fe.Err, context.DeadlineExceeded):
		case kafkautil.IsFatal(fe.Err):
			return r.authErrorOp(fmt.Errorf("restoring from %s/%d: %w", fe.Topic, fe.Partition, fe.Err), "Read", fe.Topic)
		case errors.Is(fe.Err, kerr.OffsetOutOfRange):
			return fmt.Errorf("eos: restoring from %s/%d: the changelog no longer holds the offset the store needs next (deleted or truncated): %w; delete the task's directory under %s to restore it in full",
				fe.Topic, fe.Partition, fe.Err, r.state.dir)
		default:
			r.log.Warn("restoring state: fetch error, retrying", zap.String("topic", fe.Topic), zap.Int32("partition", fe.Partition), zap.Error(fe.Err))
		}
	}
	return nil
}

// takeFetches applies what fs holds for the targets not done.
func (r *Runner) takeFetches(fs kgo.Fetches, targets map[string]map[int32]*restoreTarget, pr *restoreProgress) error {
	var ferr error
	fs.EachPartition(func(p kgo.FetchTopicPartition) {
		tg := targets[p.Topic][p.Partition]
		if tg == nil || tg.done || ferr != nil {
			return
		}
		n, moved, err := r.takeFetched(tg, p)
		if err != nil {
			ferr = err
			return
		}
		pr.applied += uint64(n)
		if moved {
			pr.progressed = time.Now()
		}
		if tg.done {
			pr.left--
		}
	})
	return ferr
}

// restoreProgressed reports the restore's progress, and ends it once no
// position moved for the stall bound: an open transaction of another
// producer holds the read_committed position back, and a new client
// tries again.
func (r *Runner) restoreProgressed(targets map[string]map[int32]*restoreTarget, pr *restoreProgress) error {
	remaining := offsetsLeft(targets)
	r.health.restoreLeft.Store(remaining)
	if time.Since(pr.logged) >= 5*time.Second {
		pr.logged = time.Now()
		r.log.Info("restoring state from changelogs", zap.Uint64("records", pr.applied), zap.Int("partitions_left", pr.left),
			zap.Int64("offsets_left", remaining), zap.Float64("records_per_second", float64(pr.applied)/time.Since(pr.begin).Seconds()))
	}
	if waited := time.Since(pr.progressed); waited > r.stallBound() {
		return &rebuildError{fmt.Errorf("restoring state: no changelog record for %s with %d partitions left; inspect with `eosctl topic describe` and `eosctl txn hanging`",
			waited.Round(time.Second), pr.left)}
	}
	return nil
}

// takeFetched takes the records fetched for tg: first it reads the
// store's unchecked batches back, then applies what follows, up to the
// end. It returns how many writes it applied, and whether tg moved on.
func (r *Runner) takeFetched(tg *restoreTarget, p kgo.FetchTopicPartition) (int, bool, error) {
	var writes []state.Write
	last := int64(-1)
	moved := false
	reached := false // a record at or past the end came: nothing below it is left
	for _, rec := range p.Records {
		if rec.Offset < tg.pos {
			continue // applied already
		}
		if len(tg.unchecked) > 0 {
			if err := r.readBack(tg, p.Topic, rec.Offset); err != nil {
				return 0, false, err
			}
			moved = true
			if tg.pos >= tg.end {
				reached = true
				break
			}
			continue
		}
		if rec.Offset >= tg.end {
			reached = true
			break
		}
		last = rec.Offset
		if !rec.Attrs.IsControl() {
			writes = append(writes, state.Write{Key: rec.Key, Value: rec.Value})
		}
	}
	// The records of an aborted transaction are dropped by the client,
	// never delivered. Kafka writes the abort marker after it answers
	// EndTxn, so the end read just after an abort can fall right after
	// such records, before their marker: the marker, past the end, is
	// then the first record delivered.
	if last < 0 && !reached {
		return 0, moved, nil
	}
	if last >= 0 {
		if err := tg.store.Restore(writes, last); err != nil {
			return 0, false, fmt.Errorf("eos: restoring state store %q of task %s from %s/%d: %w", tg.store.Name(), tg.task, p.Topic, p.Partition, err)
		}
		tg.pos = last + 1
	}
	if reached || tg.pos >= tg.end {
		tg.done = true
	}
	return len(writes), true, nil
}

// readBack takes the record at offset, delivered read_committed (or a
// marker kept), while tg's store has unchecked batches. Records before
// the next unchecked offset belong to a batch already applied, or are
// markers; the unchecked offset itself is committed; a record past it
// means it was not delivered, so the store is wiped. Once every batch
// read back, the store records it is checked (see state.Store.Checked)
// and the read goes on after its offset.
func (r *Runner) readBack(tg *restoreTarget, topic string, offset int64) error {
	switch next := tg.unchecked[0]; {
	case offset < next:
		return nil
	case offset > next:
		return r.wipeAhead(tg, topic, next, offset)
	}
	tg.unchecked = tg.unchecked[1:]
	if len(tg.unchecked) > 0 {
		return nil
	}
	if err := tg.store.Checked(); err != nil {
		return fmt.Errorf("eos: recording that state store %q of task %s was read back as committed: %w; delete the task's directory under %s to restore it in full",
			tg.store.Name(), tg.task, err, r.state.dir)
	}
	tg.pos = tg.store.Offset() + 1
	return nil
}

// changelogs makes sure every store's changelog exists, compacted, with
// as many partitions as the store's source topic; partitions gives the
// source topics' partition counts.
func (r *Runner) changelogs(ctx context.Context, adm *kadm.Client, partitions map[string]int32) error {
	if r.state == nil {
		return nil
	}
	want := map[string]int32{}
	var names []string
	for _, s := range r.state.specs {
		topic := topology.ChangelogTopic(r.cfg.AppID, s.Name)
		if partitions[s.Source] <= 0 {
			return fmt.Errorf("eos: the partition count of %s, the input of store %q, is unknown, so its changelog %s cannot be made to match; create %s first (`eosctl topic create %s --partitions N`)",
				s.Source, s.Name, topic, s.Source, s.Source)
		}
		want[topic] = partitions[s.Source]
		names = append(names, topic)
	}
	sort.Strings(names)
	details, err := adm.ListTopics(ctx, names...)
	if err != nil {
		return r.unreachable(fmt.Errorf("eos: listing changelog topics: %w", err))
	}
	compact := "compact"
	for _, topic := range names {
		d, ok := details[topic]
		switch {
		case !ok || errors.Is(d.Err, kerr.UnknownTopicOrPartition):
			if err := kafkautil.RequestTopics(ctx, adm, want[topic], -1, map[string]*string{"cleanup.policy": &compact}, topic); err != nil {
				if isFatal(err) {
					return r.authErrorOp(fmt.Errorf("creating changelog %s: %w", topic, err), "Create", topic)
				}
				return r.unreachable(fmt.Errorf("eos: creating changelog %s: %w; create it with `eosctl topic create %s --partitions %d --topic-config cleanup.policy=compact`", topic, err, topic, want[topic]))
			}
			r.log.Info("created changelog topic", zap.String("topic", topic), zap.Int32("partitions", want[topic]))
		case isFatal(d.Err):
			return r.authErrorOp(fmt.Errorf("changelog %s: %w", topic, d.Err), "Write", topic)
		case d.Err != nil:
			return fmt.Errorf("eos: changelog %s: %w", topic, d.Err)
		case int32(len(d.Partitions)) != want[topic]:
			return fmt.Errorf("eos: changelog %s has %d partitions, but its store's input has %d: a task's state lives in the changelog partition of the same number; recreate it (`eosctl topic delete %s`, then restart)",
				topic, len(d.Partitions), want[topic], topic)
		default:
			if err := r.checkCompacted(ctx, adm, topic); err != nil {
				return err
			}
		}
	}
	return nil
}

// checkCompacted refuses an existing changelog whose records expire: the
// state would expire with them.
func (r *Runner) checkCompacted(ctx context.Context, adm *kadm.Client, topic string) error {
	configs, err := adm.DescribeTopicConfigs(ctx, topic)
	if err != nil {
		r.log.Info("changelog cleanup.policy unknown", zap.String("topic", topic), zap.Error(err))
		return nil
	}
	rc, err := configs.On(topic, nil)
	if err != nil || rc.Err != nil {
		return nil
	}
	for _, c := range rc.Configs {
		if c.Key == "delete.retention.ms" && c.Value != nil {
			if ms, err := strconv.ParseInt(*c.Value, 10, 64); err == nil && ms >= 0 {
				r.deleteRetention[topic] = time.Duration(ms) * time.Millisecond
			}
		}
		if c.Key == "cleanup.policy" && c.Value != nil && !strings.Contains(*c.Value, "compact") {
			return fmt.Errorf("eos: changelog %s has cleanup.policy=%s: its records, and the state they hold, would expire; make it compacted (kafka-configs.sh --alter --entity-type topics --entity-name %s --add-config cleanup.policy=compact) or delete it so the runtime makes it",
				topic, *c.Value, topic)
		}
	}
	return nil
}
