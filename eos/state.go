package eos

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/eosflow/eosflow/internal/store"

	"github.com/eosflow/eosflow/internal/graph"
	"github.com/eosflow/eosflow/state"
	"github.com/eosflow/eosflow/topology"
	"github.com/twmb/franz-go/pkg/kgo"
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

	open  map[state.Task]map[string]*store.Store
	ready map[state.Task]bool
	dirty map[*store.Store]state.Task // written in the current batch
	last  map[*store.Store]*kgo.Record
	// Savepoints per record: the stores the current record reached, each
	// marked once, so that a record that fails leaves no writes behind.
	seq     uint64
	markSeq map[*store.Store]uint64
	touched []*store.Store

	// sized are the open stores, for the store-size metric, which reads
	// them from scrapes: a store leaves it before it closes.
	sizeMu sync.Mutex
	sized  map[*store.Store]bool

	mu            sync.Mutex
	own           map[state.Task]bool // assigned to this instance now
	assigned      map[state.Task]bool // since the last batch: must catch up first
	revoked       map[state.Task]bool // since the last batch: close after it
	allNeedReload bool                // a new client: every task catches up

	owner ownership // checks own against the client (see reconcile)

	// serve is what queries read (see serving); taken after mu.
	serve serving
}

func newTaskStores(specs []graph.Store, taskTopic map[string]string, dir, appID string, log *zap.Logger) *taskStores {
	ts := &taskStores{specs: specs, bySource: map[string][]graph.Store{}, taskTopic: taskTopic, dir: dir, appID: appID, log: log,
		open: map[state.Task]map[string]*store.Store{}, ready: map[state.Task]bool{},
		dirty: map[*store.Store]state.Task{}, last: map[*store.Store]*kgo.Record{}, markSeq: map[*store.Store]uint64{},
		own: map[state.Task]bool{}, assigned: map[state.Task]bool{}, revoked: map[state.Task]bool{},
		owner: ownership{unconfirmed: map[state.Task]bool{}, taken: map[state.Task]bool{}}}
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
			ts.forgetOwnership(&t)
			ts.serve.drop(t)
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
			ts.forgetOwnership(&t)
			ts.serve.drop(t)
		}
	}
}

// endSession gives up the tasks of a client about to close: its revoke
// on leaving the group may never be passed on (franz-go's transact
// session drops every revoke after the first until an End ends), and the
// group may give them to another member as soon as it leaves. They close
// at the next sync, but for those the next client is assigned again.
func (ts *taskStores) endSession() {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	for t := range ts.own {
		ts.revoked[t] = true
	}
	clear(ts.own)
	ts.forgetOwnership(nil)
	ts.serve.dropAll()
}

// reload makes every task catch up before its next record: a new client
// may have been given partitions another instance wrote meanwhile.
func (ts *taskStores) reload() {
	ts.mu.Lock()
	ts.allNeedReload = true
	ts.forgetOwnership(nil)
	ts.serve.dropAll()
	ts.mu.Unlock()
}

// sync applies the rebalances noted since the last batch; called between
// batches, with no transaction open.
func (ts *taskStores) sync() {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if ts.allNeedReload {
		ts.serve.dropAll()
		clear(ts.ready)
		ts.allNeedReload = false
	}
	for t := range ts.assigned {
		ts.serve.drop(t)
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
	ts.serve.drop(t)
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
func (ts *taskStores) store(name string, task state.Task) (*store.Store, error) {
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
// its task reads them back from the changelog (see changelogReader.restore): what
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
			msg := "applying a committed batch to its state store failed; restoring it from its changelog"
			if errors.Is(err, state.ErrDiskFull) {
				// Nothing was applied; the restore refuses too and stops Run.
				msg = "the state directory is full: a committed batch was not applied to its state store, which stays behind its changelog until space returns"
			}
			ts.log.Warn(msg, zap.String("store", s.Name()), zap.Stringer("task", task), zap.Error(err))
			s.Abort()
			ts.serve.drop(task)
			delete(ts.ready, task)
		} else if len(s.Position().Unchecked) >= maxUnchecked {
			ts.serve.drop(task)
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
		ts.serve.drop(task)
		delete(ts.ready, task)
	}
	clear(ts.dirty)
	clear(ts.last)
}

// track adds an opened store to, or removes a closing one from, what the
// store-size metric reads.
func (ts *taskStores) track(s *store.Store, open bool) {
	ts.sizeMu.Lock()
	defer ts.sizeMu.Unlock()
	if ts.sized == nil {
		ts.sized = map[*store.Store]bool{}
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

// unlessFull is fix, unless err is a full state directory: its error
// already says what to do, and deleting a store to rebuild it needs the
// space back first.
func unlessFull(err error, fix string) string {
	if errors.Is(err, state.ErrDiskFull) {
		return ""
	}
	return fix
}

// closeAll closes every store; Run calls it when it returns.
func (ts *taskStores) closeAll() {
	for t := range ts.open {
		ts.closeTask(t)
	}
}
