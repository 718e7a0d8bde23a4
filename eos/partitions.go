package eos

import (
	"context"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/twmb/franz-go/pkg/kgo"
)

// recordContexts hands out the context user code sees for a record: one per
// input partition, cancelled when the partition is revoked or lost, when
// the client that owns it is replaced, and on shutdown (its parent ends).
// A revoke first lets the record in flight finish with its context live,
// for up to half of rebalance_timeout (see await): a call that already
// took effect and is cancelled before its answer would report a failure,
// and the partition's next owner would run it again. Any other record of
// a revoked partition, from the revoke on, gets a cancelled context, and
// keeps getting one until the partition is assigned again. Under
// exactly-once the record in flight is waited for whatever its partition
// (see Runner.revoked and withInFlight).
type recordContexts struct {
	mu     sync.Mutex
	parent context.Context
	byPart map[string]map[int32]partContext
	// revokes counts revoke callbacks that took partitions away, so that a
	// batch can tell one happened while it ran.
	revokes atomic.Int64
	// revoking is set while a revoke callback runs: the cache of of() is
	// then bypassed, since it may hold a context the revoke replaced.
	revoking atomic.Bool
	// replaced cancels the contexts a revoke replaced, which only the
	// record in flight still holds (release, or await half way).
	replaced []context.CancelFunc
	// callbacks counts every revoke and lost callback, empty ones too.
	// franz-go's transact session sets its own revoked or lost flag in the
	// first one after an End and swallows the rest until the next End
	// ends, so a callback it passes on, however empty, is the only sign
	// that the partitions may come back in a new assignment (rewindRest).
	callbacks atomic.Int64
	// The consuming goroutine's last answer: records come in runs of one
	// partition.
	lastTopic string
	lastPart  int32
	last      context.Context
	// busy is the record whose user code runs now (records run one at a
	// time, on the consuming goroutine), nil between records; a revoke
	// waits for it to finish before its partition is released (await).
	busy atomic.Pointer[kgo.Record]
	// freed, while a revoke waits (waiting), is closed by the next done;
	// done takes the lock only then, not for every record.
	freed   chan struct{}
	waiting atomic.Bool
}

type partContext struct {
	ctx    context.Context
	cancel context.CancelFunc
}

// reset makes parent the parent of every context handed out from now on
// and cancels those handed out so far.
func (c *recordContexts) reset(parent context.Context) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, ps := range c.byPart {
		for _, pc := range ps {
			pc.cancel()
		}
	}
	c.parent, c.byPart, c.last = parent, nil, nil
}

