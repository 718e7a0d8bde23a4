package topology

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/eosflow/eosflow/dedup"
	"github.com/eosflow/eosflow/internal/graph"
)

// dedupTimeout bounds the Forget after a failed effect, which runs even when
// the record's context ended.
const dedupTimeout = 5 * time.Second

// DefaultDedupRetention is how long Dedup remembers an id when no
// DedupRetention option is given: twice a 12-hour redelivery window, as the
// article advises (twice the longest time after which a message can come
// again). A record redelivered after its id expired looks new and its effect
// repeats, so raise it if an instance can be down, or a partition's lag can
// grow, for longer than 12 hours.
const DefaultDedupRetention = 24 * time.Hour

// DedupOption tunes Dedup.
type DedupOption interface{ applyDedup(*dedupConf) }

type dedupConf struct {
	after      bool
	lease      time.Duration
	retention  time.Duration
	failClosed bool
	onErr      func(ctx context.Context, id string, err error)
	acceptFP   bool
}

type dedupOpt func(*dedupConf)

func (f dedupOpt) applyDedup(c *dedupConf) { f(c) }

// MarkBefore marks an id before its effect runs, so that even two instances
// racing on one id run the effect once. With a store that holds leases
// (dedup.Leaser: every store but redisdedup.Bloom) the mark is first
// written as pending for this instance, with a lease (DedupLease), and
// becomes done when the effect returned: an instance that finds it
// pending (a partition that moved while the effect ran past
// rebalance_timeout) waits for it, and never skips it; once the lease
// expired (the owner died mid-effect) it takes the mark over and runs the
// effect again. So an effect whose owner died mid-effect runs at least
// once, never zero times. With a store without leases, what it risks is a
// lost effect: if the process dies after the mark and before the effect
// finished, the redelivered record finds its id marked and skips the
// effect. The same happens when a Mark's answer is lost (a timeout) and
// the node's Retry policy (FailClosed) calls Mark again: the retry finds
// the first call's mark. When the effect returns an error (or panics) the
// mark is forgotten (released), so a failure that is not a crash does not
// lose the effect; if that fails, it is reported to onErr (FailOpen) or
// joined to the effect's error (FailClosed).
func MarkBefore() DedupOption { return dedupOpt(func(c *dedupConf) { c.after = false }) }

// MarkAfter marks an id only after its effect succeeded; this is the
// default. What it risks is a repeated effect: if the process dies after the
// effect and before the mark, the redelivered record is not marked yet and
// its effect runs again. With a store that holds leases (dedup.Leaser) the
// effect runs under a pending claim, as MarkBefore's does: partition
// ownership alone cannot keep two instances apart (a late JoinGroup with
// this instance's group.instance.id fences it, and its partitions move on
// with no revoke while its effect runs), so an instance that finds the id
// pending waits; the redelivery of a crashed owner's id waits for its
// lease, then runs the effect again. With a store without leases checking
// and marking are two calls, and two instances racing on one id can both
// run the effect.
func MarkAfter() DedupOption { return dedupOpt(func(c *dedupConf) { c.after = true }) }

// DefaultDedupLease is how long a claim stays pending for the
// instance that runs its effect, when no DedupLease option is given: kept
// below the default transaction_timeout (40s), as an instance that finds
// the mark pending waits up to the lease within its batch.
const DefaultDedupLease = 30 * time.Second

// dedupLeasePoll bounds the wait between two claims of a pending id.
const dedupLeasePoll = 100 * time.Millisecond

// DedupLease sets how long a claim stays pending for the
// instance running its effect, overriding DefaultDedupLease (30s), with a
// store that holds leases (dedup.Leaser). The instance renews it every
// third of the lease while the effect runs, so an effect may run longer.
// An instance that finds the mark pending waits for it to become done;
// once the lease expired (the owner died mid-effect, or was paused past
// the whole lease) it takes the mark over and runs the effect again. Make
// it longer than the longest pause of a process (GC, a stopped VM): a
// paused owner's effect can run twice, which onErr is told.
func DedupLease(d time.Duration) DedupOption {
	return dedupOpt(func(c *dedupConf) { c.lease = d })
}

