package processor

import (
	"errors"
	"fmt"
)

// RecordError is a record whose processing failed under the Fail policy. It
// names the input record so an operator can find it; the runtime aborts the
// open transaction and stops.
type RecordError struct {
	Topic     string
	Partition int32
	Offset    int64
	Err       error // usually a *topology.NodeError
}

// Error names the record by topic, partition and offset.
func (e *RecordError) Error() string {
	return fmt.Sprintf("processing %s/%d@%d: %v", e.Topic, e.Partition, e.Offset, e.Err)
}

// Unwrap exposes the node's error.
func (e *RecordError) Unwrap() error { return e.Err }

// ErrRecordTooLarge means an output is larger than its topic accepts. The
// broker would reject it and the whole batch would abort, so the sink's
// error policy handles the record instead.
var ErrRecordTooLarge = errors.New("processor: output record too large for its topic")

// ErrNoKeyForCompactedTopic means an output has no key but its topic is
// compacted, which the broker rejects; like ErrRecordTooLarge, it goes to
// the sink's error policy instead of aborting the batch.
var ErrNoKeyForCompactedTopic = errors.New("processor: output record has no key but its topic is compacted")

// ErrPartitionOutOfRange means a sink's partitioner chose a partition the
// topic does not have; it goes to the sink's error policy.
var ErrPartitionOutOfRange = errors.New("processor: partition out of range for its topic")

// ErrUnknownTopic means a sink chose a topic (ToTopicFunc) that does not
// exist; it goes to the sink's error policy, since producing there would
// fail until the batch aborted.
var ErrUnknownTopic = errors.New("processor: output topic does not exist")

// ErrStoreNotConnected means a Process function asked for a store that is
// not connected to its node. A node sees only the stores it declares, so
// that the topology knows every store's users and can check that they
// share one input topic; connect the store with topology.UseStores.
var ErrStoreNotConnected = errors.New("processor: store not connected to this node")
