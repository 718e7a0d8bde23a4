package engine

import (
	"bytes"
	"errors"
	"fmt"
	"runtime/debug"
	"strconv"
	"time"

	"github.com/eosflow/eosflow/internal/graph"
	"github.com/eosflow/eosflow/internal/store"
	"github.com/eosflow/eosflow/processor"
	"github.com/eosflow/eosflow/topology"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"
)

// expiryScope is an expiry's emission under way inside a step: what the
// step had emitted, held and counted as settled expiries when it began,
// and the stores it reached, each with where its writes stood then, so
// that a failed emission can be undone alone, the expiries settled inside
// it included, while the step's own work stays.
type expiryScope struct {
	x             *graph.Expiry // the entry, which the outputs of its emission carry
	outs          int
	staged        int
	skipped, dead uint64
	saved         []savedStore
}

// expiryScopes are the emissions under way, innermost last (a window's
// result can feed a join that expires records in turn), and the expiry
// outcomes of the current step, counted once the step succeeds.
type expiryScopes struct {
	open    []expiryScope
	skipped uint64
	dead    uint64
}

// reached notes that the emissions under way reached s.
func (x *expiryScopes) reached(s *store.Store) {
	for i := range x.open {
		if sc := &x.open[i]; !reachedBefore(sc.saved, s) {
			sc.saved = append(sc.saved, savedStore{s: s, sp: s.Savepoint()})
		}
	}
}

func reachedBefore(saved []savedStore, s *store.Store) bool {
	for _, sv := range saved {
		if sv.s == s {
			return true
		}
	}
	return false
}

// Expire implements graph.Exec. An entry one of whose outputs the broker
// refused (RefuseExpiry) is settled by the refusing sink's policy without
// being emitted again.
func (e *Engine) Expire(x graph.Expiry, emit func() error) error {
	if len(e.refused) > 0 {
		if r, ok := e.refused[idOf(&x)]; ok {
			// Once: a later entry with the same node, key and times (two
			// records of one key and timestamp) is emitted, not settled;
			// a redo of this step emits it again and meets the broker's
			// answer again.
			delete(e.refused, idOf(&x))
			return e.settleExpiry(&x, &topology.NodeError{Node: r.sink, Err: r.err})
		}
	}
	e.exp.open = append(e.exp.open, expiryScope{x: &x, outs: e.outs, staged: len(e.hold.staged), skipped: e.exp.skipped, dead: e.exp.dead})
	err := e.runExpiry(emit)
	sc := e.exp.open[len(e.exp.open)-1]
	e.exp.open = e.exp.open[:len(e.exp.open)-1]
	e.Enter(x.Node)
	if err == nil {
		return nil
	}
	var ne *topology.NodeError
	if expiryFailed(err) || !errors.As(err, &ne) || (e.cur.Ctx.Err() != nil && ne.Stack == nil) {
		return err // a nested expiry's failure, a runtime error, or an interrupt: the step's
	}
	e.undoExpiry(&sc)
	return e.settleExpiry(&x, ne)
}

// settleExpiry applies the final policy of ne's node to entry x, whose
// emission failed with ne: nil once x is dropped or dead-lettered, an
// ExpiryError under Fail.
func (e *Engine) settleExpiry(x *graph.Expiry, ne *topology.NodeError) error {
	fields := []zap.Field{zap.String("node", ne.Node), zap.Error(ne.Err), zap.String("expiry_node", e.g.Nodes[x.Node].Name),
		zap.String("expired", expiryWhat(*x)), zap.ByteString("key", x.Key), zap.Time("timestamp", x.Timestamp),
		zap.String("topic", x.Topic), zap.Int32("partition", x.Partition), zap.Int64("offset", x.Offset)}
	switch p := e.policyOf(ne); p.Kind {
	case graph.PolicySkip:
		e.exp.skipped++
		e.log.Warn("expired entry skipped", fields...)
		return nil
	case graph.PolicyDeadLetter:
		e.exp.dead++
		e.log.Warn("expired entry dead-lettered", append(fields, zap.String("dlq", p.Topic))...)
		i := e.nodeIndex(ne.Node)
		if i < 0 {
			i = x.Node
		}
		e.keepOutput(i, e.expiryDeadLetter(p.Topic, *x, ne))
		return nil
	}
	return &processor.ExpiryError{Node: e.g.Nodes[x.Node].Name, What: expiryWhat(*x), Key: bytes.Clone(x.Key), Timestamp: x.Timestamp,
		Topic: x.Topic, Partition: x.Partition, Offset: x.Offset, Err: ne}
}