// DedupRetention keeps ids for d, overriding DefaultDedupRetention (24h).
// Keep ids for twice the longest redelivery window.
func DedupRetention(d time.Duration) DedupOption {
	return dedupOpt(func(c *dedupConf) { c.retention = d })
}

// FailOpen runs the effect when the store fails (unreachable, timed out);
// this is the default, as in most systems per the article: the risk is
// a duplicate effect, which is usually cheaper than a lost or stalled one.
// onErr, if not nil, is told about each such failure (to log or count it).
// An effect run so is marked (completed) once it succeeded, even if
// another instance holds its id pending meanwhile: that one's renewal
// then reports the lease lost.
func FailOpen(onErr func(ctx context.Context, id string, err error)) DedupOption {
	return dedupOpt(func(c *dedupConf) { c.failClosed, c.onErr = false, onErr })
}

// FailClosed makes a store failure the node's error, handled by its error
// policy (top.OnError): Retry retries the store call, Fail aborts the
// transaction and stops, DeadLetter and Skip set the record aside. The risk
// is a stall (or a record set aside) while the store is down, never a
// repeated effect the store could have caught.
func FailClosed() DedupOption {
	return dedupOpt(func(c *dedupConf) { c.failClosed, c.onErr = true, nil })
}

// AcceptFalsePositives lets Dedup use an approximate store
// (dedup.Approximate), such as redisdedup.Bloom, which Validate refuses by
// default. What it risks is a lost effect per false positive: the store
// reports about its FalsePositiveRate of new ids as already seen, and Dedup
// skips their effects (the records still pass on). Give it where losing
// those effects is acceptable and the store's small memory is worth it;
// otherwise use an exact store.
func AcceptFalsePositives() DedupOption {
	return dedupOpt(func(c *dedupConf) { c.acceptFP = true })
}

