package topology

import (
	"time"

	"github.com/eosflow/eosflow/internal/graph"
)

// expireEntry emits an entry of n's store that stream time expired (an
// unmatched join record, a final window result) with emit, as a unit of
// work of its own (graph.Exec.Expire): a failure in emit is charged to
// the entry, under the failing node's policy, not to the record from o
// whose stream time expired it. key, value (as stored) and ts, its event
// time in milliseconds, are the entry's, for its dead letter. On nil the
// caller removes the entry in the same record.
func expireEntry(x graph.Exec, n *Node, o origin, what string, key, value []byte, ts int64, emit func() error) error {
	return x.Expire(graph.Expiry{Node: n.index, What: what, Key: key, Value: value, Timestamp: time.UnixMilli(ts),
		Topic: o.topic, Partition: o.partition, Offset: o.offset, At: o.at}, emit)
}

// expireWindow is expireEntry for the final result of window w.
func expireWindow(x graph.Exec, n *Node, o origin, w Window, key, value []byte, ts int64, emit func() error) error {
	return x.Expire(graph.Expiry{Node: n.index, What: "final result of window", Start: w.Start, End: w.End, Key: key, Value: value,
		Timestamp: time.UnixMilli(ts), Topic: o.topic, Partition: o.partition, Offset: o.offset, At: o.at}, emit)
}
