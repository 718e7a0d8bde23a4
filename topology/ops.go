package topology

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/eosflow/eosflow/codec"
	"github.com/eosflow/eosflow/internal/graph"
	"github.com/eosflow/eosflow/processor"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Record is the record type the operators pass around; see processor.Record.
type Record[T any] = processor.Record[T]

// Stream is a typed edge of the graph: the records a node emits. The zero
// Stream is invalid; get streams from Source and the operators.
type Stream[T any] struct {
	n *Node
	p *port[T]
}

// Node is the node that emits this stream.
func (s Stream[T]) Node() *Node { return s.n }

// port fans a node's typed output out to its children.
type port[T any] struct {
	next []child[T]
}

type child[T any] struct {
	name string
	fn   func(graph.Exec, Record[T]) error
	node *Node // the child, for fusion; nil if unknown
}

func (p *port[T]) push(x graph.Exec, r Record[T]) error {
	for _, c := range p.next {
		if err := c.fn(x, r); err != nil {
			return err
		}
	}
	return nil
}

// pushTo passes r to the child called name only.
func (p *port[T]) pushTo(x graph.Exec, name string, r Record[T]) error {
	for _, c := range p.next {
		if c.name == name {
			return c.fn(x, r)
		}
	}
	return nil
}

func (p *port[T]) has(name string) bool {
	for _, c := range p.next {
		if c.name == name {
			return true
		}
	}
	return false
}

func (p *port[T]) names() string {
	names := make([]string, len(p.next))
	for i, c := range p.next {
		names[i] = c.name
	}
	return strings.Join(names, ", ")
}

// attach adds a node fed by s, wiring fn as its input.
func attach[T any](s Stream[T], name string, kind Kind, op string, fn func(*Node) func(graph.Exec, Record[T]) error) *Node {
	t := s.topology()
	if t == nil {
		return nil
	}
	n := t.add(name, kind, op, s.n)
	if s.p != nil && s.n != nil && s.n.t == t {
		s.p.next = append(s.p.next, child[T]{name: name, fn: fn(n), node: n})
	}
	return n
}

func (s Stream[T]) topology() *Topology {
	if s.n == nil {
		return nil
	}
	return s.n.t
}

func (t *Topology) nilFunc(n *Node, isNil bool) {
	if isNil && n != nil {
		t.problem(n.name, "%s has a nil function", n.op)
	}
}

// call runs fn for node n under the retry policy of n.
func call[A, B any](x graph.Exec, n *Node, fn func(context.Context, A) (B, error), a A) (B, error) {
	x.Enter(n.index)
	b, err := fn(x.Context(), a)
	if err == nil {
		return b, nil
	}
	return again(x, n, fn, a, b, err)
}

// again carries on call after fn's first attempt returned b and err: it
// calls fn again while the retry policy of n allows, and returns the
// last attempt's results, the error as a NodeError.
func again[A, B any](x graph.Exec, n *Node, fn func(context.Context, A) (B, error), a A, b B, err error) (B, error) {
	for attempt := 0; ; attempt++ {
		if !x.Retry(n.index, attempt, err) {
			return b, &NodeError{Node: n.name, Err: err}
		}
		x.Enter(n.index)
		if b, err = fn(x.Context(), a); err == nil {
			return b, nil
		}
	}
}

// SourceOption tunes Source and TableFrom: SourceTimestamp, or Named.
type SourceOption[T any] interface{ sourceOption() }

type sourceConf[T any] struct {
	timestamp func(key []byte, v T) time.Time
}

type sourceOpt[T any] func(*sourceConf[T])

func (sourceOpt[T]) sourceOption() {}

// SourceTimestamp gives each record the event time fn reads from it (an
// order's own time rather than when it was produced), overriding the
// default: the Kafka record's timestamp. Windows and stream time use it,
// and sinks write it as the outputs' timestamp.
func SourceTimestamp[T any](fn func(key []byte, v T) time.Time) SourceOption[T] {
	return sourceOpt[T](func(c *sourceConf[T]) { c.timestamp = fn })
}

