package eos_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/eosflow/eosflow/config"
	"github.com/eosflow/eosflow/eos"
	"github.com/eosflow/eosflow/state"
	"github.com/eosflow/eosflow/tools/conformance"
	"github.com/eosflow/eosflow/tools/kafkatest"
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
