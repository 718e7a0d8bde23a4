package eos_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
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

// swallowedBound is what docs/state.md promises for a revoke franz-go's
// transact session swallows on an idle instance: it is noticed within a
// quarter second of the client's generation changing, plus one
// description of the group (on the embedded broker, at once), with room
// for a loaded machine.
const swallowedBound = 2 * time.Second

// TestQueriesStopAfterSwallowedRevoke: franz-go's transact session passes
// on only the first revoke after an End, so an idle instance that a second
// rebalance takes partitions from gets no callback. Within the bound the
// docs give it stops claiming and serving them (Locate not owned, Get
// ErrNotOwner), and from then on, while the new owners count on, it never
// answers a value for them.
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
	conformance.Start(t, ccfg, top())
	conformance.WaitAssigned(t, env, "app", "c")
	settled := time.Now()

	cl := env.Client(t)
	qa, _ := a.R.Query("counts")
	var held []int32
	conformance.Until(t, 30*time.Second, "the group stable with a, b and c", func() bool {
		g, err := kafkautil.DescribeGroup(context.Background(), cl, "app")
		ma, ok := g.Member("a")
		held = ma.Assigned["in"]
		return err == nil && ok && g.State == "Stable" && len(g.Members) == 3
	})
	// claims counts the keys of partitions the group gave away that a
	// says it owns or answers other than with ErrNotOwner.
	claims := func() (n int, what string) {
		for i := range conformance.SeedKeys {
			k := verdict.Key(i, conformance.SeedKeys)
			loc, err := qa.Locate(context.Background(), k)
			if err != nil {
				t.Fatal(err)
			}
			if slices.Contains(held, loc.Partition) {
				continue
			}
			v, found, err := eos.GetAs(context.Background(), qa, k, codec.Int64())
			if loc.Owned || !errors.Is(err, eos.ErrNotOwner) {
				n++
				what = fmt.Sprintf("%s: owned %v, Get %d found %v err %v", k, loc.Owned, v, found, err)
			}
		}
		return n, what
	}
	for {
		n, what := claims()
		if n == 0 {
			t.Logf("a stopped claiming %s after the group settled", time.Since(settled).Round(time.Millisecond))
			break
		}
		if time.Since(settled) > swallowedBound {
			t.Fatalf("%s after the group settled, a (holding %v) still claims %d keys of partitions given away (e.g. %s)", time.Since(settled).Round(time.Millisecond), held, n, what)
		}
		time.Sleep(50 * time.Millisecond)
	}

	// The new owners move on; a never answers for their partitions again.
	quit := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range 300 {
			k := verdict.Key(i, conformance.SeedKeys)
			if err := cl.ProduceSync(context.Background(), &kgo.Record{Topic: "in", Key: k, Value: []byte("v")}).FirstErr(); err != nil {
				t.Error(err)
				return
			}
		}
		time.Sleep(2 * time.Second)
		close(quit)
	}()
	for checks := 0; ; checks++ {
		select {
		case <-quit:
			<-done
			if checks == 0 {
				t.Fatal("no check ran while the new owners counted")
			}
			return
		default:
		}
		if n, what := claims(); n > 0 {
			t.Fatalf("while the new owners count, a claims %d keys of partitions given away (e.g. %s)", n, what)
		}
	}
}