// Source reads topic, decoding values with c. Keys stay bytes. The node
// is named after the topic unless Named says otherwise.
func Source[T any](t *Topology, topic string, c codec.Codec[T], opts ...SourceOption[T]) Stream[T] {
	var conf sourceConf[T]
	name := nodeOptions(t, topic, "was made for a source of another value type; build it for this source's values", opts, func(o SourceOption[T]) bool {
		f, ok := o.(sourceOpt[T])
		if ok {
			f(&conf)
		}
		return ok
	})
	n := readTopic(t, name, topic, "Source")
	n.codec = codec.Name(c)
	p := &port[T]{}
	if c == nil {
		t.problem(n.name, "source has no codec; pass codec.Bytes(), codec.String(), codec.JSON[T]() or your own")
		return Stream[T]{n: n, p: p}
	}
	decode := func(_ context.Context, b []byte) (T, error) { return c.Decode(b) }
	n.fuse = sourceFuse(n, p, c, conf.timestamp)
	n.source = func(x graph.Exec, r *kgo.Record) error {
		v, err := call(x, n, decode, r.Value)
		if err != nil {
			return err
		}
		ts := r.Timestamp
		if conf.timestamp != nil {
			x.Enter(n.index)
			ts = conf.timestamp(r.Key, v)
		}
		return p.push(x, Record[T]{
			Key: r.Key, Value: v, Headers: r.Headers, Timestamp: ts,
			Topic: r.Topic, Partition: r.Partition, Offset: r.Offset,
		})
	}
	return Stream[T]{n: n, p: p}
}

// readTopic adds the node of op that reads topic. Without a topic or a
// name, the node is named after op, so its one problem is the topic.
func readTopic(t *Topology, name, topic, op string) *Node {
	if name == "" && topic == "" {
		name = op + "(no topic)"
	}
	n := t.add(name, KindSource, op)
	n.topic = topic
	switch {
	case topic == "":
		t.problem(name, "%s has no topic; pass the topic to read", op)
	case t.byTopic[topic] != nil:
		t.problem(name, "topic %q is already read by %q; read each topic once and branch", topic, t.byTopic[topic].name)
	default:
		t.byTopic[topic] = n
	}
	return n
}

// MapValues replaces each value with fn's result, keeping key and metadata.
// ctx is cancelled on shutdown and when the record's partition is revoked.
func MapValues[In, Out any](s Stream[In], name string, fn func(ctx context.Context, v In) (Out, error)) Stream[Out] {
	return stateless(s, name, "MapValues", fn == nil, func(n *Node) apply[In, Out] {
		return func(x graph.Exec, ctx context.Context, key []byte, v In) ([]byte, Out, bool, error) {
			out, err := fn(ctx, v)
			if err != nil {
				out, err = again(x, n, fn, v, out, err)
			}
			return key, out, err == nil, err
		}
	})
}

type keyValue[T any] struct {
	key []byte
	val T
}

// Map replaces key and value with fn's results. ctx is cancelled on
// shutdown and when the record's partition is revoked.
func Map[In, Out any](s Stream[In], name string, fn func(ctx context.Context, key []byte, v In) ([]byte, Out, error)) Stream[Out] {
	retried := func(ctx context.Context, kv keyValue[In]) (keyValue[Out], error) {
		k, v, err := fn(ctx, kv.key, kv.val)
		return keyValue[Out]{k, v}, err
	}
	return stateless(s, name, "Map", fn == nil, func(n *Node) apply[In, Out] {
		return func(x graph.Exec, ctx context.Context, key []byte, v In) ([]byte, Out, bool, error) {
			k, out, err := fn(ctx, key, v)
			if err != nil {
				var kv keyValue[Out]
				kv, err = again(x, n, retried, keyValue[In]{key, v}, keyValue[Out]{k, out}, err)
				k, out = kv.key, kv.val
			}
			return k, out, err == nil, err
		}
	})
}

