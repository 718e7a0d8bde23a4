package topology

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/eosflow/eosflow/dedup"
)

// holdLease renews the lease on id's pending mark every third of the lease
// while its effect runs, until the returned stop is called. The lease then
// bounds how long another instance waits after this one died mid-effect,
// not how long an effect may run: without renewals an effect running past
// its lease (a slow call, a long GC pause) was taken over and run a second
// time beside this one. A renewal that finds the mark taken over or done
// (this instance was paused past the whole lease, or another failing open
// completed it) is reported to onErr,
// as the effect may now run twice; a renewal that fails is retried at the
// next tick.
func (d *dedupNode[T]) holdLease(ctx context.Context, id string) (stop func()) {
	if d.leases == nil {
		return func() {}
	}
	quit, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(max(d.conf.lease/3, time.Millisecond))
		defer tick.Stop()
		for {
			select {
			case <-quit:
				return
			case <-tick.C:
			}
			if lost := d.renew(ctx, id); lost != nil {
				if d.conf.onErr != nil {
					d.conf.onErr(ctx, id, lost)
				}
				return
			}
		}
	}()
	var once sync.Once
	return func() { once.Do(func() { close(quit); <-done }) }
}

// renew claims id again for this node, which extends its own pending
// lease; it returns an error only when the mark is no longer this node's.
func (d *dedupNode[T]) renew(ctx context.Context, id string) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), dedupTimeout)
	defer cancel()
	c, err := d.leases.Claim(ctx, id, d.owner, d.conf.lease, d.conf.retention)
	if err != nil || c.State == dedup.Claimed {
		return nil // renewed, or to be tried again at the next tick
	}
	return fmt.Errorf("dedup node %s: the lease on %q was lost while its effect still ran (found %v, owner %q): "+
		"this instance was paused past the whole lease (raise DedupLease above the longest pause), or another instance failing open completed the id; the effect may run twice", d.n.name, id, c.State, c.Owner)
}
