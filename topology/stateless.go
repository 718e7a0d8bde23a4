package topology

import (
	"context"

	"github.com/eosflow/eosflow/internal/graph"
)

// apply is a stateless operator's work on one record, written once: the
// key and value it passes on, or pass false to drop the record. It calls
// the user's function under the node's retry policy (again). The fused and
// unfused paths both run it (stateless), so they cannot drift apart.
type apply[In, Out any] func(x graph.Exec, ctx context.Context, key []byte, v In) (outKey []byte, out Out, pass bool, err error)

// applyMany is apply for an operator that passes on any number of records.
type applyMany[In, Out any] func(x graph.Exec, ctx context.Context, key []byte, v In) ([]KV[Out], error)

// stateless adds node name, of operator op, fed by s and running the apply
// mk makes for it: unfused, with the whole record, whose headers,
// timestamp and origin the output keeps; fused, with the key and value
// only (see fuse.go). isNil reports a nil user function.
func stateless[In, Out any](s Stream[In], name, op string, isNil bool, mk func(n *Node) apply[In, Out]) Stream[Out] {
	p := &port[Out]{}
	n := attach(s, name, KindProcessor, op, func(n *Node) func(graph.Exec, Record[In]) error {
		a := mk(n)
		return func(x graph.Exec, r Record[In]) error {
			x.Enter(n.index)
			k, v, pass, err := a(x, x.Context(), r.Key, r.Value)
			if err != nil || !pass {
				return err
			}
			return p.push(x, Record[Out]{Key: k, Value: v, Headers: r.Headers, Timestamp: r.Timestamp, Topic: r.Topic, Partition: r.Partition, Offset: r.Offset})
		}
	})
	s.topology().nilFunc(n, isNil)
	if n != nil {
		a := mk(n)
		n.fuse = func(fz *fusion) any {
			cur, next := fz.cur, p.fused(fz)
			return link[In](func(x graph.Exec, key []byte, v In) error {
				cur.Node = n.index
				k, out, pass, err := a(x, cur.Ctx, key, v)
				if err != nil || !pass {
					return err
				}
				return next(x, k, out)
			})
		}
	}
	return Stream[Out]{n: n, p: p}
}

// statelessMany is stateless for an applyMany.
func statelessMany[In, Out any](s Stream[In], name, op string, isNil bool, mk func(n *Node) applyMany[In, Out]) Stream[Out] {
	p := &port[Out]{}
	n := attach(s, name, KindProcessor, op, func(n *Node) func(graph.Exec, Record[In]) error {
		a := mk(n)
		return func(x graph.Exec, r Record[In]) error {
			x.Enter(n.index)
			outs, err := a(x, x.Context(), r.Key, r.Value)
			for i := 0; err == nil && i < len(outs); i++ {
				err = p.push(x, Record[Out]{Key: outs[i].Key, Value: outs[i].Value, Headers: r.Headers, Timestamp: r.Timestamp, Topic: r.Topic, Partition: r.Partition, Offset: r.Offset})
			}
			return err
		}
	})
	s.topology().nilFunc(n, isNil)
	if n != nil {
		a := mk(n)
		n.fuse = func(fz *fusion) any {
			cur, next := fz.cur, p.fused(fz)
			return link[In](func(x graph.Exec, key []byte, v In) error {
				cur.Node = n.index
				outs, err := a(x, cur.Ctx, key, v)
				for i := 0; err == nil && i < len(outs); i++ {
					err = next(x, outs[i].Key, outs[i].Value)
				}
				return err
			})
		}
	}
	return Stream[Out]{n: n, p: p}
}
