package engine

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"

	"github.com/eosflow/eosflow/internal/graph"
	"github.com/eosflow/eosflow/processor"
	"github.com/eosflow/eosflow/topology"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"
)

// held is one update an aggregation held back for the end of the batch.
type held struct {
	in  *kgo.Record // the input record that made it
	run func(graph.Exec) error
}

// holdKey identifies a held update: one per node, task and key.
type holdKey struct {
	node      int
	topic     string
	partition int32
	key       string
}

// holding keeps the batch's held-back updates (see graph.Exec.Hold).
// Updates held by a record are staged until the record succeeds, as its
// outputs are, so that a record that fails after an aggregation (and whose
// store writes the runtime undoes) leaves the key's previous update held.
type holding struct {
	byNode [][]held // per node, in the order each key was first held
	at     map[holdKey]int
	staged []stagedHold // the current record's
	n      int          // updates held in byNode
}

type stagedHold struct {
	k holdKey
	h held
}

// begin starts a record or update: nothing of it is staged yet.
func (h *holding) begin() {
	clear(h.staged)
	h.staged = h.staged[:0]
}

// keep moves the staged updates of a record that succeeded into the batch's.
func (h *holding) keep(nodes int) {
	for _, s := range h.staged {
		if i, ok := h.at[s.k]; ok {
			h.byNode[s.k.node][i] = s.h
			continue
		}
		if h.byNode == nil {
			h.byNode = make([][]held, nodes)
			h.at = make(map[holdKey]int)
		}
		h.at[s.k] = len(h.byNode[s.k.node])
		h.byNode[s.k.node] = append(h.byNode[s.k.node], s.h)
		h.n++
	}
	h.begin()
}

// drop forgets every held update.
func (h *holding) drop() {
	for i := range h.byNode {
		clear(h.byNode[i])
		h.byNode[i] = h.byNode[i][:0]
	}
	clear(h.at)
	h.n = 0
	h.begin()
}

// Hold implements graph.Exec.
func (e *Engine) Hold(node int, key []byte, run func(graph.Exec) error) {
	e.hold.staged = append(e.hold.staged, stagedHold{
		k: holdKey{node: node, topic: e.curTopic, partition: e.curPart, key: string(key)},
		h: held{in: e.curRec, run: run},
	})
}

// Held is how many updates aggregations hold back for the end of the
// batch (topology.LatestPerCommit): one per node, task and key.
func (e *Engine) Held() int { return e.hold.n }

// Drop forgets the held-back updates, for a batch that will not commit:
// none of them may reach another batch's transaction.
func (e *Engine) Drop() { e.hold.drop() }

// Flush runs the updates that aggregations held back (each key's last of
// the batch, see topology.LatestPerCommit) through the nodes after their
// aggregation, node by node in topology order, so an update held by a
// later aggregation during the flush is run in its turn. Each update is
// run as Process runs a record, as if it were its input record, which the
// update remembers: begin is called with that record first and returns the
// context user code sees; out gets the update's outputs once it succeeds;
// done gets its outcome, after which the caller undoes the update's store
// writes unless it is Processed. A failure is settled by the failing
// node's final policy: Skip and DeadLetter drop that update (the dead
// letter is the input record that made it) and go on; Fail stops the flush
// with Failed and a *processor.RecordError naming the input record, and a
// failure after the update's context ended stops it with Interrupted, the
// caller then must abort the batch. Every held update is forgotten when
// Flush returns, whatever the outcome.
func (e *Engine) Flush(begin func(in *kgo.Record) context.Context, out func(*kgo.Record), done func(Outcome)) (Outcome, error) {
	defer e.hold.drop()
	for node := range e.hold.byNode {
		// Updates held by later nodes during this loop are appended to
		// their own node's list, which the loop reaches later: the
		// graph is acyclic and nodes are numbered parents first.
		for i := 0; i < len(e.hold.byNode[node]); i++ {
			h := e.hold.byNode[node][i]
			ctx := begin(h.in)
			if context.Cause(ctx) == ErrDoomed {
				done(Interrupted)
				return Interrupted, nil
			}
			outcome, err := e.flushOne(h, ctx, out)
			done(outcome)
			if outcome == Failed || outcome == Interrupted {
				return outcome, err
			}
		}
	}
	return Processed, nil
}

// flushOne runs one held update with ctx as its context.
func (e *Engine) flushOne(h held, ctx context.Context, out func(*kgo.Record)) (Outcome, error) {
	r := h.in
	e.setTask(ctx, r)
	e.dropOutputs()
	e.hold.begin()
	err := e.runHeld(h.run)
	if err == nil {
		e.passOutputs(out)
		e.hold.keep(len(e.g.Nodes))
		return Processed, nil
	}
	e.hold.begin()
	if expiryFailed(err) {
		return Failed, err
	}
	var ne *topology.NodeError
	if !errors.As(err, &ne) {
		return Failed, &processor.RecordError{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset,
			Err: fmt.Errorf("emitting the update it made at the end of its batch: %w", err)}
	}
	if ctx.Err() != nil && ne.Stack == nil {
		e.log.Debug("held-back update interrupted: its context ended", zap.String("node", ne.Node), zap.Error(ne.Err),
			zap.String("topic", r.Topic), zap.Int32("partition", r.Partition), zap.Int64("offset", r.Offset))
		return Interrupted, nil
	}
	policy := e.g.Default
	if i := e.nodeIndex(ne.Node); i >= 0 {
		policy = e.g.Nodes[i].Policy
	}
	return e.settle(r, ne, policy.Final(), out)
}

// runHeld turns a panic in user code into a NodeError carrying the stack.
func (e *Engine) runHeld(run func(graph.Exec) error) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = &topology.NodeError{Node: e.currentName(), Err: fmt.Errorf("panic: %v", v), Stack: debug.Stack()}
		}
	}()
	return run(e)
}
