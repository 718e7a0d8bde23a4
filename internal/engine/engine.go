// Package engine runs one input record through a compiled topology and
// applies the error policies: what reaches Kafka is either every output of
// a record, or none of them plus (for dead-lettering) the original record.
// Only the runtime (package eos) uses it.
package engine

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/eosflow/eosflow/internal/store"

	"github.com/eosflow/eosflow/internal/graph"
	"github.com/eosflow/eosflow/processor"
	"github.com/eosflow/eosflow/state"
	"github.com/eosflow/eosflow/topology"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"
)

// ErrNoSource means a record arrived from a topic no source reads; the
// runtime subscribes only to source topics, so this points at a bug.
var ErrNoSource = errors.New("engine: no source reads this topic")

// Outcome is what became of one input record.
type Outcome int

// ErrDoomed, as the cause of the context a begin function returns, means
// the batch is doomed (its transaction will abort): the step is
// Interrupted without running user code.
var ErrDoomed = errors.New("engine: the batch is doomed; its user code does not run")

// Outcomes of Process.
const (
	Processed    Outcome = iota // every output was handed on
	DeadLettered                // the original went to the dead-letter topic
	Skipped                     // dropped under the Skip policy
	Failed                      // the Fail policy applies: abort and stop
	// Interrupted means user code failed after the record's context
	// ended (a shutdown or a revoke): no policy applies, nothing was
	// handed on, and the record is left for the next run.
	Interrupted
)

// Tally counts outcomes since the last Take, so that the runtime can count
// a batch's outcomes only once the batch commits.
type Tally struct {
	Processed    uint64
	DeadLettered uint64
	Skipped      uint64
	Retries      uint64
	// TimerFirings counts timer firings that ran their user code to the
	// end (a firing the node's policy skipped included).
	TimerFirings uint64
	// ExpiriesSkipped and ExpiriesDeadLettered count expired entries (a
	// join's unmatched records, final window results) whose emission
	// failed and that the failing node's policy dropped or dead-lettered;
	// the record that expired them counts as processed.
	ExpiriesSkipped      uint64
	ExpiriesDeadLettered uint64
}

// Engine runs records through one topology. It is not safe for concurrent
// use: the runtime keeps one per consuming goroutine.
type Engine struct {
	g     *graph.Graph
	log   *zap.Logger
	sleep func(context.Context, time.Duration) error
	// cur is shared with the graph's fused chains: the current record's
	// context and the node whose user code runs (see Enter).
	cur     *graph.Cursor
	slots   []any // per node, what its Init returned
	started bool
	// A step's outputs (a record's, an update's, a timer's) wait until
	// it succeeds: the first in first, since most records have one and
	// then need no slice, the others in more; outs counts them all.
	// firstNode and moreNode[i] are the sinks that emitted them; outIdx
	// is the one being passed to out (-1: outName, for a dead letter
	// from a node the topology does not know). See OutputNode.
	first     *kgo.Record
	firstNode int
	more      []*kgo.Record
	moreNode  []int
	outs      int
	outIdx    int
	outName   string
	// firstExp and moreExp are the expiries whose emission made each
	// output (nil: the step's own), outExp the one being passed to out;
	// see OutputExpiry.
	firstExp *graph.Expiry
	moreExp  []*graph.Expiry
	outExp   *graph.Expiry
	// refused are the expired entries an output of which the broker
	// refused; see RefuseExpiry.
	refused map[expiryID]refusal

	limits     func(topic string) (maxBytes int, compacted bool, err error)
	limitTopic string                // topic of the last output checked
	limit      topicLimit            // its limits
	limitCache map[string]topicLimit // every topic asked so far
	partitions func(topic string) (int32, error)
	stores     func(name string, task state.Task) (*store.Store, error)
	globals    func(name string) (graph.GlobalStore, error)
	curTopic   string // the current record's topic and partition: its task
	curPart    int32
	curRec     *kgo.Record  // the current input record
	hold       holding      // updates held back for the end of the batch
	timers     timerNodes   // nodes that scheduled timers; see timer.go
	att        attempts     // the stores a retried call reached; see attempt.go
	exp        expiryScopes // expiries being emitted; see expiry.go

	lastSrc graph.Source // the source of curTopic; nil: look it up

	tally Tally

	appID        string
	lastInternal string // suffix of the last internal topic written
	internalName string // its full name
}

