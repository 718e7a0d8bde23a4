package eos_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/eosflow/eosflow/config"
	"github.com/eosflow/eosflow/eos"
	"github.com/eosflow/eosflow/state"
	"github.com/eosflow/eosflow/tools/conformance"
	"github.com/eosflow/eosflow/tools/kafkatest"
	"github.com/eosflow/eosflow/tools/verdict"
)

// A partition that never receives a record still catches up on an idle
// poll: Get answers absent and Range reads without ErrRestoring soon after
// the assignment, not at the partition's first record.
func TestQueryIdlePartitionRestores(t *testing.T) {
	env := kafkatest.Fake(t)
	env.CreateTopics(t, 2, "in", "out")
	cfg := env.Config("app", "a", config.ExactlyOnce)
	a := conformance.Start(t, cfg, conformance.CountTopology("in", "out", state.Memory()))
	conformance.WaitAssigned(t, env, "app", "a")
	q, err := a.R.Query("counts")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	conformance.Until(t, 15*time.Second, "an idle partition readable", func() bool {
		_, found, err := q.Get(ctx, []byte("k1"))
		if err != nil || found {
			if err == nil {
				t.Fatalf("Get k1 found a value in a topic with no records")
			}
			return false
		}
		for _, err := range q.Range(ctx, nil, nil) {
			if errors.Is(err, eos.ErrRestoring) {
				return false
			} else if err != nil {
				t.Fatalf("Range: %v", err)
			}
		}
		return true
	})
}

// A partition with no records that a cooperative rebalance leaves where
// it was gets no callback and no committed offset: the group's
// description still confirms it, so it reads absent again after the
// rebalance (and Range reads without ErrRestoring), under both group
// protocols.
func TestQueryKeptEmptyPartition(t *testing.T) {
	for _, gp := range []config.GroupProtocol{config.GroupProtocolClassic, config.GroupProtocolConsumer} {
		t.Run(string(gp), func(t *testing.T) {
			env := kafkatest.Fake(t)
			env.CreateTopics(t, 4, "in", "out")
			conformance.SeedRange(t, env, "in", 0, 1) // one partition has a record, the others none
			cfg := env.Config("app", "a", config.ExactlyOnce)
			cfg.GroupProtocol = gp
			a := conformance.Start(t, cfg, conformance.CountTopology("in", "out", state.Memory()))
			a.WaitCommitted(t, 1, 30*time.Second)
			q, err := a.R.Query("counts")
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			seeded, err := q.Locate(ctx, verdict.Key(0, conformance.SeedKeys))
			if err != nil {
				t.Fatal(err)
			}
			keyOf := map[int32][]byte{} // a key of each partition with no record
			for i := 0; len(keyOf) < 3 && i < 1000; i++ {
				k := []byte(fmt.Sprint("empty-", i))
				if loc, err := q.Locate(ctx, k); err == nil && loc.Partition != seeded.Partition {
					keyOf[loc.Partition] = k
				}
			}
			bcfg := cfg
			bcfg.InstanceID = "b"
			conformance.Start(t, bcfg, conformance.CountTopology("in", "out", state.Memory()))
			conformance.WaitAssigned(t, env, "app", "b")
			conformance.Until(t, 30*time.Second, "every partition a keeps readable after the rebalance", func() bool {
				kept := 0
				for _, k := range keyOf {
					loc, err := q.Locate(ctx, k)
					if err != nil || !loc.Owned {
						continue
					}
					kept++
					if _, _, err := q.Get(ctx, k); err != nil {
						return false
					}
				}
				for _, err := range q.Range(ctx, nil, nil) {
					if err != nil {
						return false
					}
				}
				return kept > 0 // a keeps an empty partition: what this test is about
			})
		})
	}
}