// Dedup runs effect once per id (from id) within the retention, recording
// ids in store: the article's dedup store, for effects outside Kafka (a
// payment call, an email, a write to another database). A record whose id is
// already marked skips the effect. Every record, first or not, then goes on
// to the nodes after Dedup unchanged.
//
// Records are passed on because Kafka outputs must not be deduplicated by an
// external store under the exactly-once guarantee: when a transaction aborts
// (a rebalance, a failed commit) its records are processed again, and their
// outputs, whose first writes were aborted, must be written again, while the
// effect, which did happen, must not. Drop repeated ids from the outputs too,
// if wanted, with a Filter or Process that keeps its own state.
//
// effect runs under the node's error policy (top.OnError), like the
// function of MapValues; ctx is cancelled on shutdown and when the record's
// partition is revoked, and the revoke waits (up to rebalance_timeout) for
// the effect to return before the partition goes to its new owner. The
// default mode is MarkAfter with FailOpen; see MarkBefore, MarkAfter,
// FailOpen and FailClosed for what each risks.
//
// Every store of dedup, redisdedup and pgdedup is a dedup.Store. A store
// that holds leases (dedup.Leaser) lets either mode claim the id while the
// effect runs. An approximate store (dedup.Approximate, such as
// redisdedup.Bloom) needs AcceptFalsePositives and MarkAfter, as a Bloom
// filter skips the effects of its false positives and cannot forget a
// failed effect's mark. A store with a fixed retention (dedup.Retainer)
// refuses a DedupRetention above it. An empty id is an error of the node
// (ErrEmptyDedupID), handled by its policy.
func Dedup[T any](s Stream[T], name string, id func(r Record[T]) string, store dedup.Store, effect func(ctx context.Context, r Record[T]) error, opts ...DedupOption) Stream[T] {
	conf := dedupConf{after: true, retention: DefaultDedupRetention, lease: DefaultDedupLease}
	for _, o := range opts {
		if o != nil {
			o.applyDedup(&conf)
		}
	}
	p := &port[T]{}
	var base *dedupNode[T]
	n := attach(s, name, KindProcessor, "Dedup", func(n *Node) func(graph.Exec, Record[T]) error {
		d := &dedupNode[T]{n: n, id: id, store: store, effect: effect, conf: conf, owner: dedupOwner(), landed: newLandedEffects()}
		d.leases, _ = store.(dedup.Leaser)
		d.apply = func(ctx context.Context, r Record[T]) (struct{}, error) { return struct{}{}, d.effect(ctx, r) }
		base = d
		// With leases both modes claim the id for the effect's run, so
		// that no two owners of its partition run it at once.
		run := (*dedupNode[T]).markBefore
		if conf.after && d.leases == nil {
			run = (*dedupNode[T]).markAfter
		}
		return func(x graph.Exec, r Record[T]) error {
			if err := run(d.in(x), x, r); err != nil {
				return err
			}
			return p.push(x, r)
		}
	})
	t := s.topology()
	if n == nil {
		return Stream[T]{}
	}
	if base != nil {
		// Each engine (a worker, a runner) claims as an owner of its own:
		// one that found an id pending for its own owner would take it
		// for its own claim, and run the effect beside another engine.
		n.init = func(context.Context) (any, error) {
			e := *base
			e.owner, e.landed = dedupOwner(), newLandedEffects()
			return &e, nil
		}
	}
	t.nilFunc(n, id == nil || effect == nil)
	if store == nil {
		t.problem(name, "Dedup has no store; pass dedup.NewMemory(), redisdedup.New(url) or pgdedup.New(ctx, url)")
	}
	if conf.retention < time.Millisecond {
		t.problem(name, "Dedup retention %v is below 1ms; keep ids twice the longest redelivery window", conf.retention)
	}
	if conf.lease < time.Millisecond {
		t.problem(name, "Dedup lease %v is below 1ms; make it longer than the longest pause of a process", conf.lease)
	}
	if rs, ok := store.(dedup.Retainer); ok && conf.retention > rs.Retention() {
		t.problem(name, "Dedup retention %v is longer than the store's %v, and every Mark would fail; pass topology.DedupRetention(%v), or build the store with a retention of at least %v", conf.retention, rs.Retention(), rs.Retention(), conf.retention)
	}
	mode := "mark after"
	if !conf.after {
		mode = "mark before"
	}
	fail := "fail open"
	if conf.failClosed {
		fail = "fail closed"
	}
	n.dedup = fmt.Sprintf("%s, retention %v, %s", mode, conf.retention, fail)
	if as, ok := store.(dedup.Approximate); ok {
		rate := as.FalsePositiveRate()
		if !conf.acceptFP {
			t.problem(name, "Dedup store is a Bloom filter: about 1 in %.0f new ids looks already seen and its effect is skipped; pass topology.AcceptFalsePositives() if losing those effects is acceptable, or use an exact store (redisdedup.New, pgdedup.New)", 1/rate)
		}
		if !conf.after {
			t.problem(name, "Dedup with MarkBefore needs a store that can forget the mark of a failed effect, and a Bloom filter cannot: the effect's redelivery would be skipped; use MarkAfter (the default) with it, or an exact store")
		}
		n.dedup += fmt.Sprintf(", Bloom filter: false positives skip about %s%% of new ids", strconv.FormatFloat(rate*100, 'g', 3, 64))
	}
	return Stream[T]{n: n, p: p}
}

type dedupNode[T any] struct {
	n      *Node
	id     func(Record[T]) string
	store  dedup.Store
	effect func(context.Context, Record[T]) error
	apply  func(context.Context, Record[T]) (struct{}, error) // effect, in the shape call takes
	conf   dedupConf
	// leases is store, when it holds pending marks (both modes claim
	// with a lease); owner names this node's claims.
	leases dedup.Leaser
	owner  string
	// landed: ids whose effect ran in this engine while the store did not
	// take the mark after it (see settle).
	landed *landedEffects
}

