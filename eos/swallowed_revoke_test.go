package eos_test

import (
	"context"
	"testing"
	"time"

	"github.com/eosflow/eosflow/codec"
	"github.com/eosflow/eosflow/config"
	"github.com/eosflow/eosflow/eos"
	"github.com/eosflow/eosflow/internal/kafkautil"
	"github.com/eosflow/eosflow/state"
	"github.com/eosflow/eosflow/tools/conformance"
	"github.com/eosflow/eosflow/tools/kafkatest"
	"github.com/eosflow/eosflow/tools/verdict"
	"github.com/eosflow/eosflow/topology"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestQueriesStopAfterSwallowedRevoke: franz-go's transact session passes
// on only the first revoke after an End, so an idle instance that a second
// rebalance takes partitions from gets no callback. It must still stop
// claiming and serving them: Locate says not owned, Get answers an error,
// and never a value older than the new owner's.
func TestQueriesStopAfterSwallowedRevoke(t *testing.T) {
	for _, gp := range []config.GroupProtocol{config.GroupProtocolClassic, config.GroupProtocolConsumer} {
		t.Run(string(gp), func(t *testing.T) { swallowedRevoke(t, gp) })
	}
}

func swallowedRevoke(t *testing.T, gp config.GroupProtocol) {
	env := kafkatest.Fake(t)
	env.CreateTopics(t, 6, "in", "out")
	const n = 600
	conformance.SeedRange(t, env, "in", 0, n)
	cfg := env.Config("app", "a", config.ExactlyOnce)
	cfg.GroupProtocol = gp
	top := func() *topology.Topology { return conformance.CountTopology("in", "out", state.Memory()) }
	a := conformance.Start(t, cfg, top())
	a.WaitCommitted(t, n, 60*time.Second)
	bcfg := cfg
	bcfg.InstanceID = "b"
	conformance.Start(t, bcfg, top())
	conformance.WaitAssigned(t, env, "app", "b")
	time.Sleep(2 * time.Second) // a stays idle: no End after the first revoke
	ccfg := cfg
	ccfg.InstanceID = "c"
	c := conformance.Start(t, ccfg, top())
	conformance.WaitAssigned(t, env, "app", "c")
	time.Sleep(3 * time.Second)

	cl := env.Client(t)
	g, err := kafkautil.DescribeGroup(context.Background(), cl, "app")
	if err != nil {
		t.Fatal(err)
	}
	ma, _ := g.Member("a")
	owned := map[int32]bool{}
	for _, p := range ma.Assigned["in"] {
		owned[p] = true
	}
	qa, _ := a.R.Query("counts")
	claimed := 0
	for i := range conformance.SeedKeys {
		k := verdict.Key(i, conformance.SeedKeys)
		loc, err := qa.Locate(context.Background(), k)
		if err != nil {
			t.Fatal(err)
		}
		_, found, err := eos.GetAs(context.Background(), qa, k, codec.Int64())
		if !owned[loc.Partition] && (loc.Owned || err == nil) {
			if claimed++; claimed < 4 {
				t.Errorf("key %s partition %d: the group gave it away from a %v, yet Locate owned=%v, Get err=%v found=%v", k, loc.Partition, ma.Assigned, loc.Owned, err, found)
			}
		}
	}

	// The new owners move on; a must not answer the old values.
	for i := range 300 {
		k := verdict.Key(i, conformance.SeedKeys)
		if err := cl.ProduceSync(context.Background(), &kgo.Record{Topic: "in", Key: k, Value: []byte("v")}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(5 * time.Second)
	qc, _ := c.R.Query("counts")
	stale := 0
	for i := range conformance.SeedKeys {
		k := verdict.Key(i, conformance.SeedKeys)
		va, fa, ea := eos.GetAs(context.Background(), qa, k, codec.Int64())
		vc, fc, ec := eos.GetAs(context.Background(), qc, k, codec.Int64())
		if ea == nil && ec == nil && fa && fc && va != vc {
			if stale++; stale < 4 {
				t.Errorf("key %s: a answers %d, its owner c answers %d", k, va, vc)
			}
		}
	}
	if claimed+stale > 0 {
		t.Errorf("%d keys claimed and %d answered stale by a, which the group took them from", claimed, stale)
	}
}
