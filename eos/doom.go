package eos

// A transaction during which a request to a broker fails on the wire is
// doomed: it sends nothing more and aborts. The broker may have
// restarted, and a restart can skip the marker of an older transaction
// of this producer, leaving it open on a partition (see joined.go):
// records the doomed transaction still held would land there after the
// restart and join it. No outcome of a transaction joined to a committed
// one is safe once the client's End may abort it (a rebalance during the
// outage, a failed offset commit): that abort drops the committed
// records too. The client re-sends a record whose request broke until it
// learns the outcome, after a restart too; so a record still unsettled
// doomDrainBound after the doom is abandoned with the client, and the
// next client's InitProducerId aborts the transaction.

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// doomDrainBound bounds the wait for a doomed transaction's records in
// flight; a broker restart, or a leader's failover, takes longer.
const doomDrainBound = 2 * time.Second

// txnDoom is one transactional session's doom state.
type txnDoom struct {
	cl atomic.Pointer[kgo.Client]
	// failures counts requests failed on the wire; checked is its value
	// when the last join check began to look, so a transaction begun
	// with failures unchecked is doomed from the start.
	failures, checked atomic.Int64
	open, doomed      atomic.Bool
	abandoned         atomic.Bool // records were left in flight: the client must go
	// unsafe: records were dropped unsafely, by this transaction's drain
	// or by one that a failure during End began late; the client's
	// sequence numbers are no longer to be trusted, for good.
	unsafe  atomic.Bool
	drained atomic.Pointer[chan struct{}] // closed once the doomed transaction's records are settled or abandoned
	onDoom  atomic.Pointer[context.CancelFunc]
}

// fail notes a request failed on the wire, and dooms the open
// transaction.
func (d *txnDoom) fail() {
	d.failures.Add(1)
	if d.open.Load() {
		d.doom()
	}
}

// start begins a transaction: doomed at once if a failure came since the
// last check began.
func (d *txnDoom) start() {
	d.doomed.Store(false)
	d.abandoned.Store(false)
	ch := make(chan struct{})
	d.drained.Store(&ch)
	d.open.Store(true)
	if d.failures.Load() != d.checked.Load() {
		d.doom()
	}
}

// doom marks the open transaction doomed, stops a flush that waits for
// its records, and begins to settle them.
func (d *txnDoom) doom() {
	if !d.doomed.CompareAndSwap(false, true) {
		return
	}
	if f := d.onDoom.Load(); f != nil {
		(*f)()
	}
	go d.drain(*d.drained.Load())
}

// drain fails the records not yet sent and waits for those in flight;
// past doomDrainBound it abandons them.
func (d *txnDoom) drain(done chan struct{}) {
	defer close(done)
	cl := d.cl.Load()
	if cl == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), doomDrainBound)
	defer cancel()
	if cl.AbortBufferedRecords(ctx) != nil {
		d.dropUnsafely(cl)
	}
}

// dropUnsafely abandons the records in flight, and with them the client.
func (d *txnDoom) dropUnsafely(cl *kgo.Client) {
	cl.UnsafeAbortBufferedRecords()
	d.unsafe.Store(true)
	d.abandoned.Store(true)
}

// isDoomed reports whether the open transaction is doomed.
func (d *txnDoom) isDoomed() bool { return d.doomed.Load() }

// settled waits until the doomed transaction's records are settled, and
// reports whether they were abandoned (the client must then be closed).
func (d *txnDoom) settled(ctx context.Context) bool {
	select {
	case <-*d.drained.Load():
		return d.abandoned.Load()
	case <-ctx.Done():
		return true
	}
}

// finish ends the transaction.
func (d *txnDoom) finish() { d.open.Store(false) }

// watch returns a context of ctx that ends when the transaction is
// doomed, and the func that stops the watch.
func (d *txnDoom) watch(ctx context.Context) (context.Context, func()) {
	wctx, cancel := context.WithCancel(ctx)
	d.onDoom.Store(&cancel)
	if d.isDoomed() {
		cancel()
	}
	return wctx, func() { d.onDoom.Store(nil); cancel() }
}
