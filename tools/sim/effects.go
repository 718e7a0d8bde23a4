package sim

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/eosflow/eosflow/dedup"
	"github.com/eosflow/eosflow/dedup/lease"
	"github.com/eosflow/eosflow/tools/chaos"
	"github.com/eosflow/eosflow/topology"
)

// midEffect is how long an effect that a joining member interrupts takes
// to answer: long enough for the join to revoke its partition, shorter
// than half the runners' rebalance_timeout, after which a revoke cancels
// the record's context.
const midEffect = time.Second

// dedupLease is how long a crashed member's pending mark holds its id:
// long enough that a live member renews it, short enough that a schedule
// does not wait out the default 30 s.
const dedupLease = 3 * time.Second

// dedupTopology is the dedup pipeline of member idx: each record's side
// effect (counted per id, outside Kafka) runs behind topology.Dedup with
// the run's store, shared by all members as an external store is.
func (s *sim) dedupTopology(idx int, w *wire, mode chaos.DedupMode) (*topology.Topology, error) {
	shared, err := s.dedupStore()
	if err != nil {
		return nil, err
	}
	store := memberStore{st: shared, w: w, s: s, idx: idx}
	effect := func(ctx context.Context, id string) error { return s.onEffect(ctx, idx, w, id) }
	return chaos.DedupPipeline(input, output, store, effect, mode, func() { s.onRecord(idx, w) }, topology.DedupLease(dedupLease)), nil
}

func (s *sim) dedupStore() (*dedup.Memory, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.store == nil {
		st, err := dedup.NewMemory()
		if err != nil {
			return nil, err
		}
		s.store = st
	}
	return s.store, nil
}

// onEffect is member idx running the side effect of id: it counts, and
// the schedule can crash the member there (after the effect, before its
// mark) or have a member join while it runs.
func (s *sim) onEffect(ctx context.Context, idx int, w *wire, id string) error {
	// Landing is checked against the wire's death in one step: a crash
	// either sees the effect as landed and unmarked, or the effect never
	// runs.
	if !w.effectLanded(id) {
		return fmt.Errorf("sim: member %d crashed", idx) // a dead process runs nothing
	}
	s.mu.Lock()
	s.effects[id]++
	s.mu.Unlock()
	i, ok := s.step(idx, w, Effect)
	if !ok {
		return nil
	}
	switch s.sched.Steps[i].Fault {
	case Crash:
		// After the effect, before its mark: the dead incarnation's
		// store calls fail from now on (memberStore).
		s.strike(i)
		s.crash(idx, w)
		s.events <- event{idx: idx, wire: w, step: i, fault: Crash}
		s.acted()
	case Join:
		// The effect has landed and answers a moment after the join's
		// revoke begins waiting for it (or after midEffect, if no
		// revoke waits for it); if its context ends
		// before the answer it fails, as a call cancelled before its
		// answer does. The revoke must let it answer.
		waits := s.hearing.revokeWaits.Load()
		s.events <- event{idx: idx, wire: w, step: i, fault: Join}
		s.acted()
		return s.answerLate(ctx, waits)
	}
	return nil
}

// answerLate is a landed effect's late answer: 300 ms after a revoke
// waits for a record in flight (more than waits have), or at midEffect;
// the context's error if it ended first.
func (s *sim) answerLate(ctx context.Context, waits int64) error {
	poll := time.NewTicker(5 * time.Millisecond)
	defer poll.Stop()
	late := time.NewTimer(midEffect)
	defer late.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-late.C:
			return nil
		case <-poll.C:
			if s.hearing.revokeWaits.Load() > waits {
				s.mu.Lock()
				s.overlaps++
				s.mu.Unlock()
				late.Reset(300 * time.Millisecond)
				waits = math.MaxInt64
			}
		}
	}
}

// judgeEffects checks each input id's effect: run at least once, and
// repeated no more than its allowance: one per crash while it had run
// and was not marked, one per store fault that could make it run again.
func (s *sim) judgeEffects() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	missing, over, first := 0, 0, ""
	for n := range s.inputs {
		id := strconv.Itoa(n)
		runs := s.effects[id]
		if runs == 0 {
			missing++
		}
		if runs > 1+s.allowed[id] {
			over++
			if first == "" {
				first = fmt.Sprintf("id %s ran %d times, allowed %d", id, runs, 1+s.allowed[id])
			}
		}
	}
	if missing > 0 || over > 0 {
		return fmt.Errorf("side effects: %d ids never ran, %d ran more often than allowed (%s; one repeat per crash while the effect had run and was not marked, or per store fault that could repeat it)", missing, over, first)
	}
	return nil
}

