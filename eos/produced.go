package eos

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// produceErrs keeps the first produce failure of a batch, and the first
// output refused for the record itself (too large, invalid), which the
// runtime attributes to its input record.
type produceErrs struct {
	mu     sync.Mutex
	err    error
	rejRec *kgo.Record
	rejErr error
	// written is the producer id and epoch of the batch's first written
	// record, and mixed whether a later one was written under another:
	// see txnSession.end.
	written atomic.Pointer[producerEpoch]
	mixed   atomic.Bool
	// pending counts records handed to the producer whose promise has
	// not run; see settle.
	pending atomic.Int64
	// firsts, kept when track is set (transactional sessions), is per
	// partition the lowest offset the batch wrote: see joinGuard.
	track  bool
	fmu    sync.Mutex
	firsts map[topicPartition]int64
}

// topicPartition names one partition.
type topicPartition struct {
	topic     string
	partition int32
}

// errEpochChanged: a batch's records were not all written under the
// producer epoch its commit would use, so it is aborted and redone.
var errEpochChanged = errors.New("the producer epoch changed during the batch")

// producerEpoch is who wrote a record, as the broker acknowledged it.
type producerEpoch struct {
	id    int64
	epoch int16
}

func (p *produceErrs) record(r *kgo.Record, err error) {
	defer p.pending.Add(-1)
	if err == nil {
		if r != nil {
			p.wrote(producerEpoch{r.ProducerID, r.ProducerEpoch})
			if p.track {
				p.first(r)
			}
		}
		return
	}
	switch {
	case r != nil && isFatal(err):
		// A refused produce names no topic; keep it, so the error can
		// name the ACL that is missing.
		err = &topicError{topic: r.Topic, op: "Write", err: err}
	case r != nil && isPartitionError(err):
		err = fmt.Errorf("writing to %s/%d: %w; check its leader with `eosctl topic describe %s`", r.Topic, r.Partition, err, r.Topic)
	}
	p.mu.Lock()
	if p.err == nil || errors.Is(p.err, kgo.ErrAborting) && !errors.Is(err, kgo.ErrAborting) {
		// A doomed batch's dropped records (ErrAborting) must not hide
		// a real failure, such as a fence, behind them.
		p.err = err
	}
	// The broker refuses a whole record batch, so every record in it gets
	// the error: keep the likeliest culprit, the largest record (or, for
	// an invalid record, one without a key).
	if r != nil && isRecordRejected(err) && (p.rejRec == nil || likelierCulprit(r, p.rejRec, err)) {
		p.rejRec, p.rejErr = r, err
	}
	p.mu.Unlock()
}

// isPartitionError reports whether err says a partition could not take
// writes (its leader lost or moving, too few in-sync replicas, its disk
// failing), which the producer reports only for a record it had put in
// that partition.
func isPartitionError(err error) bool {
	for _, ke := range []*kerr.Error{kerr.LeaderNotAvailable, kerr.NotLeaderForPartition, kerr.ReplicaNotAvailable,
		kerr.NotEnoughReplicas, kerr.NotEnoughReplicasAfterAppend, kerr.RequestTimedOut, kerr.KafkaStorageError,
		kerr.FencedLeaderEpoch, kerr.UnknownLeaderEpoch} {
		if errors.Is(err, ke) {
			return true
		}
	}
	return false
}

// wrote notes the producer of a written record; it allocates once a
// batch, for the first. Only a copy made for the first may have its
// address taken: taking pe's would move it to the heap on every call,
// an allocation per record.
func (p *produceErrs) wrote(pe producerEpoch) {
	w := p.written.Load()
	if w == nil {
		first := pe
		p.written.CompareAndSwap(nil, &first)
		w = p.written.Load()
	}
	if *w != pe {
		p.mixed.Store(true)
	}
}

// first keeps r's offset if it is the lowest written to its partition
// in the batch.
func (p *produceErrs) first(r *kgo.Record) {
	tp := topicPartition{r.Topic, r.Partition}
	p.fmu.Lock()
	if o, ok := p.firsts[tp]; !ok || r.Offset < o {
		if p.firsts == nil {
			p.firsts = make(map[topicPartition]int64)
		}
		p.firsts[tp] = r.Offset
	}
	p.fmu.Unlock()
}

// writtenFrom returns, per partition, the lowest offset the batch wrote.
func (p *produceErrs) writtenFrom() map[topicPartition]int64 {
	p.fmu.Lock()
	defer p.fmu.Unlock()
	return maps.Clone(p.firsts)
}

func (p *produceErrs) reset() {
	p.mu.Lock()
	p.err, p.rejRec, p.rejErr = nil, nil, nil
	p.mu.Unlock()
	p.fmu.Lock()
	clear(p.firsts)
	p.fmu.Unlock()
	p.written.Store(nil)
	p.mixed.Store(false)
}

// epochChanged reports, once the batch's records are all written, whether
// any was written under a producer id or epoch other than now, the one
// the commit would use. franz-go loads a new epoch mid-transaction after
// some produce errors (UNKNOWN_PRODUCER_ID past a deleted log head); the
// load aborts what the transaction held, so a commit would carry the
// input offsets without those records.
func (p *produceErrs) epochChanged(now producerEpoch) error {
	w := p.written.Load()
	if w == nil || *w == now && !p.mixed.Load() {
		return nil
	}
	return fmt.Errorf("%w: records written under producer %d epoch %d, the transaction now under %d epoch %d (mixed: %v)",
		errEpochChanged, w.id, w.epoch, now.id, now.epoch, p.mixed.Load())
}

func likelierCulprit(r, than *kgo.Record, err error) bool {
	if errors.Is(err, kerr.InvalidRecord) && (r.Key == nil) != (than.Key == nil) {
		return r.Key == nil
	}
	return len(r.Key)+len(r.Value) > len(than.Key)+len(than.Value)
}

// sent counts a record handed to the producer with record as its promise.
func (p *produceErrs) sent() { p.pending.Add(1) }

// settle waits until every record sent has had its promise run. Flush
// does not wait for records the producer refused before buffering them
// (larger than its buffer, say), whose promises run on a goroutine of
// their own: a batch ended before one ran would commit without its
// output.
func (p *produceErrs) settle(ctx context.Context) error {
	wait := 50 * time.Microsecond
	for p.pending.Load() > 0 {
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("waiting for the producer's results of %d records: %w", p.pending.Load(), ctx.Err())
		case <-t.C:
		}
		wait = min(2*wait, 10*time.Millisecond)
	}
	return nil
}

func (p *produceErrs) take() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	err := p.err
	p.err = nil
	return err
}

func (p *produceErrs) takeRejected() (*kgo.Record, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	r, err := p.rejRec, p.rejErr
	p.rejRec, p.rejErr = nil, nil
	return r, err
}

// unknownOutcomeError: the commit was sent (EndTxn, or the offset commit
// of a plain session) but no answer came back, so the batch may or may
// not have committed; the broker's committed offsets settle it.
type unknownOutcomeError struct{ err error }

func (e *unknownOutcomeError) Error() string {
	return "commit outcome unknown: " + e.err.Error()
}
func (e *unknownOutcomeError) Unwrap() error { return e.err }

// produceError marks a failure to write a batch's outputs (a produce or
// the flush), as opposed to committing them, for the abort reason.
type produceError struct{ err error }

func (e *produceError) Error() string { return e.err.Error() }
func (e *produceError) Unwrap() error { return e.err }