// Filter keeps the records for which keep returns true. Predicates (Filter,
// Branch) are pure functions of key and value, so they get no context.
func Filter[T any](s Stream[T], name string, keep func(key []byte, v T) bool) Stream[T] {
	return stateless(s, name, "Filter", keep == nil, func(*Node) apply[T, T] {
		return func(_ graph.Exec, _ context.Context, key []byte, v T) ([]byte, T, bool, error) {
			return key, v, keep(key, v), nil
		}
	})
}

// FlatMap turns each record into zero or more records. ctx is cancelled
// on shutdown and when the record's partition is revoked.
func FlatMap[In, Out any](s Stream[In], name string, fn func(ctx context.Context, key []byte, v In) ([]KV[Out], error)) Stream[Out] {
	retried := func(ctx context.Context, kv keyValue[In]) ([]KV[Out], error) { return fn(ctx, kv.key, kv.val) }
	return statelessMany(s, name, "FlatMap", fn == nil, func(n *Node) applyMany[In, Out] {
		return func(x graph.Exec, ctx context.Context, key []byte, v In) ([]KV[Out], error) {
			outs, err := fn(ctx, key, v)
			if err != nil {
				outs, err = again(x, n, retried, keyValue[In]{key, v}, outs, err)
			}
			return outs, err
		}
	})
}

// Peek calls fn for each record, passing records through unchanged; for
// side effects such as logging or metrics, which are not exactly-once (fn
// runs again when a batch is redone). ctx is cancelled on shutdown and
// when the record's partition is revoked.
func Peek[T any](s Stream[T], name string, fn func(ctx context.Context, key []byte, v T)) Stream[T] {
	return stateless(s, name, "Peek", fn == nil, func(*Node) apply[T, T] {
		return func(_ graph.Exec, ctx context.Context, key []byte, v T) ([]byte, T, bool, error) {
			fn(ctx, key, v)
			return key, v, true, nil
		}
	})
}

// Branch splits s: each record goes to the stream of the first predicate
// that accepts it, or nowhere. Branch i is a node named "name-i".
func Branch[T any](s Stream[T], name string, preds ...func(key []byte, v T) bool) []Stream[T] {
	ports := make([]*port[T], len(preds))
	for i := range ports {
		ports[i] = &port[T]{}
	}
	n := attach(s, name, KindProcessor, "Branch", func(n *Node) func(graph.Exec, Record[T]) error {
		return func(x graph.Exec, r Record[T]) error {
			x.Enter(n.index)
			for i, pred := range preds {
				if pred(r.Key, r.Value) {
					return ports[i].push(x, r)
				}
			}
			return nil
		}
	})
	t := s.topology()
	if n == nil {
		return nil
	}
	if len(preds) == 0 {
		t.problem(name, "Branch has no predicates; pass at least one")
	}
	out := make([]Stream[T], len(preds))
	for i, pred := range preds {
		bname := fmt.Sprintf("%s-%d", name, i)
		bn := t.add(bname, KindProcessor, "Branch", n)
		t.nilFunc(bn, pred == nil)
		// The branch node forwards what the parent routed to it.
		bp := &port[T]{}
		ports[i].next = append(ports[i].next, child[T]{name: bname, fn: bp.push})
		out[i] = Stream[T]{n: bn, p: bp}
	}
	return out
}

// Merge joins several streams of one type into one.
func Merge[T any](name string, streams ...Stream[T]) Stream[T] {
	p := &port[T]{}
	var t *Topology
	for _, s := range streams {
		if t = s.topology(); t != nil {
			break
		}
	}
	if t == nil {
		return Stream[T]{}
	}
	parents := make([]*Node, len(streams))
	for i, s := range streams {
		parents[i] = s.n
	}
	n := t.add(name, KindProcessor, "Merge", parents...)
	if len(streams) < 2 {
		t.problem(name, "Merge needs at least two streams")
	}
	for _, s := range streams {
		if s.p != nil && s.n != nil && s.n.t == t {
			s.p.next = append(s.p.next, child[T]{name: n.name, fn: p.push})
		}
	}
	return Stream[T]{n: n, p: p}
}
