package eos

import (
	"errors"
	"testing"

	"github.com/eosflow/eosflow/processor"
	"github.com/twmb/franz-go/pkg/kgo"
)

// A sink's partition lookup that fails for want of an answer is a client
// error that redoes the batch; only a topic known missing is the sink's.
func TestPartitionCountErrors(t *testing.T) {
	o := &outputTopics{admin: func() *kgo.Client { return nil }}
	if _, err := o.partitionCount("out"); err == nil || !isRebuildable(err) || errors.Is(err, processor.ErrUnknownTopic) {
		t.Fatalf("partitionCount without an answer: %v, want a rebuildable error", err)
	}
	o.noteMissing("gone")
	if _, err := o.partitionCount("gone"); !errors.Is(err, processor.ErrUnknownTopic) || isRebuildable(err) {
		t.Fatalf("partitionCount of a missing topic: %v, want ErrUnknownTopic for the sink", err)
	}
}