// Option configures an Engine.
type Option interface{ apply(*Engine) }

type optFunc func(*Engine)

func (f optFunc) apply(e *Engine) { f(e) }

// Logger sets where skips, dead letters and retries are logged, overriding
// the default no-op logger.
func Logger(l *zap.Logger) Option { return optFunc(func(e *Engine) { e.log = l }) }

// AppID sets the application id, which names the internal topics
// (repartition topics) the engine writes and reads; without it they are
// named with topology.AppIDPlaceholder.
func AppID(id string) Option { return optFunc(func(e *Engine) { e.appID = id }) }

// Sleep replaces the retry wait, so tests need not wait for real.
func Sleep(fn func(context.Context, time.Duration) error) Option {
	return optFunc(func(e *Engine) { e.sleep = fn })
}

// Partitions says how many partitions an output topic has, for sinks with
// their own partitioner; without it such sinks fail.
func Partitions(fn func(topic string) (int32, error)) Option {
	return optFunc(func(e *Engine) { e.partitions = fn })
}

// Stores gives user code the stores of the current record's task: fn
// returns the store called name of task, ready for the batch. Without it a
// topology with stores fails on its first record.
func Stores(fn func(name string, task state.Task) (*store.Store, error)) Option {
	return optFunc(func(e *Engine) { e.stores = fn })
}

// Globals gives joins the global tables: fn returns the one called name,
// which the runtime keeps current between batches. Without it a topology
// with global tables fails on its first join.
func Globals(fn func(name string) (graph.GlobalStore, error)) Option {
	return optFunc(func(e *Engine) { e.globals = fn })
}

// RecordOverhead is what OutputLimits adds to an output's key, value and
// header bytes to estimate its encoded size: a record batch header (61
// bytes) plus the record's own framing (length, attributes, timestamp and
// offset deltas, key and value lengths) when it is alone in its batch,
// which is how a broker sees a record too large to share a batch.
// Compression is ignored, so the estimate errs on the large side.
const RecordOverhead = 70

// OutputLimits makes Emit check every output against its topic before
// accepting it, overriding the default of no check: fn says how many bytes
// the topic accepts (its max.message.bytes, or the producer's limit if
// smaller; 0 or less: no size check) and whether it is compacted. An output
// larger than maxBytes (key, value and headers plus RecordOverhead), or
// without a key for a compacted topic, is a NodeError of its sink wrapping
// processor.ErrRecordTooLarge or processor.ErrNoKeyForCompactedTopic,
// handled by the sink's final policy without retries; otherwise the broker
// would reject it and abort the whole batch. An error from fn (the topic
// does not exist) is the sink's error likewise. fn is asked once per topic
// for the engine's life, and again after an error.
func OutputLimits(fn func(topic string) (maxBytes int, compacted bool, err error)) Option {
	return optFunc(func(e *Engine) { e.limits = fn })
}

// topicLimit is one answer of the OutputLimits function.
type topicLimit struct {
	maxBytes  int
	compacted bool
}

// New validates t and returns an engine for it.
func New(t *topology.Topology, opts ...Option) (*Engine, error) {
	if t == nil {
		return nil, errors.New("eos: nil topology; build one with topology.New")
	}
	e := &Engine{log: zap.NewNop(), sleep: sleepCtx, outIdx: -1}
	for _, o := range opts {
		o.apply(e)
	}
	g, err := graph.Compile(t, e.appID)
	if err != nil {
		return nil, err
	}
	e.g, e.slots = g, make([]any, len(g.Nodes))
	if g.Cursor == nil {
		g.Cursor = &graph.Cursor{}
	}
	e.cur = g.Cursor
	e.cur.Ctx = context.Background()
	return e, nil
}