// runExpiry turns a panic in user code into a NodeError carrying the
// stack, charged to the expiry under way.
func (e *Engine) runExpiry(emit func() error) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = &topology.NodeError{Node: e.currentName(), Err: fmt.Errorf("panic: %v", v), Stack: debug.Stack()}
		}
	}()
	return emit()
}

// undoExpiry drops what the failed emission of sc emitted and held, and
// undoes its store writes and the counts of the expiries settled inside
// it, which expire again.
func (e *Engine) undoExpiry(sc *expiryScope) {
	e.exp.skipped, e.exp.dead = sc.skipped, sc.dead
	for _, sv := range sc.saved {
		sv.s.RollbackTo(sv.sp)
	}
	if e.outs > sc.outs {
		keep := max(sc.outs-1, 0) // the first output is not in more
		clear(e.more[keep:])
		clear(e.moreExp[keep:])
		e.more, e.moreNode, e.moreExp = e.more[:keep], e.moreNode[:keep], e.moreExp[:keep]
		e.outs = sc.outs
	}
	clear(e.hold.staged[sc.staged:])
	e.hold.staged = e.hold.staged[:sc.staged]
}

// settleExpiries counts the expiry outcomes of a step that succeeded;
// those of a step that did not are forgotten with its outputs.
func (e *Engine) settleExpiries() {
	e.tally.ExpiriesSkipped += e.exp.skipped
	e.tally.ExpiriesDeadLettered += e.exp.dead
	e.exp.skipped, e.exp.dead = 0, 0
}

// expiryDeadLetter builds the dead letter of expired entry x after ne:
// its key, value and timestamp, the headers naming the node that failed
// and the error, the join or window node and what expired, and, in
// headers of their own, since the entry was not read from it and must
// not be replayed there, the record whose stream time expired it.
func (e *Engine) expiryDeadLetter(topic string, x graph.Expiry, ne *topology.NodeError) *kgo.Record {
	h := make([]kgo.RecordHeader, 0, 9)
	h = append(h,
		kgo.RecordHeader{Key: processor.HeaderNode, Value: headerText(ne.Node, maxErrorHeader)},
		kgo.RecordHeader{Key: processor.HeaderError, Value: headerText(ne.Err.Error(), maxErrorHeader)},
		kgo.RecordHeader{Key: processor.HeaderExpiryNode, Value: []byte(e.g.Nodes[x.Node].Name)},
		kgo.RecordHeader{Key: processor.HeaderExpiryWhat, Value: headerText(expiryWhat(x), maxErrorHeader)},
		kgo.RecordHeader{Key: processor.HeaderExpirySourceTopic, Value: []byte(x.Topic)},
		kgo.RecordHeader{Key: processor.HeaderExpirySourcePartition, Value: strconv.AppendInt(nil, int64(x.Partition), 10)},
		kgo.RecordHeader{Key: processor.HeaderExpirySourceOffset, Value: strconv.AppendInt(nil, x.Offset, 10)},
		kgo.RecordHeader{Key: processor.HeaderExpirySourceTimestamp, Value: strconv.AppendInt(nil, x.At.UnixMilli(), 10)},
	)
	if ne.Stack != nil {
		h = append(h, kgo.RecordHeader{Key: processor.HeaderStack, Value: headerText(string(ne.Stack), maxStackHeader)})
	}
	return &kgo.Record{Topic: topic, Partition: graph.AnyPartition, Key: bytes.Clone(x.Key), Value: bytes.Clone(x.Value), Headers: h, Timestamp: x.Timestamp}
}

// expiryFailed reports whether err is an expired entry's failure under
// the Fail policy, which fails the step whatever the step's own policy.
func expiryFailed(err error) bool {
	var ee *processor.ExpiryError
	return errors.As(err, &ee)
}

// expiryWhat says what expired, with its window's bounds if it has one.
func expiryWhat(x graph.Expiry) string {
	if x.Start.IsZero() && x.End.IsZero() {
		return x.What
	}
	return fmt.Sprintf("%s %s to %s", x.What, x.Start.UTC().Format(time.RFC3339Nano), x.End.UTC().Format(time.RFC3339Nano))
}
