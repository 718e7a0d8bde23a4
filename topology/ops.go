package topology

import (
	"fmt"

	"github.com/eosflow/eosflow/codec"
	"github.com/twmb/franz-go/pkg/kgo"
)

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
	next []func(Exec, Record[T]) error
}

func (p *port[T]) push(x Exec, r Record[T]) error {
	for _, f := range p.next {
		if err := f(x, r); err != nil {
			return err
		}
	}
	return nil
}

// attach adds a node fed by s, wiring fn as its input.
func attach[T any](s Stream[T], name string, kind Kind, op string, fn func(*Node) func(Exec, Record[T]) error) *Node {
	t := s.topology()
	if t == nil {
		return nil
	}
	n := t.add(name, kind, op, s.n)
	if s.p != nil && s.n != nil && s.n.t == t {
		s.p.next = append(s.p.next, fn(n))
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
func call[A, B any](x Exec, n *Node, fn func(A) (B, error), a A) (B, error) {
	for attempt := 0; ; attempt++ {
		x.Enter(n)
		b, err := fn(a)
		if err == nil {
			return b, nil
		}
		if !x.Retry(n, attempt, err) {
			return b, &NodeError{Node: n.name, Err: err}
		}
	}
}

// Source reads topic, decoding values with c. Keys stay bytes.
func Source[T any](t *Topology, name, topic string, c codec.Codec[T]) Stream[T] {
	n := t.add(name, KindSource, "Source")
	n.topic = topic
	n.codec = codec.Name(c)
	switch {
	case topic == "":
		t.problem(name, "source has no topic; pass the topic to read")
	case t.byTopic[topic] != nil:
		t.problem(name, "topic %q is already read by source %q; read each topic once and branch", topic, t.byTopic[topic].name)
	default:
		t.byTopic[topic] = n
	}
	p := &port[T]{}
	if c == nil {
		t.problem(name, "source has no codec; pass codec.Bytes(), codec.String(), codec.JSON[T]() or your own")
		return Stream[T]{n: n, p: p}
	}
	decode := c.Decode
	n.source = func(x Exec, r *kgo.Record) error {
		v, err := call(x, n, decode, r.Value)
		if err != nil {
			return err
		}
		return p.push(x, Record[T]{
			Key: r.Key, Value: v, Headers: r.Headers, Timestamp: r.Timestamp,
			Topic: r.Topic, Partition: r.Partition, Offset: r.Offset,
		})
	}
	return Stream[T]{n: n, p: p}
}

// MapValues replaces each value with fn's result, keeping key and metadata.
func MapValues[In, Out any](s Stream[In], name string, fn func(In) (Out, error)) Stream[Out] {
	p := &port[Out]{}
	n := attach(s, name, KindProcessor, "MapValues", func(n *Node) func(Exec, Record[In]) error {
		return func(x Exec, r Record[In]) error {
			v, err := call(x, n, fn, r.Value)
			if err != nil {
				return err
			}
			return p.push(x, Record[Out]{Key: r.Key, Value: v, Headers: r.Headers, Timestamp: r.Timestamp, Topic: r.Topic, Partition: r.Partition, Offset: r.Offset})
		}
	})
	s.topology().nilFunc(n, fn == nil)
	return Stream[Out]{n: n, p: p}
}

type keyValue[T any] struct {
	key []byte
	val T
}

// Map replaces key and value with fn's results.
func Map[In, Out any](s Stream[In], name string, fn func(key []byte, v In) ([]byte, Out, error)) Stream[Out] {
	p := &port[Out]{}
	n := attach(s, name, KindProcessor, "Map", func(n *Node) func(Exec, Record[In]) error {
		apply := func(kv keyValue[In]) (keyValue[Out], error) {
			k, v, err := fn(kv.key, kv.val)
			return keyValue[Out]{k, v}, err
		}
		return func(x Exec, r Record[In]) error {
			kv, err := call(x, n, apply, keyValue[In]{r.Key, r.Value})
			if err != nil {
				return err
			}
			return p.push(x, Record[Out]{Key: kv.key, Value: kv.val, Headers: r.Headers, Timestamp: r.Timestamp, Topic: r.Topic, Partition: r.Partition, Offset: r.Offset})
		}
	})
	s.topology().nilFunc(n, fn == nil)
	return Stream[Out]{n: n, p: p}
}

// Filter keeps the records for which keep returns true.
func Filter[T any](s Stream[T], name string, keep func(key []byte, v T) bool) Stream[T] {
	p := &port[T]{}
	n := attach(s, name, KindProcessor, "Filter", func(n *Node) func(Exec, Record[T]) error {
		return func(x Exec, r Record[T]) error {
			x.Enter(n)
			if !keep(r.Key, r.Value) {
				return nil
			}
			return p.push(x, r)
		}
	})
	s.topology().nilFunc(n, keep == nil)
	return Stream[T]{n: n, p: p}
}

// FlatMap turns each record into zero or more records.
func FlatMap[In, Out any](s Stream[In], name string, fn func(key []byte, v In) ([]KV[Out], error)) Stream[Out] {
	p := &port[Out]{}
	n := attach(s, name, KindProcessor, "FlatMap", func(n *Node) func(Exec, Record[In]) error {
		apply := func(kv keyValue[In]) ([]KV[Out], error) { return fn(kv.key, kv.val) }
		return func(x Exec, r Record[In]) error {
			outs, err := call(x, n, apply, keyValue[In]{r.Key, r.Value})
			if err != nil {
				return err
			}
			for _, o := range outs {
				if err := p.push(x, Record[Out]{Key: o.Key, Value: o.Value, Headers: r.Headers, Timestamp: r.Timestamp, Topic: r.Topic, Partition: r.Partition, Offset: r.Offset}); err != nil {
					return err
				}
			}
			return nil
		}
	})
	s.topology().nilFunc(n, fn == nil)
	return Stream[Out]{n: n, p: p}
}

// Peek calls fn for each record, passing records through unchanged; for
// side effects such as logging or metrics, which are not exactly-once.
func Peek[T any](s Stream[T], name string, fn func(key []byte, v T)) Stream[T] {
	p := &port[T]{}
	n := attach(s, name, KindProcessor, "Peek", func(n *Node) func(Exec, Record[T]) error {
		return func(x Exec, r Record[T]) error {
			x.Enter(n)
			fn(r.Key, r.Value)
			return p.push(x, r)
		}
	})
	s.topology().nilFunc(n, fn == nil)
	return Stream[T]{n: n, p: p}
}

// Branch splits s: each record goes to the stream of the first predicate
// that accepts it, or nowhere. Branch i is a node named "name-i".
func Branch[T any](s Stream[T], name string, preds ...func(key []byte, v T) bool) []Stream[T] {
	ports := make([]*port[T], len(preds))
	for i := range ports {
		ports[i] = &port[T]{}
	}
	n := attach(s, name, KindProcessor, "Branch", func(n *Node) func(Exec, Record[T]) error {
		return func(x Exec, r Record[T]) error {
			x.Enter(n)
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
		bn := t.add(fmt.Sprintf("%s-%d", name, i), KindProcessor, "Branch", n)
		t.nilFunc(bn, pred == nil)
		// The branch node forwards what the parent routed to it.
		bp := &port[T]{}
		ports[i].next = append(ports[i].next, bp.push)
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
			s.p.next = append(s.p.next, p.push)
		}
	}
	return Stream[T]{n: n, p: p}
}

// Process runs custom per-record logic with the whole record at hand (key,
// value, headers, timestamp, source partition and offset), emitting any
// number of records. If fn fails, what it emitted for that record is dropped.
func Process[In, Out any](s Stream[In], name string, fn func(r Record[In], emit func(Record[Out])) error) Stream[Out] {
	p := &port[Out]{}
	n := attach(s, name, KindProcessor, "Process", func(n *Node) func(Exec, Record[In]) error {
		return func(x Exec, r Record[In]) error {
			var out []Record[Out]
			emit := func(o Record[Out]) { out = append(out, o) }
			apply := func(r Record[In]) (struct{}, error) { out = out[:0]; return struct{}{}, fn(r, emit) }
			if _, err := call(x, n, apply, r); err != nil {
				return err
			}
			for _, o := range out {
				if err := p.push(x, o); err != nil {
					return err
				}
			}
			return nil
		}
	})
	s.topology().nilFunc(n, fn == nil)
	return Stream[Out]{n: n, p: p}
}

// To writes s to topic, encoding values with c.
func To[T any](s Stream[T], name, topic string, c codec.Codec[T]) {
	n := sink(s, name, topic, c, nil)
	if n != nil && topic == "" {
		n.t.problem(name, "sink has no topic; pass the topic to write, or use ToTopicFunc")
	}
}

// ToTopicFunc writes each record to the topic topicOf chooses for it.
func ToTopicFunc[T any](s Stream[T], name string, topicOf func(Record[T]) string, c codec.Codec[T]) {
	n := sink(s, name, "", c, topicOf)
	if n != nil {
		n.t.nilFunc(n, topicOf == nil)
	}
}

func sink[T any](s Stream[T], name, topic string, c codec.Codec[T], topicOf func(Record[T]) string) *Node {
	var encode func(T) ([]byte, error)
	if c != nil {
		encode = c.Encode
	}
	n := attach(s, name, KindSink, "Sink", func(n *Node) func(Exec, Record[T]) error {
		return func(x Exec, r Record[T]) error {
			v, err := call(x, n, encode, r.Value)
			if err != nil {
				return err
			}
			dst := topic
			if topicOf != nil {
				x.Enter(n)
				dst = topicOf(r)
			}
			return x.Emit(n, Output{Topic: dst, Key: r.Key, Value: v, Headers: r.Headers, Timestamp: r.Timestamp})
		}
	})
	if n == nil {
		return nil
	}
	n.topic = topic
	n.codec = codec.Name(c)
	if c == nil {
		n.t.problem(name, "sink has no codec; pass codec.Bytes(), codec.String(), codec.JSON[T]() or your own")
	}
	return n
}