// Partitioned reports whether a sink chooses its own partitions, so that
// the producer must honour a record's partition.
func (e *Engine) Partitioned() bool { return e.g.Partitioned }

// StoreSpecs lists the stores the topology declares.
func (e *Engine) StoreSpecs() []graph.Store { return e.g.Stores }

// Start runs the Init of every node that has one (custom processors,
// Dedup nodes), in
// the order they were added; ctx ends when the pipeline stops. It is
// called once before the first record; Process calls it if nobody did.
// If an Init fails, the nodes started before it are closed.
func (e *Engine) Start(ctx context.Context) error {
	if e.started {
		return nil
	}
	e.started = true
	for i, n := range e.g.Nodes {
		if n.Init == nil {
			continue
		}
		slot, err := n.Init(ctx)
		if err != nil {
			// Those started before it are closed, as if the pipeline
			// had stopped.
			if cerr := e.Close(); cerr != nil {
				err = errors.Join(err, cerr)
			}
			return err
		}
		e.slots[i] = slot
	}
	return nil
}

// Close runs the Close of every started node, in reverse order, and
// returns their errors joined.
func (e *Engine) Close() error {
	var errs []error
	for i := len(e.g.Nodes) - 1; i >= 0; i-- {
		n := e.g.Nodes[i]
		if n.Close != nil && e.slots[i] != nil {
			if err := n.Close(e.slots[i]); err != nil {
				errs = append(errs, &topology.NodeError{Node: n.Name, Err: fmt.Errorf("close: %w", err)})
			}
			e.slots[i] = nil
		}
	}
	return errors.Join(errs...)
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Take returns the outcomes counted since the last Take and starts anew.
func (e *Engine) Take() Tally {
	t := e.tally
	e.tally = Tally{}
	return t
}

// Process runs r through the graph. Only when the whole record succeeds
// are its outputs passed to out (and the updates its aggregations hold
// back kept for Flush); under DeadLetter, out gets the original record for
// the dead-letter topic instead. A non-nil error (Outcome
// Failed) means the Fail policy applies: the caller must abort the
// transaction. ctx is the record's context, the one user code sees: once
// it ends (a shutdown or a revoke), retry waits are cut short, and a
// failure of user code is Interrupted rather than given to a policy,
// since the error is most likely the cancellation itself.
func (e *Engine) Process(ctx context.Context, r *kgo.Record, out func(*kgo.Record)) (Outcome, error) {
	if !e.started {
		if err := e.Start(ctx); err != nil {
			return Failed, &processor.RecordError{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset, Err: err}
		}
	}
	// Records come in runs of one topic, so remember the last source
	// rather than hashing the topic of every record. Storing a pointer
	// into the heap costs a GC write barrier while the collector marks,
	// which at these allocation rates is much of the time, so the topic
	// is not written again either.
	src := e.lastSrc
	if src == nil || r.Topic != e.curTopic {
		src = e.g.Sources[r.Topic]
		e.curTopic, e.lastSrc = r.Topic, src
	}
	if src == nil {
		return Failed, &processor.RecordError{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset, Err: ErrNoSource}
	}
	e.cur.Ctx = ctx
	e.curPart = r.Partition
	if e.g.Holds {
		e.curRec = r // for Hold only
	}
	e.dropOutputs()
	if len(e.hold.staged) > 0 {
		e.hold.begin()
	}
	e.att.end()
	err := e.run(src, r)
	if err == nil {
		e.passOutputs(out)
		if len(e.hold.staged) > 0 {
			e.hold.keep(len(e.g.Nodes))
		}
		e.tally.Processed++
		return Processed, nil
	}
	return e.failure(ctx, r, err, out)
}

// failure settles r, whose processing failed with err; a function of
// its own keeps Process's frame small.
func (e *Engine) failure(ctx context.Context, r *kgo.Record, err error, out func(*kgo.Record)) (Outcome, error) {
	if expiryFailed(err) {
		return Failed, err // charged to the expired entry, not to r
	}
	var ne *topology.NodeError
	if !errors.As(err, &ne) {
		return Failed, &processor.RecordError{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset, Err: err}
	}
	if ctx.Err() != nil && ne.Stack == nil {
		e.log.Debug("record interrupted: its context ended", zap.String("node", ne.Node), zap.Error(ne.Err),
			zap.String("topic", r.Topic), zap.Int32("partition", r.Partition), zap.Int64("offset", r.Offset))
		return Interrupted, nil
	}
	return e.settle(r, ne, e.policyOf(ne), out)
}

// policyOf is the final policy for ne: its node's (its Late policy for a
// late record), else the topology's default.
func (e *Engine) policyOf(ne *topology.NodeError) graph.Policy {
	policy := e.g.Default
	if i := e.nodeIndex(ne.Node); i >= 0 {
		policy = e.g.Nodes[i].Policy
		if late := e.g.Nodes[i].Late; late != nil && errors.Is(ne.Err, topology.ErrLate) {
			policy = *late
		}
	}
	return policy.Final()
}

// nodeIndex is the index of the node called name, or -1.
func (e *Engine) nodeIndex(name string) int {
	for i, n := range e.g.Nodes {
		if n.Name == name {
			return i
		}
	}
	return -1
}

// Reject applies the final policy of the sink node called sink to input
// record r, one of whose outputs from that sink the broker rejected with
// err (e.g. MESSAGE_TOO_LARGE or INVALID_RECORD): the runtime calls it
// instead of Process when it runs r again, so that one bad output goes
// where the sink's policy says instead of failing every batch that holds
// it. It counts, logs, dead-letters (out gets r with error headers naming
// sink and err) and fails (a *processor.RecordError naming r, wrapping a
// NodeError naming sink and err) exactly as Process does. Retries are
// skipped: the broker would reject the same output again. An unknown sink
// name gets the topology's default policy.
func (e *Engine) Reject(r *kgo.Record, sink string, err error, out func(*kgo.Record)) (Outcome, error) {
	if err == nil {
		err = errors.New("the broker rejected an output without giving a reason")
	}
	ne, ok := err.(*topology.NodeError)
	if !ok || ne.Node != sink {
		ne = &topology.NodeError{Node: sink, Err: err}
	}
	policy := e.g.Default
	if i := e.nodeIndex(sink); i >= 0 {
		policy = e.g.Nodes[i].Policy
	}
	return e.settle(r, ne, policy.Final(), out)
}

// OutputNode names the node that produced the record being passed to out,
// for a runtime that must trace a broker's rejection of that record back to
// its sink (see Reject). It is valid only during Process's and Reject's
// calls of out; for a dead letter it names the node that failed.
func (e *Engine) OutputNode() string {
	if e.outIdx >= 0 && e.outIdx < len(e.g.Nodes) {
		return e.g.Nodes[e.outIdx].Name
	}
	return e.outName
}

// settle applies policy, a final one, to r after ne.
func (e *Engine) settle(r *kgo.Record, ne *topology.NodeError, policy graph.Policy, out func(*kgo.Record)) (Outcome, error) {
	fields := []zap.Field{
		zap.String("node", ne.Node), zap.Error(ne.Err),
		zap.String("topic", r.Topic), zap.Int32("partition", r.Partition), zap.Int64("offset", r.Offset),
	}
	switch policy.Kind {
	case graph.PolicySkip:
		e.tally.Skipped++
		e.log.Warn("record skipped", fields...)
		return Skipped, nil
	case graph.PolicyDeadLetter:
		e.tally.DeadLettered++
		e.log.Warn("record dead-lettered", append(fields, zap.String("dlq", policy.Topic))...)
		e.outIdx, e.outName, e.outExp = e.nodeIndex(ne.Node), ne.Node, nil
		out(deadLetter(policy.Topic, r, ne))
		return DeadLettered, nil
	}
	return Failed, &processor.RecordError{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset, Err: ne}
}

// run turns a panic in user code into a NodeError carrying the stack.
func (e *Engine) run(src graph.Source, r *kgo.Record) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = &topology.NodeError{Node: e.currentName(), Err: fmt.Errorf("panic: %v", v), Stack: debug.Stack()}
		}
	}()
	return src(e, r)
}

