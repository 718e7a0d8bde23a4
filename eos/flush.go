package eos

import (
	"context"
	"errors"

	"github.com/eosflow/eosflow/internal/engine"
	"github.com/twmb/franz-go/pkg/kgo"
)

// flush runs the updates that aggregations held back for the end of the
// batch (topology.LatestPerCommit) once the batch is set to commit, so
// that they are produced in its transaction (or, without one, before its
// offsets commit) together with the changelog records of the stores they
// came from. Each runs as its input record would: with that record's
// context, output attribution and store savepoint. It reports whether the
// batch may still commit: under a Fail policy the batch fails as a record
// would (no part of it commits, not even in a plain session: the updates
// not emitted belong to records before it), and an update interrupted by a
// shutdown aborts the batch, which a new client redoes; one a revoke
// interrupted under exactly-once aborts it as the revoke does.
func (b *batch) flush() bool {
	l := b.l
	if l.proc.Held() == 0 {
		return true
	}
	if b.revokedSince() {
		// A revoke during the batch makes End abort it: its held-back
		// updates would run for nothing, on partitions gone.
		return true
	}
	outcome, err := l.proc.Flush(b.beginUpdate, b.emit, b.endUpdate)
	b.cur = nil
	switch outcome {
	case engine.Failed:
	case engine.Interrupted:
		if b.revokedSince() {
			b.revoked = true // a revoke came: the batch aborts, as any revoked batch
			return false
		}
		err = &rebuildError{errors.New("an aggregation's held-back update was interrupted at the end of its batch (a shutdown, or a revoke outside exactly-once, ended its context); " +
			"the batch is aborted, and a new client redoes it from the committed offsets")}
	default:
		return true
	}
	// A plain session may have been about to commit the records before a
	// failed one: that failure stays in the error.
	if b.failed != nil {
		err = errors.Join(b.failed, err)
	}
	b.failed = err
	return false
}

// doomed is the context of an update the batch must not run (see
// engine.ErrDoomed).
var doomed = func() context.Context {
	ctx, cancel := context.WithCancelCause(context.Background())
	cancel(engine.ErrDoomed)
	return ctx
}()

// beginUpdate starts a held-back update of input record in.
func (b *batch) beginUpdate(in *kgo.Record) context.Context {
	b.cur = in
	if b.l.tracing != nil {
		// A held-back update's or a timer's outputs belong to the
		// record that made them, if any.
		b.recCtx = b.spanCtx
		if in != nil && in.Context != nil {
			b.recCtx = in.Context
		}
	}
	if b.l.state != nil {
		b.l.state.beginRecord()
	}
	var ctx context.Context
	if in != nil {
		// Its user code is in flight as the record's was: a revoke of
		// its partition waits for it (see recordContexts.await).
		ctx = b.l.contexts.start(in)
	} else {
		ctx = b.l.contexts.of(in)
	}
	if b.revokedSince() {
		// Checked once in flight, as a record is: the engine runs no
		// user code on an ended context, and the batch aborts.
		return doomed
	}
	return ctx
}

// endUpdate ends an update: its user code is no longer in flight, and
// the store writes of one that did not go through are undone.
func (b *batch) endUpdate(o engine.Outcome) {
	b.l.contexts.done()
	if b.l.tracing != nil {
		b.recCtx = b.spanCtx
	}
	if b.l.state != nil && o != engine.Processed {
		b.l.state.failRecord()
	}
}
