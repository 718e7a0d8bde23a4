package eos_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
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
// transact session swallows on an idle instance: from the moment its
// client is at the generation that settles the move, a quarter second
// for the watch plus one description of the group (on the embedded
// broker, at once), with room for a loaded machine.
const swallowedBound = 2 * time.Second

// TestQueriesStopAfterSwallowedRevoke: franz-go's transact session passes
// on only the first revoke after an End, so an idle instance that a second
// rebalance takes partitions from gets no callback. Within the bound the
// docs give, counted from when its client reached the generation at which
// the group settled, it stops claiming and serving them (Locate not
// owned, Get ErrNotOwner), and from then on, while the new owners count
// on, it never answers a value for them.
func TestQueriesStopAfterSwallowedRevoke(t *testing.T) {
	for _, gp := range []config.GroupProtocol{config.GroupProtocolClassic, config.GroupProtocolConsumer} {
		t.Run(string(gp), func(t *testing.T) { swallowedRevoke(t, gp) })
	}
}

// swallowed is the scene: a, idle, lost partitions to c with its revoke
// swallowed; held are those the group left it.
type swallowed struct {
	env  *kafkatest.Env
	a    *conformance.Run
	q    *eos.StoreQuery
	held []int32
	// settledAt is when a's client reached the generation (or member
	// epoch) it was at once the group settled on a, b and c.
	settledAt time.Time
}

func swallowedRevoke(t *testing.T, gp config.GroupProtocol) {
	s := newSwallowed(t, gp)
	for {
		n, what := s.claims(t)
		since := time.Since(s.settledAt).Round(time.Millisecond)
		if n == 0 {
			// The group may settle (another member's heartbeat) after a
			// has stopped: then this is when the check began.
			t.Logf("a claimed nothing %s after its client reached the settled generation", since)
			break
		}
		if since > swallowedBound {
			t.Fatalf("%s after its client reached the settled generation, a (holding %v) still claims %d keys of partitions given away (e.g. %s)", since, s.held, n, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
	s.neverAgain(t)
}

// newSwallowed runs a until idle, then b, then c two seconds later, so
// that a's second revoke comes with no End since its first.
func newSwallowed(t *testing.T, gp config.GroupProtocol) *swallowed {
	env := kafkatest.Fake(t)
	env.CreateTopics(t, 6, "in", "out")
	const n = 600
	conformance.SeedRange(t, env, "in", 0, n)
	cfg := env.Config("app", "a", config.ExactlyOnce)
	cfg.GroupProtocol = gp
	top := func() *topology.Topology { return conformance.CountTopology("in", "out", state.Memory()) }
	s := &swallowed{env: env, a: conformance.Start(t, cfg, top())}
	s.a.WaitCommitted(t, n, 60*time.Second)
	bcfg := cfg
	bcfg.InstanceID = "b"
	conformance.Start(t, bcfg, top())
	conformance.WaitAssigned(t, env, "app", "b")
	time.Sleep(2 * time.Second) // a stays idle: no End after the first revoke
	gens := watchGenerations(t, s.a.R)
	ccfg := cfg
	ccfg.InstanceID = "c"
	conformance.Start(t, ccfg, top())
	cl := env.Client(t)
	conformance.Until(t, 30*time.Second, "the group stable with a, b and c", func() bool {
		g, err := kafkautil.DescribeGroup(context.Background(), cl, "app")
		ma, ok := g.Member("a")
		s.held = ma.Assigned["in"]
		return err == nil && ok && g.State == "Stable" && len(g.Members) == 3
	})
	s.settledAt = gens(eos.GroupGenerationForTest(s.a.R))
	s.q, _ = s.a.R.Query("counts")
	return s
}

// watchGenerations notes when r's client reaches each generation, polled
// every 2ms until t ends; reached returns when it first was at gen,
// waiting for the watch to see it: the group can be Stable a moment
// before a member's client takes its generation from the sync.
func watchGenerations(t *testing.T, r *eos.Runner) (reached func(gen int32) time.Time) {
	var mu sync.Mutex
	at := map[int32]time.Time{}
	quit, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		for {
			gen, now := eos.GroupGenerationForTest(r), time.Now()
			mu.Lock()
			if _, seen := at[gen]; !seen {
				at[gen] = now
			}
			mu.Unlock()
			select {
			case <-quit:
				return
			case <-time.After(2 * time.Millisecond):
			}
		}
	}()
	t.Cleanup(func() { close(quit); <-done })
	return func(gen int32) time.Time {
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
			mu.Lock()
			when, ok := at[gen]
			mu.Unlock()
			switch {
			case ok:
				return when
			case time.Now().After(deadline):
				t.Fatalf("a's client was never seen at generation %d", gen)
			}
		}
	}
}

// claims counts the keys of partitions the group gave away that a says
// it owns or answers other than with ErrNotOwner.
func (s *swallowed) claims(t *testing.T) (n int, what string) {
	for i := range conformance.SeedKeys {
		k := verdict.Key(i, conformance.SeedKeys)
		loc, err := s.q.Locate(context.Background(), k)
		if err != nil {
			t.Fatal(err)
		}
		if slices.Contains(s.held, loc.Partition) {
			continue
		}
		v, found, err := eos.GetAs(context.Background(), s.q, k, codec.Int64())
		if loc.Owned || !errors.Is(err, eos.ErrNotOwner) {
			n++
			what = fmt.Sprintf("%s: owned %v, Get %d found %v err %v", k, loc.Owned, v, found, err)
		}
	}
	return n, what
}

// neverAgain checks that a never answers for the partitions given away
// while their new owners count on.
func (s *swallowed) neverAgain(t *testing.T) {
	cl := s.env.Client(t)
	quit, done := make(chan struct{}), make(chan struct{})
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
		if n, what := s.claims(t); n > 0 {
			t.Fatalf("while the new owners count, a claims %d keys of partitions given away (e.g. %s)", n, what)
		}
	}
}