// of returns the context of rec's partition: live while the partition is
// assigned, cancelled once it is revoked.
func (c *recordContexts) of(rec *kgo.Record) context.Context {
	// The cache serves live contexts only: a cancelled one may have been
	// replaced by an assignment since.
	if !c.revoking.Load() && c.last != nil && rec.Partition == c.lastPart && rec.Topic == c.lastTopic && c.last.Err() == nil {
		return c.last
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	pc := c.entry(rec.Topic, rec.Partition)
	c.lastTopic, c.lastPart, c.last = rec.Topic, rec.Partition, pc.ctx
	return pc.ctx
}

// entry returns the context of a partition, made live if it has none;
// c.mu is held.
func (c *recordContexts) entry(topic string, p int32) partContext {
	if c.parent == nil {
		c.parent = context.Background()
	}
	if c.byPart == nil {
		c.byPart = make(map[string]map[int32]partContext)
	}
	ps := c.byPart[topic]
	if ps == nil {
		ps = make(map[int32]partContext)
		c.byPart[topic] = ps
	}
	pc, ok := ps[p]
	if !ok {
		pc.ctx, pc.cancel = context.WithCancel(c.parent)
		ps[p] = pc
	}
	return pc
}

// start returns rec's context (see of) and records that user code now
// runs rec, until done.
func (c *recordContexts) start(rec *kgo.Record) context.Context {
	ctx := c.of(rec)
	c.busy.Store(rec)
	return ctx
}

// done records that rec's user code returned, and wakes a revoke waiting
// for it.
func (c *recordContexts) done() {
	c.busy.Store(nil)
	if !c.waiting.Load() {
		return
	}
	c.mu.Lock()
	if c.freed != nil {
		close(c.freed)
		c.freed = nil
	}
	c.mu.Unlock()
}

// await returns once no user code runs a record of the partitions gone,
// or after bound; it logs what it waits for, and an error past the bound.
// Half way it cancels the record's context, so that a call waiting on it
// returns. A revoke must wait: cancelling the record's context does not
// stop user code that ignores it, and the partition's new owner would
// start the same record while its side effect still runs (twice with
// mark-after, never with mark-before); and a call that took effect but is
// cancelled before its answer fails, so the new owner runs it again.
// It runs in franz-go's rebalance callback, while the consuming goroutine
// goes on: the record in flight ends there without anything the callback
// holds, so the wait cannot deadlock; if franz-go runs the callback from
// a poll, no record is in flight.
func (c *recordContexts) await(gone map[string][]int32, bound time.Duration, group string, log *zap.Logger) {
	start := time.Now()
	deadline, grace := time.NewTimer(bound), time.NewTimer(bound/2)
	defer deadline.Stop()
	defer grace.Stop()
	logged := false
	for {
		freed, rec := c.inFlight(gone)
		if rec == nil {
			if logged {
				log.Info("revoke: the record in flight finished; releasing the partitions",
					zap.Any("partitions", gone), zap.Duration("waited", time.Since(start)))
			}
			return
		}
		if !logged {
			logged = true
			log.Info("revoke: waiting for user code still running a record of a revoked partition before releasing it; its context is cancelled after half of rebalance_timeout",
				zap.String("topic", rec.Topic), zap.Int32("partition", rec.Partition), zap.Int64("offset", rec.Offset),
				zap.Any("partitions", gone), zap.Duration("rebalance_timeout", bound))
		}
		select {
		case <-freed:
		case <-grace.C:
			log.Warn("revoke: user code still runs a record of a revoked partition after half of rebalance_timeout; cancelling its context",
				zap.String("topic", rec.Topic), zap.Int32("partition", rec.Partition), zap.Int64("offset", rec.Offset),
				zap.Duration("rebalance_timeout", bound))
			c.cancelInFlight()
		case <-deadline.C:
			log.Error("revoke: user code still runs a record of a revoked partition after rebalance_timeout; releasing the partition anyway, so its new owner may start the same record while this one runs (a side effect may repeat, or be skipped): make the code return when its context ends, or raise rebalance_timeout; see the group with `eosctl group lag "+group+"`",
				zap.String("topic", rec.Topic), zap.Int32("partition", rec.Partition), zap.Int64("offset", rec.Offset),
				zap.Duration("rebalance_timeout", bound))
			c.mu.Lock()
			c.freed = nil
			c.waiting.Store(false)
			c.mu.Unlock()
			return
		}
	}
}

// withInFlight is gone and the partition of the record in flight, if any.
// That partition stays assigned, but its record's context is replaced
// like a revoked one's, so that await cancels it half way: its later
// records get a live one.
func (c *recordContexts) withInFlight(gone map[string][]int32) map[string][]int32 {
	c.mu.Lock()
	defer c.mu.Unlock()
	rec := c.busy.Load()
	if rec == nil || slices.Contains(gone[rec.Topic], rec.Partition) {
		return gone
	}
	old := c.entry(rec.Topic, rec.Partition)
	c.replaced = append(c.replaced, old.cancel)
	fresh := partContext{}
	fresh.ctx, fresh.cancel = context.WithCancel(c.parent)
	c.byPart[rec.Topic][rec.Partition] = fresh
	wait := maps.Clone(gone)
	if wait == nil {
		wait = map[string][]int32{}
	}
	wait[rec.Topic] = append(slices.Clone(wait[rec.Topic]), rec.Partition)
	return wait
}

// inFlight returns the record of the partitions gone whose user code runs
// now, if any, and a channel closed when it returns.
func (c *recordContexts) inFlight(gone map[string][]int32) (chan struct{}, *kgo.Record) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.waiting.Store(true)
	if c.freed == nil {
		c.freed = make(chan struct{})
	}
	rec := c.busy.Load()
	if rec == nil || !slices.Contains(gone[rec.Topic], rec.Partition) {
		c.freed = nil
		c.waiting.Store(false)
		return nil, nil
	}
	return c.freed, rec
}

