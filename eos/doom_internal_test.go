package eos

import (
	"context"
	"errors"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
)

// A failure while no transaction is open dooms the next one, until a
// join check has looked since; a failure during one dooms it at once;
// a seed broker's failure, or a connection the client retired itself,
// dooms nothing.
func TestDoomCountsFailuresSinceTheLastLook(t *testing.T) {
	g := &joinGuard{}
	g.doom.start()
	if g.isDoomed() {
		t.Fatal("a transaction without a failure is doomed")
	}
	g.arm(kgo.BrokerMetadata{NodeID: -2147483648})
	if g.isDoomed() || g.suspected() {
		t.Fatal("a seed broker's failed dial doomed the transaction")
	}
	// The client retiring its own connection sent nothing: look, but
	// doom nothing.
	retired := errors.New("the broker connection has died and the request will be retried on a new connection")
	g.OnBrokerE2E(kgo.BrokerMetadata{NodeID: 1}, 0, kgo.BrokerE2E{BytesWritten: 43, WriteErr: retired})
	if g.isDoomed() || !g.suspected() {
		t.Fatalf("a retired connection: doomed %v, suspected %v; want false, true", g.isDoomed(), g.suspected())
	}
	g.suspect.Store(false)
	g.arm(kgo.BrokerMetadata{NodeID: 1})
	if !g.isDoomed() || !g.suspected() {
		t.Fatal("a failure during the transaction did not doom it")
	}
	if abandoned := g.doom.settled(context.Background()); abandoned {
		t.Fatal("a doomed transaction without a client abandoned records")
	}
	g.doom.finish()
	g.doom.start()
	if !g.isDoomed() {
		t.Fatal("a transaction begun before any look since a failure is not doomed")
	}
	g.doom.finish()
	g.doom.checked.Store(g.doom.failures.Load()) // as checkJoined does when it looks
	g.doom.start()
	if g.isDoomed() {
		t.Fatal("a transaction begun after a look is doomed")
	}
	g.arm(kgo.BrokerMetadata{NodeID: 1})
	g.doom.finish()
	g.arm(kgo.BrokerMetadata{NodeID: 1})
	if g.doom.open.Load() {
		t.Fatal("finish left the transaction open")
	}
}

// A doomed batch's records fail with kgo.ErrAborting; a real failure of
// another record (a fence) must not hide behind that first error, or the
// batch would only be redone where it must stop.
func TestARealProduceFailureIsNotHiddenByTheDoomsDrops(t *testing.T) {
	var p produceErrs
	fenced := errors.New("INVALID_PRODUCER_EPOCH")
	for _, err := range []error{kgo.ErrAborting, fenced, kgo.ErrAborting} {
		p.pending.Add(1)
		p.record(&kgo.Record{Topic: "out"}, err)
	}
	if err := p.take(); !errors.Is(err, fenced) {
		t.Fatalf("take() = %v, want the fence", err)
	}
}
