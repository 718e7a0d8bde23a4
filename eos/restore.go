package eos

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/eosflow/eosflow/internal/store"

	"github.com/eosflow/eosflow/config"
	"github.com/eosflow/eosflow/internal/kafkautil"
	"github.com/eosflow/eosflow/state"
	"github.com/eosflow/eosflow/topology"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/plugin/kzap"
	"go.uber.org/zap"
)

// changelogReader catches the task stores up with their changelogs, read
// committed, before their tasks process records, and makes sure each
// changelog topic exists as the stores need it. It holds no transaction
// open, however long a restore takes.
type changelogReader struct {
	cfg         config.Config
	log         *zap.Logger
	extra       []kgo.Opt           // the user's client options
	clientLevel func() kgo.LogLevel // the restore client's log level
	admin       func() *kgo.Client  // preflight's client, once made
	authz       *authz              // names the grants a refusal lacks
	stores      *taskStores         // the stores caught up
	health      *health             // reports a restore in progress
	stallBound  time.Duration       // a restore that makes no progress this long is a stall
	restored    *atomic.Uint64      // Stats.Restored
	wipes       *atomic.Uint64      // Stats.StoresWiped
	// deleteRetention is each changelog's delete.retention.ms, where
	// read (see wipeIfBehind).
	deleteRetention map[string]time.Duration
}