// revoke begins a revoke or lost callback: it counts it, so that a batch
// under way can tell (an exactly-once one then stops and aborts), and
// gives the partitions gone cancelled contexts, which their records get
// from now until assign. The record in flight keeps the live one it has
// until await cancels it, half way, or release does.
func (c *recordContexts) revoke(_ context.Context, _ *kgo.Client, gone map[string][]int32) {
	c.callbacks.Add(1)
	c.revoking.Store(true)
	c.mu.Lock()
	defer c.mu.Unlock()
	took := false
	for topic, parts := range gone {
		for _, p := range parts {
			took = true
			old := c.entry(topic, p)
			c.replaced = append(c.replaced, old.cancel)
			pc := partContext{}
			pc.ctx, pc.cancel = context.WithCancel(c.parent)
			pc.cancel()
			c.byPart[topic][p] = pc
		}
	}
	if took {
		c.revokes.Add(1)
	}
}

// cancelInFlight cancels the contexts the revoke under way replaced.
func (c *recordContexts) cancelInFlight() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, cancel := range c.replaced {
		cancel()
	}
	c.replaced = nil
}

// release ends a revoke: every context of the partitions gone is
// cancelled, and stays so until assign.
func (c *recordContexts) release() {
	c.cancelInFlight()
	c.revoking.Store(false)
}

// assign forgets the cancelled contexts of partitions assigned (again), so
// their records get live ones.
func (c *recordContexts) assign(_ context.Context, _ *kgo.Client, got map[string][]int32) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for topic, parts := range got {
		for _, p := range parts {
			if pc, ok := c.byPart[topic][p]; ok && pc.ctx.Err() != nil {
				delete(c.byPart[topic], p)
			}
		}
	}
}

// choosingPartitioner honours the partition a sink chose for a record
// (Partition 0 or more) and leaves the others to base, franz-go's default:
// murmur2 of the key as Java clients compute it, sticky batches without
// a key. franz-go calls a partitioner once per record unless it has
// OnNewBatch (then a second time, with Partition already set), so the
// wrapper must not have it: the default does not either.
type choosingPartitioner struct{ base kgo.Partitioner }

func (p choosingPartitioner) ForTopic(topic string) kgo.TopicPartitioner {
	tp := &choosingTopicPartitioner{base: p.base.ForTopic(topic)}
	tp.backup, _ = tp.base.(kgo.TopicBackupPartitioner)
	return tp
}

// defaultPartitioner is what franz-go uses when no partitioner is given.
func defaultPartitioner() kgo.Partitioner {
	return kgo.UniformBytesPartitioner(64<<10, true, true, nil)
}

type choosingTopicPartitioner struct {
	base   kgo.TopicPartitioner
	backup kgo.TopicBackupPartitioner
}

func (p *choosingTopicPartitioner) RequiresConsistency(r *kgo.Record) bool {
	return r.Partition >= 0 || p.base.RequiresConsistency(r)
}

func (p *choosingTopicPartitioner) Partition(r *kgo.Record, n int) int {
	if r.Partition >= 0 {
		return int(r.Partition)
	}
	return p.base.Partition(r, n)
}

func (p *choosingTopicPartitioner) PartitionByBackup(r *kgo.Record, n int, it kgo.TopicBackupIter) int {
	if r.Partition >= 0 {
		return int(r.Partition)
	}
	if p.backup != nil {
		return p.backup.PartitionByBackup(r, n, it)
	}
	return p.base.Partition(r, n)
}