// dedupOwner names the claims of one Dedup node of one runner: the host,
// the process and a random part, unique among the instances sharing a
// store.
func dedupOwner() string {
	host, _ := os.Hostname()
	var b [8]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("%s/%d/%s", host, os.Getpid(), hex.EncodeToString(b[:]))
}

// ident runs the user's id function and refuses an empty id.
func (d *dedupNode[T]) ident(x graph.Exec, r Record[T]) (string, error) {
	x.Enter(d.n.index)
	id := d.id(r)
	if id == "" {
		return "", &NodeError{Node: d.n.name, Err: ErrEmptyDedupID}
	}
	return id, nil
}

// storeCall runs one store call. Failing closed, the call goes through the
// node's retry policy and its error becomes the node's; failing open, the
// error is reported to onErr and ok is false so the caller runs the effect
// anyway. An error once the record's context ended is returned either way:
// the record is redone, not let through.
func storeCall[T, R any](d *dedupNode[T], x graph.Exec, fn func(context.Context, string) (R, error), id string) (res R, ok bool, err error) {
	if d.conf.failClosed {
		res, err = call(x, d.n, fn, id)
		return res, err == nil, err
	}
	x.Enter(d.n.index)
	res, err = fn(x.Context(), id)
	if err == nil {
		return res, true, nil
	}
	if x.Context().Err() != nil {
		return res, false, &NodeError{Node: d.n.name, Err: err}
	}
	if d.conf.onErr != nil {
		d.conf.onErr(x.Context(), id, err)
	}
	return res, false, nil
}

// in is this node's instance in the engine running x (see Dedup's Init),
// or d itself where there is none.
func (d *dedupNode[T]) in(x graph.Exec) *dedupNode[T] {
	if e, ok := x.Slot(d.n.index).(*dedupNode[T]); ok {
		return e
	}
	return d
}

// markBefore marks (or claims) first and runs the effect only if the mark
// was the first; an effect that fails or panics has its mark forgotten. It
// is MarkAfter's too with a store that holds leases.
func (d *dedupNode[T]) markBefore(x graph.Exec, r Record[T]) error {
	id, err := d.ident(x, r)
	if err != nil {
		return err
	}
	first, ok, err := storeCall(d, x, d.mark, id)
	switch {
	case err != nil:
		return err
	case !ok: // failing open: the mark is unknown (a lost answer may leave a claim pending until its lease expires); nothing to forget
		if !d.landed.has(id) {
			if err := d.run(x, r); err != nil {
				return err
			}
		}
		return d.settle(x, id)
	case !first: // a repeat
		return nil
	case d.landed.has(id): // the effect ran here; its mark did not land
		return d.settle(x, id)
	}
	stop := d.holdLease(x.Context(), id)
	done := false
	defer func() {
		if !done { // the effect panicked
			stop()
			_ = d.forget(x, id)
		}
	}()
	err = d.run(x, r)
	done = true
	stop()
	if err != nil {
		if ferr := d.forget(x, id); ferr != nil && d.conf.failClosed {
			// The mark stays (without leases the redo skips the
			// effect; with them it waits for the lease). Say so with
			// the effect's error, to the node's policy.
			err = errors.Join(err, &NodeError{Node: d.n.name, Err: ferr})
		}
		return err
	}
	if d.leases == nil {
		return nil
	}
	// The effect happened: its pending mark becomes done even if the
	// record's context ends now, or a redelivery would run it again once
	// the lease expired.
	return d.settle(x, id)
}

// settle marks id done after its effect ran, outside the record's context
// (a revoke or a shutdown must not stop it): completing its pending mark
// with a store that holds leases, marking it otherwise. A mark the store
// does not take (an error failing closed, or failing open) leaves id in
// landed, so that the record's redelivery to this engine marks it again
// instead of running the effect a second time; a store paused past the
// call's timeout would otherwise have the effect repeated by the redo.
func (d *dedupNode[T]) settle(x graph.Exec, id string) error {
	done := d.markDetached
	if d.leases != nil {
		done = func(ctx context.Context, id string) (bool, error) {
			_, err := d.completeDetached(ctx, id)
			return true, err
		}
	}
	_, ok, err := storeCall(d, x, done, id)
	if err == nil && ok {
		d.landed.remove(id)
	} else {
		d.landed.add(id)
	}
	return err
}

