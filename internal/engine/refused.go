package engine

import (
	"github.com/eosflow/eosflow/internal/graph"
)

// expiryID names an expired entry across the redos of its batch: the
// same record expires it again with the same node, key, event time and
// window.
type expiryID struct {
	node        int
	key         string
	ts          int64
	start, stop int64
}

func idOf(x *graph.Expiry) expiryID {
	return expiryID{node: x.Node, key: string(x.Key), ts: x.Timestamp.UnixNano(), start: x.Start.UnixNano(), stop: x.End.UnixNano()}
}

// refusal is why the broker refused an output of an expired entry, and
// the sink that emitted it.
type refusal struct {
	sink string
	err  error
}

// OutputExpiry is the expired entry whose emission made the record being
// passed to out, or nil for the step's own outputs and dead letters. Like
// OutputNode it is valid only during those calls of out; the runtime
// keeps it to trace a broker's refusal back to the entry (RefuseExpiry),
// since the record whose stream time expired it is not at fault.
func (e *Engine) OutputExpiry() *graph.Expiry { return e.outExp }

// RefuseExpiry notes that the broker refused, with err, an output that
// sink emitted for entry x (an OutputExpiry): when a step expires x again
// (the redo of the aborted batch), x is not emitted but settled by sink's
// final policy, as if emitting it had failed there: Skip drops it,
// DeadLetter dead-letters it, Fail is an *processor.ExpiryError.
func (e *Engine) RefuseExpiry(x *graph.Expiry, sink string, err error) {
	if e.refused == nil {
		e.refused = make(map[expiryID]refusal)
	}
	e.refused[idOf(x)] = refusal{sink: sink, err: err}
}
