package sim

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/eosflow/eosflow/dedup"
	"github.com/eosflow/eosflow/dedup/lease"
	"github.com/eosflow/eosflow/internal/chaos"
	"github.com/eosflow/eosflow/topology"
)

// midEffect is how long an effect that a joining member interrupts takes
// to answer: long enough for the join to revoke its partition, shorter
// than half the runners' rebalance_timeout, after which a revoke cancels
// the record's context.
const midEffect = time.Second

// dedupTopology is the dedup pipeline of member idx: each record's side
// effect (counted per id, outside Kafka) runs behind topology.Dedup with
// the run's store, shared by all members as an external store is.
func (s *sim) dedupTopology(idx int, w *wire, mode chaos.DedupMode) (*topology.Topology, error) {
	shared, err := s.dedupStore()
	if err != nil {
		return nil, err
	}
	store := memberStore{shared, w}
	effect := func(ctx context.Context, id string) error { return s.onEffect(ctx, idx, w, id) }
	return chaos.DedupPipeline(input, output, store, effect, mode, func() { s.onRecord(idx, w) }), nil
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
	if w.isDead() {
		return fmt.Errorf("sim: member %d crashed", idx) // a dead process runs nothing
	}
	s.mu.Lock()
	s.effects[id]++
	s.mu.Unlock()
	w.effectLanded()
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
		// The effect has landed and takes a while to answer; if its
		// context ends meanwhile it fails, as a call cancelled before
		// its answer does. The join's revoke must let it answer.
		s.events <- event{idx: idx, wire: w, step: i, fault: Join}
		s.acted()
		select {
		case <-time.After(midEffect):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// judgeEffects checks each input id's effect: run at least once, and
// repeated at most once per crash (an effect done, its mark not).
func (s *sim) judgeEffects() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	crashes := s.effectCrashes // the only crashes that may repeat an effect
	missing, repeats, first := 0, 0, ""
	for id := range s.inputs {
		n := s.effects[strconv.Itoa(id)]
		if n == 0 {
			missing++
		}
		if n > 1 {
			repeats += n - 1
			if first == "" {
				first = fmt.Sprintf("id %d ran %d times", id, n)
			}
		}
	}
	if missing > 0 || repeats > crashes {
		return fmt.Errorf("side effects: %d ids never ran, %d repeated runs (%s) with %d crashes (at most one repeat each)", missing, repeats, first, crashes)
	}
	return nil
}

// memberStore is the shared store as one incarnation reaches it: once the
// incarnation crashed, every call fails, as a dead process makes none.
type memberStore struct {
	st *dedup.Memory
	w  *wire
}

func (m memberStore) alive() error {
	if m.w.isDead() {
		return errCut
	}
	return nil
}

// Mark is the shared store's, while the incarnation lives.
func (m memberStore) Mark(ctx context.Context, id string, ttl time.Duration) (bool, error) {
	if err := m.alive(); err != nil {
		return false, err
	}
	first, err := m.st.Mark(ctx, id, ttl)
	if err == nil {
		m.w.effectMarked()
	}
	return first, err
}

// Seen is the shared store's, while the incarnation lives.
func (m memberStore) Seen(ctx context.Context, id string) (bool, error) {
	if err := m.alive(); err != nil {
		return false, err
	}
	return m.st.Seen(ctx, id)
}

// Forget is the shared store's, while the incarnation lives.
func (m memberStore) Forget(ctx context.Context, id string) error {
	if err := m.alive(); err != nil {
		return err
	}
	return m.st.Forget(ctx, id)
}

// Claim is the shared store's, while the incarnation lives.
func (m memberStore) Claim(ctx context.Context, id, owner string, d, ttl time.Duration) (lease.Claim, error) {
	if err := m.alive(); err != nil {
		return lease.Claim{}, err
	}
	return m.st.Claim(ctx, id, owner, d, ttl)
}

// Complete is the shared store's, while the incarnation lives.
func (m memberStore) Complete(ctx context.Context, id string, ttl time.Duration) error {
	if err := m.alive(); err != nil {
		return err
	}
	err := m.st.Complete(ctx, id, ttl)
	if err == nil {
		m.w.effectMarked()
	}
	return err
}

// Release is the shared store's, while the incarnation lives.
func (m memberStore) Release(ctx context.Context, id, owner string) error {
	if err := m.alive(); err != nil {
		return err
	}
	return m.st.Release(ctx, id, owner)
}