// Dead-letter header size limits: a record is dead-lettered beside its own
// key, value and headers, so the error text and stack added to it must stay
// small enough that the dead letter still fits the topic's
// max.message.bytes, whatever an error message or a deep stack holds.
const (
	maxErrorHeader = 8 << 10
	maxStackHeader = 32 << 10
)

// deadLetter builds the dead letter of r: its key, value and timestamp, its
// headers less any dead-letter headers it already carried (forged ones, or
// those of an earlier dead-lettering that a replay kept), so each
// dead-letter header appears once and says what happened this time, then
// the dead-letter headers, their text valid UTF-8 and bounded in size.
func deadLetter(topic string, r *kgo.Record, ne *topology.NodeError) *kgo.Record {
	h := make([]kgo.RecordHeader, 0, len(r.Headers)+7)
	for _, rh := range r.Headers {
		if !isDeadLetterHeader(rh.Key) {
			h = append(h, rh)
		}
	}
	h = append(h,
		kgo.RecordHeader{Key: processor.HeaderNode, Value: headerText(ne.Node, maxErrorHeader)},
		kgo.RecordHeader{Key: processor.HeaderError, Value: headerText(ne.Err.Error(), maxErrorHeader)},
		kgo.RecordHeader{Key: processor.HeaderSourceTopic, Value: []byte(r.Topic)},
		kgo.RecordHeader{Key: processor.HeaderSourcePartition, Value: strconv.AppendInt(nil, int64(r.Partition), 10)},
		kgo.RecordHeader{Key: processor.HeaderSourceOffset, Value: strconv.AppendInt(nil, r.Offset, 10)},
		kgo.RecordHeader{Key: processor.HeaderSourceTimestamp, Value: strconv.AppendInt(nil, r.Timestamp.UnixMilli(), 10)},
	)
	if ne.Stack != nil {
		h = append(h, kgo.RecordHeader{Key: processor.HeaderStack, Value: headerText(string(ne.Stack), maxStackHeader)})
	}
	return &kgo.Record{Topic: topic, Partition: graph.AnyPartition, Key: r.Key, Value: r.Value, Headers: h, Timestamp: r.Timestamp}
}

