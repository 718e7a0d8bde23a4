package graph

import "time"

// Expiry is an entry of a node's store that stream time expired and
// whose emission is a unit of work of its own (Exec.Expire): an unmatched
// record of a left or outer stream join, or a final-only window's result.
type Expiry struct {
	Node int    // the join or window node
	What string // what expired, e.g. "unmatched left record"
	// Start and End bound the window whose result expired, left zero
	// for a join's record; the engine names them only on a failure, so
	// that an emission that succeeds formats nothing.
	Start, End time.Time
	Key        []byte
	Value      []byte // as the store holds it, for a dead letter
	// Timestamp is the entry's own event time, the dead letter's.
	Timestamp time.Time
	// Topic, Partition, Offset and At name the record whose stream time
	// expired the entry.
	Topic     string
	Partition int32
	Offset    int64
	At        time.Time
}
