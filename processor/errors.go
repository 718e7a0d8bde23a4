package processor

import (
	"errors"
	"fmt"
)

// ErrNoSource means a record arrived from a topic no source reads; the
// runtime subscribes only to source topics, so this points at a bug.
var ErrNoSource = errors.New("processor: no source reads this topic")

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

// ErrRecordTooLarge means an output is larger than its topic accepts, as
// OutputLimits reports. The broker would reject it and the whole batch
// would abort, so the sink's error policy handles the record instead.
var ErrRecordTooLarge = errors.New("processor: output record too large for its topic")

// ErrNoKeyForCompactedTopic means an output has no key but its topic is
// compacted, which the broker rejects; like ErrRecordTooLarge, it goes to
// the sink's error policy instead of aborting the batch.
var ErrNoKeyForCompactedTopic = errors.New("processor: output record has no key but its topic is compacted")