// isDeadLetterHeader reports whether key is one of the headers deadLetter
// adds.
func isDeadLetterHeader(key string) bool {
	switch key {
	case processor.HeaderNode, processor.HeaderError, processor.HeaderStack,
		processor.HeaderSourceTopic, processor.HeaderSourcePartition,
		processor.HeaderSourceOffset, processor.HeaderSourceTimestamp,
		processor.HeaderExpiryNode, processor.HeaderExpiryWhat,
		processor.HeaderExpirySourceTopic, processor.HeaderExpirySourcePartition,
		processor.HeaderExpirySourceOffset, processor.HeaderExpirySourceTimestamp:
		return true
	}
	return false
}

// headerText returns s as valid UTF-8 (invalid bytes become U+FFFD), cut
// at a rune boundary to at most limit bytes plus a note of how much was
// cut.
func headerText(s string, limit int) []byte {
	s = strings.ToValidUTF8(s, "\uFFFD")
	if len(s) <= limit {
		return []byte(s)
	}
	cut := limit
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return fmt.Appendf([]byte(s[:cut]), "… [truncated %d bytes]", len(s)-cut)
}

// setTask makes r, with context ctx, the current record of a step that
// is not Process's (a held update, a timer).
func (e *Engine) setTask(ctx context.Context, r *kgo.Record) {
	e.cur.Ctx, e.curRec = ctx, r
	e.curTopic, e.curPart = r.Topic, r.Partition
	e.lastSrc = nil // Process's cache is for another topic now
	e.att.end()
}