// allow lets id's effect run once more.
func (s *sim) allow(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.allowed[id]++
}

// memberStore is the shared store as one incarnation reaches it: once the
// incarnation crashed, every call fails, as a dead process makes none;
// and each call is a point of the schedule.
type memberStore struct {
	st  *dedup.Memory
	w   *wire
	s   *sim
	idx int
}

// errStore is a dedup store call the schedule failed.
var errStore = errors.New("sim: dedup store call failed")

func (m memberStore) alive() error {
	if m.w.isDead() {
		return errCut
	}
	return nil
}

// call runs one store call for id as the schedule has it: refused
// unapplied, applied with its answer lost, or the member crashing before
// it. mutates says whether the call changes the store: a lost answer of
// one that does not is no fault, and strikes nothing. repeats says
// whether fault f of this call can make id's effect run again (the
// pipelines fail open): each such fault allows id one more run.
func (m memberStore) call(id string, mutates bool, repeats func(f Fault) bool, apply func() error) error {
	if err := m.alive(); err != nil {
		return err
	}
	i, ok := m.s.step(m.idx, m.w, Store)
	if !ok {
		return apply()
	}
	defer m.s.acted()
	f := m.s.sched.Steps[i].Fault
	switch f {
	case Crash:
		m.s.strike(i)
		m.s.crash(m.idx, m.w)
		m.s.events <- event{idx: m.idx, wire: m.w, step: i, fault: Crash}
		return errCut
	case StoreLost:
		if !mutates {
			return apply()
		}
		if err := apply(); err != nil {
			return err
		}
	}
	m.s.strike(i)
	if repeats(f) {
		m.s.allow(id)
	}
	return errStore
}

// never is a call none of whose faults repeats an effect.
func never(Fault) bool { return false }

// Mark is the shared store's, while the incarnation lives. Mark-after
// marks once the effect ran: unless the mark was applied, a redo runs the
// effect again.
func (m memberStore) Mark(ctx context.Context, id string, ttl time.Duration) (first bool, err error) {
	err = m.call(id, true, func(f Fault) bool { return f == StoreFail }, func() error {
		first, err = m.st.Mark(ctx, id, ttl)
		if err == nil {
			m.w.effectMarked(id)
		}
		return err
	})
	return first, err
}

// Seen is the shared store's, while the incarnation lives. Failing open,
// a lookup that fails runs the effect: again, if it was marked.
func (m memberStore) Seen(ctx context.Context, id string) (seen bool, err error) {
	marked, _ := m.st.Seen(ctx, id)
	err = m.call(id, false, func(Fault) bool { return marked }, func() error {
		seen, err = m.st.Seen(ctx, id)
		return err
	})
	return seen, err
}

// Forget is the shared store's, while the incarnation lives.
func (m memberStore) Forget(ctx context.Context, id string) error {
	return m.call(id, true, never, func() error { return m.st.Forget(ctx, id) })
}

// Claim is the shared store's, while the incarnation lives. Failing open,
// a claim that fails runs the effect without a mark to complete, so it
// may run again; a renewal (a claim of an id this incarnation holds) is
// retried at the next tick.
func (m memberStore) Claim(ctx context.Context, id, owner string, d, ttl time.Duration) (c lease.Claim, err error) {
	renewal := m.w.holds(id)
	err = m.call(id, true, func(Fault) bool { return !renewal }, func() error {
		c, err = m.st.Claim(ctx, id, owner, d, ttl)
		return err
	})
	if err == nil && c.State == lease.Claimed {
		m.w.hold(id, true)
	}
	return c, err
}

// Complete is the shared store's, while the incarnation lives. Unless it
// was applied, the mark stays pending until its lease expires, and a redo
// then runs the effect again.
func (m memberStore) Complete(ctx context.Context, id string, ttl time.Duration) error {
	m.w.hold(id, false)
	return m.call(id, true, func(f Fault) bool { return f == StoreFail }, func() error {
		err := m.st.Complete(ctx, id, ttl)
		if err == nil {
			m.w.effectMarked(id)
		}
		return err
	})
}

// Release is the shared store's, while the incarnation lives.
func (m memberStore) Release(ctx context.Context, id, owner string) error {
	m.w.hold(id, false)
	return m.call(id, true, never, func() error { return m.st.Release(ctx, id, owner) })
}
