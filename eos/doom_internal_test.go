package eos

import (
	"context"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
)

// A failure while no transaction is open dooms the next one, until a
// join check has looked since; a failure during one dooms it at once;
// a seed broker's failure dooms nothing.
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