// newChangelogReader is the reader of r's stores.
func newChangelogReader(r *Runner) *changelogReader {
	return &changelogReader{cfg: r.cfg, log: r.log, extra: r.extra, clientLevel: r.clientLogLevel,
		admin: func() *kgo.Client { return r.admin }, authz: r.authz, stores: r.state, health: &r.health,
		stallBound: r.waits.stall, restored: &r.counts.restored, wipes: &r.counts.wipes, deleteRetention: map[string]time.Duration{}}
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
func (cr *changelogReader) restore(ctx context.Context, tasks []state.Task) error {
	if len(tasks) == 0 {
		return nil
	}
	for _, t := range tasks {
		cr.stores.serve.drop(t) // a restore may wipe a store: no query reads it meanwhile
	}
	for {
		err := cr.restoreOnce(ctx, tasks)
		if !errors.Is(err, errRestoreAgain) {
			return err
		}
	}
}

// errRestoreAgain: a store was wiped during a restore, which starts over.
var errRestoreAgain = errors.New("restore again")

func (cr *changelogReader) restoreOnce(ctx context.Context, tasks []state.Task) error {
	targets, topics, err := cr.restoreTargets(tasks)
	if err != nil {
		return err
	}
	// The target is the high watermark, not the last stable offset: a
	// previous owner's committed batch whose marker has not reached the
	// changelog yet sits above the LSO, and must not be missed. Reading
	// read_committed waits at an open transaction until it ends.
	starts, ends, err := cr.changelogBounds(ctx, topics)
	if err != nil {
		return err
	}
	consume := map[string]map[int32]kgo.Offset{}
	remaining := 0
	for topic, ps := range targets {
		for p, tg := range ps {
			if err := cr.startTarget(ctx, tg, topic, p, starts, ends); err != nil {
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
		if err := cr.read(ctx, consume, targets, remaining); err != nil {
			return err
		}
		if ctx.Err() != nil {
			return nil // shutting down: the tasks stay unrestored
		}
	}
	for _, t := range tasks {
		cr.stores.ready[t] = true
	}
	cr.stores.serveReady(tasks)
	return nil
}

// restoreTargets opens the stores of tasks that are not open, and lists
// them per changelog topic and partition, with the topics in order.
func (cr *changelogReader) restoreTargets(tasks []state.Task) (map[string]map[int32]*restoreTarget, []string, error) {
	ts := cr.stores
	targets := map[string]map[int32]*restoreTarget{}
	var topics []string
	for _, t := range tasks {
		if ts.open[t] == nil {
			ts.open[t] = map[string]*store.Store{}
		}
		for _, spec := range ts.bySource[t.Topic] {
			s := ts.open[t][spec.Name]
			if s == nil {
				var err error
				if s, err = store.Open(spec.Engine, ts.dir, spec.Name, t); err != nil {
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
func (cr *changelogReader) startTarget(ctx context.Context, tg *restoreTarget, topic string, p int32, starts, ends kadm.ListedOffsets) error {
	o, ok := ends.Lookup(topic, p)
	if !ok {
		return fmt.Errorf("eos: changelog %s has no partition %d; its partition count must equal the input's (inspect with `eosctl topic describe %s`)", topic, p, topic)
	}
	tg.end = o.Offset
	start, _ := starts.Lookup(topic, p)
	if err := cr.wipeIfBehind(tg, topic, start.Offset); err != nil {
		return err
	}
	if err := cr.wipeIfLogLost(ctx, tg, topic); err != nil {
		return err
	}
	at := tg.store.Position()
	from := max(at.Offset+1, start.Offset)
	if from > tg.end {
		// A leader that lost its leadership while paused or cut off can
		// answer with an end its successor has passed: rebuilt clients
		// read the end again until recovery_timeout, and only then does
		// Run stop.
		return &rebuildError{fmt.Errorf("eos: state store %q of task %s has applied changelog offset %d, but %s/%d ends at %d: the changelog lost records the store applied (deleted and made again, or truncated) while the group kept the task's offsets, so this store is the last copy of that state; "+
			"to start the task's state over from what the changelog holds, losing it, delete the task's directory under %s",
			tg.store.Name(), tg.task, from-1, topic, p, tg.end, cr.stores.dir)}
	}
	if len(at.Unchecked) > 0 {
		tg.unchecked, from = at.Unchecked, at.Unchecked[0]
	}
	if from == tg.end {
		tg.done = true
		return nil
	}
	tg.pos = from
	cr.log.Debug("restoring a state store from its changelog", zap.String("store", tg.store.Name()), zap.Stringer("task", tg.task),
		zap.Int64("from", from), zap.Int64("end", tg.end))
	return nil
}

// changelogBounds lists the start and end offsets of topics. A changelog
// made moments ago can be in the metadata before its partitions answer
// (UNKNOWN_TOPIC_OR_PARTITION, NOT_LEADER…): such retriable errors are
// retried, with a log line each second, until connect_timeout, rather than
// failing the restore into a client rebuild. Past the bound it is a
// rebuildError naming the topics.
func (cr *changelogReader) changelogBounds(ctx context.Context, topics []string) (starts, ends kadm.ListedOffsets, err error) {
	lctx, cancel := context.WithTimeout(ctx, cr.cfg.ConnectTimeout)
	defer cancel()
	adm := kadm.NewClient(cr.admin())
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
			cr.log.Log(level, "waiting for changelog partitions to answer before restoring", zap.Strings("topics", topics),
				zap.Duration("waited", waited.Round(time.Millisecond)), zap.Duration("bound", cr.cfg.ConnectTimeout), zap.Error(err))
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
		return nil, nil, cr.authz.errOp(fmt.Errorf("reading the start and end of changelogs %v: %w", topics, err), "Read", topics...)
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
func (cr *changelogReader) wipeIfBehind(tg *restoreTarget, topic string, start int64) error {
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
		retention, ok := cr.deleteRetention[topic]
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
	cr.log.Warn("wiping a state store to restore it in full from its changelog", zap.String("store", tg.store.Name()),
		zap.Stringer("task", tg.task), zap.Int64("applied_offset", off), zap.String("reason", why))
	if err := tg.store.Wipe(); err != nil {
		return fmt.Errorf("eos: wiping state store %q of task %s (%s): %w%s", tg.store.Name(), tg.task, why, err, unlessFull(err, "; delete the task's directory under "+cr.stores.dir))
	}
	cr.wipes.Add(1)
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
func (cr *changelogReader) wipeIfLogLost(ctx context.Context, tg *restoreTarget, topic string) error {
	off := tg.store.Position().Offset
	if off == state.NoOffset || off < tg.end || cr.admin() == nil {
		return nil
	}
	forgotten, err := cr.progressForgotten(ctx, tg.task)
	switch {
	case err != nil && !kafkautil.IsFatal(err):
		return &rebuildError{err} // broker trouble, like the end that led here: read again on rebuilt clients
	case err != nil || !forgotten:
		return err
	}
	cr.log.Warn("wiping a state store to restore it in full: its changelog ends before the offset it applied, and the group has no offsets for its task, so the broker lost its log and the input starts over",
		zap.String("store", tg.store.Name()), zap.Stringer("task", tg.task), zap.String("changelog", topic),
		zap.Int64("changelog_end", tg.end), zap.Int64("applied_offset", off))
	if err := tg.store.Wipe(); err != nil {
		return fmt.Errorf("eos: wiping state store %q of task %s, whose changelog %s ends at %d before its offset %d: %w; delete the task's directory under %s",
			tg.store.Name(), tg.task, topic, tg.end, off, err, cr.stores.dir)
	}
	cr.wipes.Add(1)
	return nil
}

// progressForgotten reports whether the cluster holds no committed
// progress of task: no group offset for its partition, and no record in
// the offsets mirror.
func (cr *changelogReader) progressForgotten(ctx context.Context, task state.Task) (bool, error) {
	adm := kadm.NewClient(cr.admin())
	committed, err := adm.FetchOffsetsForTopics(ctx, cr.cfg.AppID, task.Topic)
	if err != nil {
		return false, fmt.Errorf("eos: reading group %q's offsets for %s: %w", cr.cfg.AppID, task, err)
	}
	if o, ok := committed.Lookup(task.Topic, task.Partition); ok && o.At >= 0 {
		return false, nil
	}
	mirror := topology.OffsetsTopic(cr.cfg.AppID)
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
func (cr *changelogReader) wipeAhead(tg *restoreTarget, topic string, missing, next int64) error {
	cr.log.Warn("wiping a state store to restore it in full: a changelog record it applied is not committed, so it holds a batch the changelog does not",
		zap.String("store", tg.store.Name()), zap.Stringer("task", tg.task), zap.String("changelog", topic),
		zap.Int64("uncommitted_offset", missing), zap.Int64("next_committed_offset", next), zap.Int64("applied_offset", tg.store.Offset()))
	if err := tg.store.Wipe(); err != nil {
		return fmt.Errorf("eos: wiping state store %q of task %s, whose applied changelog offset %d is not committed: %w; delete the task's directory under %s",
			tg.store.Name(), tg.task, missing, err, cr.stores.dir)
	}
	cr.wipes.Add(1)
	return errRestoreAgain
}

// defaultDeleteRetention is Kafka's default delete.retention.ms, assumed
// for a changelog whose configuration could not be read.
const defaultDeleteRetention = 24 * time.Hour

// restoreTarget is one store's changelog partition being read.
type restoreTarget struct {
	store *store.Store
	task  state.Task
	end   int64 // the high watermark when the restore began
	pos   int64 // the next offset to read
	// unchecked are the last changelog offsets of the store's batches
	// still to be read back as committed (see restore), ascending.
	unchecked []int64
	done      bool
}

// read reads the partitions in consume until each reaches its
// target's end, applying its records to the target's store. Control
// records are kept so that the position is known even when the end is a
// transaction marker, which is never delivered as a record otherwise.
func (cr *changelogReader) read(ctx context.Context, consume map[string]map[int32]kgo.Offset, targets map[string]map[int32]*restoreTarget, left int) error {
	cl, err := cr.client(consume)
	if err != nil {
		return err
	}
	defer cl.Close()
	cr.health.restoring.Store(true)
	defer func() {
		cr.health.restoreLeft.Store(0)
		cr.health.restoring.Store(false)
	}()
	cr.health.restoreLeft.Store(offsetsLeft(targets))
	now := time.Now()
	pr := &restoreProgress{begin: now, logged: now, progressed: now, left: left}
	defer func() { cr.restored.Add(pr.applied) }() // applied, even when a later fetch fails
	for pr.left > 0 && ctx.Err() == nil {
		pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		fs := cl.PollFetches(pctx)
		cancel()
		if err := cr.fetchErrors(fs); err != nil {
			return err
		}
		if err := cr.takeFetches(fs, targets, pr); err != nil {
			return err
		}
		if err := cr.progressed(targets, pr); err != nil {
			return err
		}
	}
	if pr.applied > 0 && pr.left == 0 { // a cancelled restore did not end
		cr.log.Info("state restored", zap.Uint64("records", pr.applied), zap.Duration("took", time.Since(pr.begin)))
	}
	return nil
}

// restoreProgress is how far read got, and since when.
type restoreProgress struct {
	begin, logged time.Time
	progressed    time.Time // when a partition's position last moved
	applied       uint64    // records applied
	left          int       // partitions not at their end
}

// client is a client that reads the partitions in consume from
// the offsets given, read_committed, keeping control records.
func (cr *changelogReader) client(consume map[string]map[int32]kgo.Offset) (*kgo.Client, error) {
	opts, err := kafkautil.ConnOptions(cr.cfg, cr.extra...)
	if err != nil {
		return nil, err
	}
	opts = append(opts, kgo.ConsumePartitions(consume), kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.KeepControlRecords(),
		kgo.ConsumeResetOffset(kgo.NoResetOffset()), // a store must not skip records it never saw
		kgo.WithLogger(kzap.New(cr.log.Named("kgo"), kzap.LevelFn(cr.clientLevel))))
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

// fetchErrors ends the restore on a fetch error it cannot outwait: a
// denied read, or an offset out of range. Others are logged, and the next
// poll retries.
//
// OFFSET_OUT_OF_RANGE is no proof that the changelog lost the offset: a
// leader that was paused or cut off, and has not yet learned it lost its
// leadership, answers so for offsets its successor wrote. The restore
// starts over on a new client, as a rebuild, and reads the changelog's
// bounds afresh; those decide (a store behind the start is wiped, one
// past the end stops Run), and recovery_timeout bounds the retries.
func (cr *changelogReader) fetchErrors(fs kgo.Fetches) error {
	for _, fe := range fs.Errors() {
		switch {
		case errors.Is(fe.Err, context.Canceled), errors.Is(fe.Err, context.DeadlineExceeded):
		case kafkautil.IsFatal(fe.Err):
			return cr.authz.errOp(fmt.Errorf("restoring from %s/%d: %w", fe.Topic, fe.Partition, fe.Err), "Read", fe.Topic)
		case errors.Is(fe.Err, kerr.OffsetOutOfRange):
			return &rebuildError{fmt.Errorf("restoring from %s/%d: a broker answered %w for the offset the store needs next, though the changelog's bounds held it when the restore began (a leader that lost its leadership while paused or cut off answers so, and the restore starts over); "+
				"if it persists, inspect the partition with `eosctl topic describe %s`, and delete the task's directory under %s to restore it in full", fe.Topic, fe.Partition, fe.Err, fe.Topic, cr.stores.dir)}
		default:
			cr.log.Warn("restoring state: fetch error, retrying", zap.String("topic", fe.Topic), zap.Int32("partition", fe.Partition), zap.Error(fe.Err))
		}
	}
	return nil
}

// takeFetches applies what fs holds for the targets not done.
func (cr *changelogReader) takeFetches(fs kgo.Fetches, targets map[string]map[int32]*restoreTarget, pr *restoreProgress) error {
	var ferr error
	fs.EachPartition(func(p kgo.FetchTopicPartition) {
		tg := targets[p.Topic][p.Partition]
		if tg == nil || tg.done || ferr != nil {
			return
		}
		n, moved, err := cr.takeFetched(tg, p)
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

// progressed reports the restore's progress, and ends it once no
// position moved for the stall bound: an open transaction of another
// producer holds the read_committed position back, and a new client
// tries again.
func (cr *changelogReader) progressed(targets map[string]map[int32]*restoreTarget, pr *restoreProgress) error {
	remaining := offsetsLeft(targets)
	cr.health.restoreLeft.Store(remaining)
	if time.Since(pr.logged) >= 5*time.Second {
		pr.logged = time.Now()
		cr.log.Info("restoring state from changelogs", zap.Uint64("records", pr.applied), zap.Int("partitions_left", pr.left),
			zap.Int64("offsets_left", remaining), zap.Float64("records_per_second", float64(pr.applied)/time.Since(pr.begin).Seconds()))
	}
	if waited := time.Since(pr.progressed); waited > cr.stallBound {
		return &rebuildError{fmt.Errorf("restoring state: no changelog record for %s with %d partitions left; inspect with `eosctl topic describe` and `eosctl txn hanging`",
			waited.Round(time.Second), pr.left)}
	}
	return nil
}

// takeFetched takes the records fetched for tg: first it reads the
// store's unchecked batches back, then applies what follows, up to the
// end. It returns how many writes it applied, and whether tg moved on.
func (cr *changelogReader) takeFetched(tg *restoreTarget, p kgo.FetchTopicPartition) (int, bool, error) {
	var writes []state.Write
	last := int64(-1)
	moved := false
	reached := false // a record at or past the end came: nothing below it is left
	for _, rec := range p.Records {
		if rec.Offset < tg.pos {
			continue // applied already
		}
		if len(tg.unchecked) > 0 {
			if err := cr.readBack(tg, p.Topic, rec.Offset); err != nil {
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
		// A crash soon after would otherwise read the whole restore again.
		if err := tg.store.Flush(); err != nil {
			return 0, false, fmt.Errorf("eos: flushing state store %q of task %s after its restore: %w", tg.store.Name(), tg.task, err)
		}
	}
	return len(writes), true, nil
}

// readBack takes the record at offset, delivered read_committed (or a
// marker kept), while tg's store has unchecked batches. Records before
// the next unchecked offset belong to a batch already applied, or are
// markers; the unchecked offset itself is committed; a record past it
// means it was not delivered, so the store is wiped. Once every batch
// read back, the store records it is checked (see store.Store.Checked)
// and the read goes on after its offset.
func (cr *changelogReader) readBack(tg *restoreTarget, topic string, offset int64) error {
	switch next := tg.unchecked[0]; {
	case offset < next:
		return nil
	case offset > next:
		return cr.wipeAhead(tg, topic, next, offset)
	}
	tg.unchecked = tg.unchecked[1:]
	if len(tg.unchecked) > 0 {
		return nil
	}
	if err := tg.store.Checked(); err != nil {
		return fmt.Errorf("eos: recording that state store %q of task %s was read back as committed: %w%s",
			tg.store.Name(), tg.task, err, unlessFull(err, "; delete the task's directory under "+cr.stores.dir+" to restore it in full"))
	}
	tg.pos = tg.store.Offset() + 1
	return nil
}
