package sim

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/eosflow/eosflow/internal/kafkautil"
	"github.com/eosflow/eosflow/tools/chaos"
	"github.com/eosflow/eosflow/tools/verdict"
	"github.com/eosflow/eosflow/topology"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

const auditBound = 30 * time.Second

// audit checks that every store on disk equals the fold of its committed
// changelog, through the runtime's own next start: each member that kept
// stores starts again alone, on the disk its run left, and counts one
// more record of every key. A store that kept a batch its changelog does
// not hold as committed counts it from the wrong base, so each key's new
// count must be one past the changelog's committed value.
func (s *sim) audit(ctx context.Context) error {
	s.mu.Lock()
	s.over = true
	clear(s.flips)
	members := slices.Sorted(maps.Keys(s.disks))
	s.mu.Unlock()
	for _, idx := range members {
		if err := s.auditMember(ctx, idx); err != nil {
			return fmt.Errorf("after the run, member %d started again on its disk: %w", idx, err)
		}
	}
	return nil
}

func (s *sim) auditMember(ctx context.Context, idx int) error {
	changelog, err := s.read(ctx, topology.ChangelogTopic(appID, chaos.CountStore), true)
	if err != nil {
		return as(KindSetup, err)
	}
	fold := foldCounts(changelog)
	if err := s.seedOnePerKey(ctx); err != nil {
		return as(KindSetup, err)
	}
	in, err := s.start(idx)
	if err != nil {
		return as(KindSetup, err)
	}
	caught := s.awaitCaughtUp(ctx, auditBound)
	if err := in.stop(false, stopBound); err != nil {
		return as(KindLiveness, fmt.Errorf("Run returned %w after Close, want nil", err))
	}
	if !caught {
		return as(KindLiveness, fmt.Errorf("the group did not commit the input within %v", auditBound))
	}
	out, err := s.read(ctx, output, true)
	if err != nil {
		return as(KindSetup, err)
	}
	last := map[string]int64{}
	for _, r := range out {
		if c, ok := verdict.ParseCount(r.Value); ok {
			last[string(r.Key)] = c
		}
	}
	for k := range s.want {
		if last[k] != fold[k]+1 {
			return fmt.Errorf("key %s counted %d, but its committed changelog held %d: the store did not equal its changelog", k, last[k], fold[k])
		}
	}
	return nil
}

// seedOnePerKey adds one input record to every key.
func (s *sim) seedOnePerKey(ctx context.Context) error {
	cl, err := kgo.NewClient(s.base()...)
	if err != nil {
		return err
	}
	defer cl.Close()
	first, keys := s.inputs, s.cfg.Keys
	err = kafkautil.ProduceAll(ctx, cl, keys, func(i int) *kgo.Record {
		return &kgo.Record{Topic: input, Key: verdict.Key(first+i, keys), Value: verdict.Value(first+i, 0)}
	})
	if err != nil {
		return err
	}
	s.inputs += keys
	for k := range s.want {
		s.want[k]++
	}
	return nil
}

// awaitCaughtUp waits until the group has committed the whole input.
func (s *sim) awaitCaughtUp(ctx context.Context, bound time.Duration) bool {
	cl, err := kgo.NewClient(s.base()...)
	if err != nil {
		return false
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	for deadline := time.Now().Add(bound); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if s.caughtUp(ctx, adm) {
			return true
		}
	}
	return false
}