// markAfter runs the effect unless the id is marked, and marks it once the
// effect succeeded.
func (d *dedupNode[T]) markAfter(x graph.Exec, r Record[T]) error {
	id, err := d.ident(x, r)
	if err != nil {
		return err
	}
	seen, ok, err := storeCall(d, x, d.store.Seen, id)
	switch {
	case err != nil:
		return err
	case ok && seen: // a repeat
		return nil
	}
	if !d.landed.has(id) {
		if err := d.run(x, r); err != nil {
			return err
		}
	}
	// The effect happened: mark it even if the record's context ends now
	// (a revoke, a shutdown), or the redo would repeat it.
	return d.settle(x, id)
}

// run calls the effect under the node's retry policy.
func (d *dedupNode[T]) run(x graph.Exec, r Record[T]) error {
	_, err := call(x, d.n, d.apply, r)
	return err
}

func (d *dedupNode[T]) mark(ctx context.Context, id string) (bool, error) {
	if d.leases != nil {
		return d.claim(ctx, id)
	}
	return d.store.Mark(ctx, id, d.conf.retention)
}

// claim marks id pending for this node with a lease, and reports whether
// the effect is this node's to run: true once claimed, false once done.
// An id pending for another owner is waited for, never skipped: until it
// is done, or its lease expired and this node takes it over.
func (d *dedupNode[T]) claim(ctx context.Context, id string) (bool, error) {
	for {
		c, err := d.leases.Claim(ctx, id, d.owner, d.conf.lease, d.conf.retention)
		switch {
		case err != nil:
			return false, err
		case c.State == dedup.Claimed:
			return true, nil
		case c.State == dedup.Done:
			return false, nil
		case c.State != dedup.Pending:
			return false, fmt.Errorf("dedup store answered claim of %q with state %v; want claimed, pending or done", id, c.State)
		}
		wait := time.NewTimer(min(c.Left+time.Millisecond, dedupLeasePoll))
		select {
		case <-ctx.Done():
			wait.Stop()
			return false, fmt.Errorf("waiting for id %q, pending for %s for %v more (its effect may be running there): %w", id, c.Owner, c.Left, ctx.Err())
		case <-wait.C:
		}
	}
}

// completeDetached marks id done outside the record's context, bounded by
// dedupTimeout.
func (d *dedupNode[T]) completeDetached(ctx context.Context, id string) (struct{}, error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), dedupTimeout)
	defer cancel()
	return struct{}{}, d.leases.Complete(ctx, id, d.conf.retention)
}

// markDetached is mark outside the record's context, bounded by
// dedupTimeout.
func (d *dedupNode[T]) markDetached(ctx context.Context, id string) (bool, error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), dedupTimeout)
	defer cancel()
	return d.mark(ctx, id)
}

// forget undoes a mark whose effect failed, also when the record's context
// ended (that is often why it failed), bounded by dedupTimeout. If it
// fails, a store without leases drops the redelivery (mark-before's
// loss); with leases the id stays pending until its lease expires, and
// a redelivery to another engine waits for that (this engine's own
// claims it again at once). Either is reported to onErr and returned.
func (d *dedupNode[T]) forget(x graph.Exec, id string) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(x.Context()), dedupTimeout)
	defer cancel()
	var err error
	consequence := "the redelivered record will skip its effect"
	if d.leases != nil {
		err = d.leases.Release(ctx, id, d.owner)
		consequence = "the id stays pending until its lease expires, and the redelivered record waits for that"
	} else {
		err = d.store.Forget(ctx, id)
	}
	if err != nil {
		err = fmt.Errorf("forget after a failed effect (%s): %w", consequence, err)
		if d.conf.onErr != nil {
			d.conf.onErr(ctx, id, err)
		}
	}
	return err
}
