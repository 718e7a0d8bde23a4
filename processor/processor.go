// Package processor runs one input record through a topology and applies the
// error policies: what reaches Kafka is either every output of a record, or
// none of them plus (for dead-lettering) the original record.
package processor

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/eosflow/eosflow/topology"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"
)

// Dead-letter headers, added after the original record's own headers.
const (
	HeaderNode            = "eosflow.error.node"
	HeaderError           = "eosflow.error.message"
	HeaderStack           = "eosflow.error.stack"
	HeaderSourceTopic     = "eosflow.source.topic"
	HeaderSourcePartition = "eosflow.source.partition"
	HeaderSourceOffset    = "eosflow.source.offset"
	HeaderSourceTimestamp = "eosflow.source.timestamp"
)

// Outcome is what became of one input record.
type Outcome int

// Outcomes of Process.
const (
	Processed    Outcome = iota // every output was handed on
	DeadLettered                // the original went to the dead-letter topic
	Skipped                     // dropped under the Skip policy
	Failed                      // the Fail policy applies: abort and stop
)

// Stats counts outcomes since the processor was made; safe to read from
// any goroutine.
type Stats struct {
	Processed    uint64
	DeadLettered uint64
	Skipped      uint64
	Retries      uint64
	Failed       uint64
}

// Processor runs records through one topology. It is not safe for
// concurrent use: the runtime keeps one per consuming goroutine.
type Processor struct {
	t       *topology.Topology
	log     *zap.Logger
	sleep   func(context.Context, time.Duration) error
	ctx     context.Context
	cur     int // index of the node whose user code runs; see Enter
	pending []*kgo.Record
	// pendingNode[i] is the index of the sink that emitted pending[i];
	// outIdx is the one being passed to out (-1: outName, for a dead
	// letter from a node the topology does not know). See OutputNode.
	pendingNode []int
	outIdx      int
	outName     string

	limits     func(topic string) (maxBytes int, compacted bool)
	limitTopic string                // topic of the last output checked
	limit      topicLimit            // its limits
	limitCache map[string]topicLimit // every topic asked so far

	lastTopic string         // topic of the previous record
	lastSrc   *topology.Node // its source node; nil before the first record

	processed, deadLettered, skipped, retries, failed atomic.Uint64
}

// Option configures a Processor.
type Option interface{ apply(*Processor) }

type optFunc func(*Processor)

func (f optFunc) apply(p *Processor) { f(p) }

// Logger sets where skips, dead letters and retries are logged, overriding
// the default no-op logger.
func Logger(l *zap.Logger) Option { return optFunc(func(p *Processor) { p.log = l }) }