// Context implements graph.Exec: the current record's context.
func (e *Engine) Context() context.Context { return e.cur.Ctx }

// Enter implements graph.Exec. It runs several times per record, so it
// keeps an index rather than a pointer, which would cost a write barrier
// (see Process).
func (e *Engine) Enter(node int) { e.cur.Node = node }

// Slot implements graph.Exec.
func (e *Engine) Slot(node int) any { return e.slots[node] }

// Partitions implements graph.Exec.
func (e *Engine) Partitions(topic string) (int32, error) {
	if e.partitions == nil {
		return 0, fmt.Errorf("the partition count of topic %q is unknown here", topic)
	}
	return e.partitions(topic)
}

// Store implements graph.Exec.
func (e *Engine) Store(name string) (*store.Store, error) {
	if e.stores == nil {
		return nil, fmt.Errorf("store %q: this engine has no stores", name)
	}
	topic := e.curTopic
	if t, ok := e.g.TaskTopics[topic]; ok {
		topic = t // co-partitioned: the group's task
	}
	s, err := e.stores(name, state.Task{Topic: topic, Partition: e.curPart})
	if e.att.on && err == nil && s != nil {
		e.att.reached(s)
	}
	if len(e.exp.open) > 0 && err == nil && s != nil {
		e.exp.reached(s)
	}
	return s, err
}

// Global implements graph.Exec.
func (e *Engine) Global(name string) (graph.GlobalStore, error) {
	if e.globals == nil {
		return nil, fmt.Errorf("global table %q: this engine has no global tables", name)
	}
	return e.globals(name)
}

// GlobalSpecs lists the global tables the topology declares.
func (e *Engine) GlobalSpecs() []graph.Global { return e.g.Globals }

// currentName names the node Enter last named, for attributing a panic.
func (e *Engine) currentName() string {
	if i := e.cur.Node; i >= 0 && i < len(e.g.Nodes) {
		return e.g.Nodes[i].Name
	}
	return "unknown"
}

// Retry implements graph.Exec: it waits out the node's backoff and says
// whether to call again. Once the record's context ends it stops retrying,
// so a shutdown is not held up by backoff.
func (e *Engine) Retry(node int, attempt int, err error) bool {
	n := e.g.Nodes[node]
	policy := n.Policy
	if policy.Kind != graph.PolicyRetry || attempt+1 >= policy.Attempts {
		return false
	}
	if e.cur.Ctx.Err() == nil {
		d := policy.Delay(attempt)
		e.log.Debug("retrying node", zap.String("node", n.Name), zap.Int("attempt", attempt+1), zap.Duration("backoff", d), zap.Error(err))
		if e.sleep(e.cur.Ctx, d) == nil {
			e.tally.Retries++
			return true
		}
	}
	e.log.Debug("retries cut short by cancellation", zap.String("node", n.Name), zap.Int("attempt", attempt+1), zap.Error(err))
	return false
}

// Emit implements graph.Exec, holding outputs until the record is done.
// With OutputLimits it first checks o against its topic's limits.
func (e *Engine) Emit(node int, o graph.Output) error {
	if o.Internal {
		if o.Topic != e.lastInternal {
			e.lastInternal, e.internalName = o.Topic, e.resolve(o.Topic)
		}
		o.Topic = e.internalName
	}
	return e.EmitRecord(node, &kgo.Record{Topic: o.Topic, Partition: o.Partition, Key: o.Key, Value: o.Value, Headers: o.Headers, Timestamp: o.Timestamp})
}

// EmitRecord implements graph.Exec: Emit of an output the sink built.
func (e *Engine) EmitRecord(node int, rec *kgo.Record) error {
	if e.limits != nil {
		if err := e.checkLimits(rec); err != nil {
			return &topology.NodeError{Node: e.g.Nodes[node].Name, Err: err}
		}
	}
	e.keepOutput(node, rec)
	return nil
}

