package eos

import (
	"context"
	"testing"

	"github.com/eosflow/eosflow/processor"
)

// A batch that a Fail policy ended while Run was stopping aborts for the
// failure, whether a record or an expired entry failed, not for the
// shutdown.
func TestAbortReasonOfAPolicyFailureDuringShutdown(t *testing.T) {
	r := upperRunner(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for _, err := range []error{
		&processor.RecordError{Topic: "in", Err: context.Canceled},
		&processor.ExpiryError{Node: "match", Topic: "in", Err: context.Canceled},
	} {
		b := r.loop.newBatch(ctx, &rewindSession{})
		b.failed = err
		if got := b.abortReason(nil); got != abortProcessing {
			t.Errorf("%T: abort reason %v, want %v", err, got, abortProcessing)
		}
		b.stop()
	}
}
