package eostest

import (
	"context"
	"errors"
	"fmt"

	"github.com/eosflow/eosflow/internal/engine"
	"github.com/eosflow/eosflow/state"
	"github.com/twmb/franz-go/pkg/kgo"
)

// maxFeedback bounds the records one call feeds back from the topology's
// outputs to its inputs, so that a topology that writes to what it reads
// forever fails instead of hanging the test.
const maxFeedback = 1 << 20

// Batch runs fn with a batch held open: the records fn pipes are taken
// in one batch, as the runtime takes a poll's records in one transaction.
// Held-back updates (topology.LatestPerCommit) run when fn returns, and
// the batch then commits: its outputs reach their topics, and its store
// writes are kept. If a record fails under the Fail policy, the batch
// stops taking records (each later Pipe returns that error without
// running its record) and aborts when fn returns: none of its outputs
// and none of its store writes are kept, not even those of the records
// before the failing one, and Batch returns the error. An error fn
// returns aborts the batch likewise. Records the committed batch wrote to
// topics the topology reads (repartition topics) are taken after it, each
// in a batch of its own. Batches do not nest; AdvanceWallClock cannot run
// inside one.
func (d *Driver) Batch(fn func() error) error {
	d.helper()
	d.usable("Batch")
	if d.inBatch {
		d.failf("Batch inside a Batch")
	}
	d.inBatch, d.doomed = true, nil
	defer func() {
		if d.inBatch { // fn panicked or failed its test
			d.inBatch = false
			d.abort()
		}
	}()
	err := fn()
	d.inBatch = false
	if d.doomed != nil {
		err = d.doomed
	}
	return join(d.finish(err), d.drain())
}

// pipe takes r, placed in its topic, in a batch: the open Batch's, or one
// of its own, after which the records it fed back are taken.
func (d *Driver) pipe(r *kgo.Record) error {
	if d.inBatch {
		if d.doomed != nil {
			return d.doomed
		}
		d.doomed = d.take(r)
		return d.doomed
	}
	return join(d.finish(d.take(r)), d.drain())
}

// take runs r through the topology in the open batch, then moves its
// task's stream time on, as the runtime's batch does.
func (d *Driver) take(r *kgo.Record) error {
	d.st.beginRecord()
	outcome, err := d.eng.Process(d.ctx, r, d.emitFn)
	if outcome != engine.Processed {
		d.st.failRecord()
	}
	if err := settled(outcome, err); err != nil {
		return err
	}
	if d.streamTimers {
		if err := settled(d.eng.StreamTime(r, d.beginFn, d.emitFn, d.doneFn)); err != nil {
			return err
		}
	}
	if d.wallSources[r.Topic] {
		d.taken = append(d.taken, state.Task{Topic: r.Topic, Partition: r.Partition})
	}
	return nil
}

// settled is the error of a step whose outcome aborts its batch.
func settled(outcome engine.Outcome, err error) error {
	switch {
	case err != nil:
		return err
	case outcome == engine.Failed || outcome == engine.Interrupted:
		return errors.New("eostest: a step was interrupted, which only a cancelled context does")
	}
	return nil
}

// finish ends the open batch: after err, it aborts; otherwise the
// held-back updates run and it commits, unless one of them fails.
func (d *Driver) finish(err error) error {
	if err == nil && d.eng.Held() > 0 {
		err = settled(d.eng.Flush(d.beginFn, d.emitFn, d.doneFn))
	}
	if err != nil {
		d.abort()
		return err
	}
	return d.commit()
}

// commit places the batch's outputs in their topics, keeps its store
// writes and counts its outcomes: the batch's transaction committed.
func (d *Driver) commit() error {
	for i, r := range d.pending {
		t := d.topicOf(r.Topic)
		d.place(r, t)
		t.unread = append(t.unread, r)
		if d.sources[r.Topic] {
			d.feedback = append(d.feedback, r)
		}
		d.pending[i] = nil
	}
	d.pending = d.pending[:0]
	for _, task := range d.taken {
		d.consumed[task] = true
	}
	d.taken = d.taken[:0]
	tally := d.eng.Take()
	d.stats.Processed += tally.Processed
	d.stats.DeadLettered += tally.DeadLettered
	d.stats.Skipped += tally.Skipped
	d.stats.Retries += tally.Retries
	d.stats.TimerFirings += tally.TimerFirings
	d.stats.ExpiriesSkipped += tally.ExpiriesSkipped
	d.stats.ExpiriesDeadLettered += tally.ExpiriesDeadLettered
	return d.st.commit()
}

// abort drops what the batch did: its transaction aborted.
func (d *Driver) abort() {
	clear(d.pending)
	d.pending = d.pending[:0]
	d.taken = d.taken[:0]
	d.st.abort()
	d.eng.Drop()
	d.eng.Take()
}

// drain takes the records fed back from committed outputs, in the order
// they were written, each in a batch of its own, as the runtime reads
// them back later; it returns what failed.
func (d *Driver) drain() error {
	var errs []error
	for i := 0; i < len(d.feedback); i++ {
		if i == maxFeedback {
			errs = append(errs, fmt.Errorf("eostest: more than %d records fed back from the topology's outputs to its inputs in one call; "+
				"the topology writes to what it reads in a loop", maxFeedback))
			break
		}
		r := d.feedback[i]
		d.feedback[i] = nil
		errs = append(errs, d.finish(d.take(r)))
	}
	clear(d.feedback)
	d.feedback = d.feedback[:0]
	return join(errs...)
}

// emit is the engine's out: an output of the open batch.
func (d *Driver) emit(r *kgo.Record) { d.pending = append(d.pending, r) }

// begin starts a held-back update or a timer step.
func (d *Driver) begin(*kgo.Record) context.Context {
	d.st.beginRecord()
	return d.ctx
}

// done ends one, undoing its store writes unless it went through.
func (d *Driver) done(o engine.Outcome) {
	if o != engine.Processed {
		d.st.failRecord()
	}
}