// WithSleep replaces the retry wait, so tests need not wait for real.
func WithSleep(fn func(context.Context, time.Duration) error) Option {
	return optFunc(func(p *Processor) { p.sleep = fn })
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
// ErrRecordTooLarge or ErrNoKeyForCompactedTopic, handled by the sink's
// Final() policy without retries; otherwise the broker would reject it and
// abort the whole batch. fn is asked once per topic for the processor's
// life.
func OutputLimits(fn func(topic string) (maxBytes int, compacted bool)) Option {
	return optFunc(func(p *Processor) { p.limits = fn })
}

// topicLimit is one answer of the OutputLimits function.
type topicLimit struct {
	maxBytes  int
	compacted bool
}

// New validates t and returns a processor for it.
func New(t *topology.Topology, opts ...Option) (*Processor, error) {
	if t == nil {
		return nil, errors.New("processor: nil topology; build one with topology.New")
	}
	if err := t.Validate(); err != nil {
		return nil, err
	}
	p := &Processor{t: t, log: zap.NewNop(), sleep: sleepCtx, ctx: context.Background(), outIdx: -1}
	for _, o := range opts {
		o.apply(p)
	}
	return p, nil
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

// Stats returns the counters so far.
func (p *Processor) Stats() Stats {
	return Stats{
		Processed:    p.processed.Load(),
		DeadLettered: p.deadLettered.Load(),
		Skipped:      p.skipped.Load(),
		Retries:      p.retries.Load(),
		Failed:       p.failed.Load(),
	}
}

// Process runs r through the graph. Only when the whole record succeeds
// are its outputs passed to out; under DeadLetter, out gets the original
// record for the dead-letter topic instead. A non-nil error (Outcome
// Failed) means the Fail policy applies: the caller must abort the
// transaction. A cancelled ctx (a shutdown) changes no policy, so the open
// batch can still commit; it only cuts retry waits short, and then the
// policy after the retries applies at once.
func (p *Processor) Process(ctx context.Context, r *kgo.Record, out func(*kgo.Record)) (Outcome, error) {
	// Records come in runs of one topic, so remember the last source
	// rather than hashing the topic of every record.
	src := p.lastSrc
	if src == nil || r.Topic != p.lastTopic {
		src = p.t.SourceFor(r.Topic)
		p.lastTopic, p.lastSrc = r.Topic, src
	}
	if src == nil {
		p.failed.Add(1)
		return Failed, &RecordError{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset, Err: ErrNoSource}
	}
	p.ctx = ctx
	p.pending = p.pending[:0]
	p.pendingNode = p.pendingNode[:0]
	err := p.run(src, r)
	if err == nil {
		for i, o := range p.pending {
			p.outIdx = p.pendingNode[i]
			out(o)
		}
		p.processed.Add(1)
		return Processed, nil
	}
	var ne *topology.NodeError
	if !errors.As(err, &ne) {
		p.failed.Add(1)
		return Failed, &RecordError{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset, Err: err}
	}
	policy := topology.Fail()
	if n := p.t.Node(ne.Node); n != nil {
		policy = n.Policy()
	}
	return p.settle(r, ne, policy.Final(), out)
}

// Reject applies the Final() policy of the sink node called sink to input
// record r, one of whose outputs from that sink the broker rejected with
// err (e.g. MESSAGE_TOO_LARGE or INVALID_RECORD): the runtime calls it
// instead of Process when it runs r again, so that one bad output goes
// where the sink's policy says instead of failing every batch that holds
// it. It counts, logs, dead-letters (out gets r with error headers naming
// sink and err) and fails (a *RecordError naming r, wrapping a NodeError
// naming sink and err) exactly as Process does. Retries are skipped: the
// broker would reject the same output again. An unknown sink name gets the
// topology's default policy.
func (p *Processor) Reject(ctx context.Context, r *kgo.Record, sink string, err error, out func(*kgo.Record)) (Outcome, error) {
	if err == nil {
		err = errors.New("the broker rejected an output without giving a reason")
	}
	ne, ok := err.(*topology.NodeError)
	if !ok || ne.Node != sink {
		ne = &topology.NodeError{Node: sink, Err: err}
	}
	policy := p.t.DefaultPolicy()
	if n := p.t.Node(sink); n != nil {
		policy = n.Policy()
	}
	return p.settle(r, ne, policy.Final(), out)
}

// OutputNode names the node that produced the record being passed to out,
// for a runtime that must trace a broker's rejection of that record back to
// its sink (see Reject). It is valid only during Process's and Reject's
// calls of out; for a dead letter it names the node that failed.
func (p *Processor) OutputNode() string {
	if nodes := p.t.Nodes(); p.outIdx >= 0 && p.outIdx < len(nodes) {
		return nodes[p.outIdx].Name()
	}
	return p.outName
}

// settle applies policy, a Final() one, to r after ne.
func (p *Processor) settle(r *kgo.Record, ne *topology.NodeError, policy topology.ErrorPolicy, out func(*kgo.Record)) (Outcome, error) {
	fields := []zap.Field{
		zap.String("node", ne.Node), zap.Error(ne.Err),
		zap.String("topic", r.Topic), zap.Int32("partition", r.Partition), zap.Int64("offset", r.Offset),
	}
	switch policy.Kind {
	case topology.PolicySkip:
		p.skipped.Add(1)
		p.log.Warn("record skipped", fields...)
		return Skipped, nil
	case topology.PolicyDeadLetter:
		p.deadLettered.Add(1)
		p.log.Warn("record dead-lettered", append(fields, zap.String("dlq", policy.Topic))...)
		p.outIdx, p.outName = -1, ne.Node
		if n := p.t.Node(ne.Node); n != nil {
			p.outIdx = n.Index()
		}
		out(deadLetter(policy.Topic, r, ne))
		return DeadLettered, nil
	}
	p.failed.Add(1)
	return Failed, &RecordError{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset, Err: ne}
}

// run turns a panic in user code into a NodeError carrying the stack.
func (p *Processor) run(src *topology.Node, r *kgo.Record) (err error) {
	p.Enter(src)
	defer func() {
		if v := recover(); v != nil {
			err = &topology.NodeError{Node: p.currentName(), Err: fmt.Errorf("panic: %v", v), Stack: debug.Stack()}
		}
	}()
	return src.Process(p, r)
}

func deadLetter(topic string, r *kgo.Record, ne *topology.NodeError) *kgo.Record {
	h := make([]kgo.RecordHeader, 0, len(r.Headers)+7)
	h = append(h, r.Headers...)
	h = append(h,
		kgo.RecordHeader{Key: HeaderNode, Value: []byte(ne.Node)},
		kgo.RecordHeader{Key: HeaderError, Value: []byte(ne.Err.Error())},
		kgo.RecordHeader{Key: HeaderSourceTopic, Value: []byte(r.Topic)},
		kgo.RecordHeader{Key: HeaderSourcePartition, Value: strconv.AppendInt(nil, int64(r.Partition), 10)},
		kgo.RecordHeader{Key: HeaderSourceOffset, Value: strconv.AppendInt(nil, r.Offset, 10)},
		kgo.RecordHeader{Key: HeaderSourceTimestamp, Value: strconv.AppendInt(nil, r.Timestamp.UnixMilli(), 10)},
	)
	if ne.Stack != nil {
		h = append(h, kgo.RecordHeader{Key: HeaderStack, Value: ne.Stack})
	}
	return &kgo.Record{Topic: topic, Key: r.Key, Value: r.Value, Headers: h, Timestamp: r.Timestamp}
}

// Enter implements topology.Exec. It runs several times per record, so it
// keeps n's index rather than a pointer: storing a pointer into the heap
// costs a GC write barrier while the collector marks, which at these
// allocation rates is much of the time.
func (p *Processor) Enter(n *topology.Node) { p.cur = n.Index() }

// currentName names the node Enter last named, for attributing a panic.
func (p *Processor) currentName() string {
	if nodes := p.t.Nodes(); p.cur >= 0 && p.cur < len(nodes) {
		return nodes[p.cur].Name()
	}
	return "unknown"
}

// Retry implements topology.Exec: it waits out the node's backoff and says
// whether to call again. Once the context is cancelled it stops retrying,
// so a shutdown is not held up by backoff and the policy after the retries
// decides the record's fate.
func (p *Processor) Retry(n *topology.Node, attempt int, err error) bool {
	policy := n.Policy()
	if policy.Kind != topology.PolicyRetry || attempt+1 >= policy.Attempts {
		return false
	}
	if p.ctx.Err() == nil {
		d := policy.Delay(attempt)
		p.log.Debug("retrying node", zap.String("node", n.Name()), zap.Int("attempt", attempt+1), zap.Duration("backoff", d), zap.Error(err))
		if p.sleep(p.ctx, d) == nil {
			p.retries.Add(1)
			return true
		}
	}
	p.log.Debug("retries cut short by cancellation", zap.String("node", n.Name()), zap.Int("attempt", attempt+1), zap.Error(err))
	return false
}

// Emit implements topology.Exec, holding outputs until the record is done.
// With OutputLimits it first checks o against its topic's limits.
func (p *Processor) Emit(n *topology.Node, o topology.Output) error {
	if o.Topic == "" {
		return &topology.NodeError{Node: n.Name(), Err: errors.New("sink chose an empty topic; return a topic name from the ToTopicFunc function")}
	}
	if p.limits != nil {
		if err := p.checkLimits(&o); err != nil {
			return &topology.NodeError{Node: n.Name(), Err: err}
		}
	}
	p.pending = append(p.pending, &kgo.Record{Topic: o.Topic, Key: o.Key, Value: o.Value, Headers: o.Headers, Timestamp: o.Timestamp})
	p.pendingNode = append(p.pendingNode, n.Index())
	return nil
}

// checkLimits returns why the broker would reject o, or nil.
func (p *Processor) checkLimits(o *topology.Output) error {
	if o.Topic != p.limitTopic {
		l, ok := p.limitCache[o.Topic]
		if !ok {
			maxBytes, compacted := p.limits(o.Topic)
			l = topicLimit{maxBytes: maxBytes, compacted: compacted}
			if p.limitCache == nil {
				p.limitCache = map[string]topicLimit{}
			}
			p.limitCache[o.Topic] = l
		}
		p.limitTopic, p.limit = o.Topic, l
	}
	if p.limit.compacted && o.Key == nil {
		return fmt.Errorf("%w: topic %q has cleanup.policy=compact and the broker rejects records without a key there; "+
			"set a key before the sink, or write to a topic that is not compacted", ErrNoKeyForCompactedTopic, o.Topic)
	}
	if p.limit.maxBytes > 0 {
		size := RecordOverhead + len(o.Key) + len(o.Value)
		for _, h := range o.Headers {
			size += len(h.Key) + len(h.Value)
		}
		if size > p.limit.maxBytes {
			return fmt.Errorf("%w: about %d bytes for topic %q, over its limit of %d; raise max.message.bytes on the topic "+
				"(and the producer's limit, kgo.ProducerBatchMaxBytes), or make the record smaller", ErrRecordTooLarge, size, o.Topic, p.limit.maxBytes)
		}
	}
	return nil
}
