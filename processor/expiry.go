package processor

import (
	"fmt"
	"time"
)

// ExpiryError is the failure, under the Fail policy, of emitting an entry
// that stream time expired: an unmatched record of a left or outer stream
// join, or the final result of a window. It names the entry rather than
// the later record whose stream time expired it, which is not at fault;
// the runtime aborts the open transaction and stops, and the entry
// expires again after a restart.
type ExpiryError struct {
	Node      string // the join or window node whose entry expired
	What      string // what expired, e.g. "unmatched left record"
	Key       []byte
	Timestamp time.Time // the entry's own event time
	// Topic, Partition and Offset name the record whose stream time
	// expired the entry: its task.
	Topic     string
	Partition int32
	Offset    int64
	Err       error // usually a *topology.NodeError naming the node that failed
}

// Error names the node, the entry and the record that expired it.
func (e *ExpiryError) Error() string {
	return fmt.Sprintf("emitting the %s of node %q, key %q at %s, expired by %s/%d@%d: %v", e.What, e.Node, e.Key,
		e.Timestamp.UTC().Format(time.RFC3339Nano), e.Topic, e.Partition, e.Offset, e.Err)
}

// Unwrap exposes the failing node's error.
func (e *ExpiryError) Unwrap() error { return e.Err }