// keepOutput holds rec, emitted by node, until the step succeeds.
func (e *Engine) keepOutput(node int, rec *kgo.Record) {
	var x *graph.Expiry
	if n := len(e.exp.open); n > 0 {
		x = e.exp.open[n-1].x
	}
	if e.outs == 0 {
		e.first, e.firstNode, e.firstExp = rec, node, x
	} else {
		e.more = append(e.more, rec)
		e.moreNode = append(e.moreNode, node)
		e.moreExp = append(e.moreExp, x)
	}
	e.outs++
}

// dropOutputs forgets the outputs emitted so far, and the step's expiry
// outcomes, as a step begins.
func (e *Engine) dropOutputs() {
	e.outs = 0
	e.exp.skipped, e.exp.dead = 0, 0
	if len(e.more) > 0 {
		clear(e.moreExp)
		e.more = e.more[:0]
		e.moreNode = e.moreNode[:0]
		e.moreExp = e.moreExp[:0]
	}
}

// passOutputs hands the outputs of the step that succeeded to out, in the
// order they were emitted, and counts its expiry outcomes.
func (e *Engine) passOutputs(out func(*kgo.Record)) {
	if e.exp.skipped+e.exp.dead > 0 {
		e.settleExpiries()
	}
	if e.outs == 0 {
		return
	}
	e.outIdx, e.outExp = e.firstNode, e.firstExp
	out(e.first)
	for i, o := range e.more {
		e.outIdx, e.outExp = e.moreNode[i], e.moreExp[i]
		out(o)
	}
	e.outExp = nil
}

// resolve names the app's internal topic whose suffix is suffix.
func (e *Engine) resolve(suffix string) string {
	id := e.appID
	if id == "" {
		id = topology.AppIDPlaceholder
	}
	return id + "-" + suffix
}

// CoPartitioned lists the groups of input topics that share tasks (see
// graph.Graph.CoPartitioned), each sorted.
func (e *Engine) CoPartitioned() [][]string { return e.g.CoPartitioned }

// TaskTopics maps each co-partitioned topic to the topic naming its tasks.
func (e *Engine) TaskTopics() map[string]string { return e.g.TaskTopics }

// Repartitions lists the topology's repartition topics, named after the
// app id: the runtime creates them and reads them as inputs.
func (e *Engine) Repartitions() []graph.Repartition { return e.g.Repartitions }

// checkLimits returns why the broker would reject o, or nil.
func (e *Engine) checkLimits(o *kgo.Record) error {
	if o.Topic != e.limitTopic {
		l, ok := e.limitCache[o.Topic]
		if !ok {
			maxBytes, compacted, err := e.limits(o.Topic)
			if err != nil {
				return err
			}
			l = topicLimit{maxBytes: maxBytes, compacted: compacted}
			if e.limitCache == nil {
				e.limitCache = map[string]topicLimit{}
			}
			e.limitCache[o.Topic] = l
		}
		e.limitTopic, e.limit = o.Topic, l
	}
	if e.limit.compacted && o.Key == nil {
		return fmt.Errorf("%w: topic %q has cleanup.policy=compact and the broker rejects records without a key there; "+
			"set a key before the sink, or write to a topic that is not compacted", processor.ErrNoKeyForCompactedTopic, o.Topic)
	}
	if e.limit.maxBytes > 0 {
		size := RecordOverhead + len(o.Key) + len(o.Value)
		for _, h := range o.Headers {
			size += len(h.Key) + len(h.Value)
		}
		if size > e.limit.maxBytes {
			return fmt.Errorf("%w: about %d bytes for topic %q, over its limit of %d; raise max.message.bytes on the topic "+
				"(and the producer's limit, kgo.ProducerBatchMaxBytes), or make the record smaller", processor.ErrRecordTooLarge, size, o.Topic, e.limit.maxBytes)
		}
	}
	return nil
}
