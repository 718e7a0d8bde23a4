package eos

import (
	"context"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
)

// rewindSession is a session that only records rewinds; during one it can
// run a callback, as a rebalance landing mid-rewind would.
type rewindSession struct {
	session
	rewinds int
	gen     int32
	during  func()
}

func (s *rewindSession) generation() int32 { return s.gen }

func (s *rewindSession) rewind(map[string]map[int32]kgo.EpochOffset) {
	s.rewinds++
	if s.during != nil {
		s.during()
	}
}

// A cut-short batch rewinds its consumer only when no revoke or lost
// callback came since the last End began and the group generation has not
// moved since the batch began. franz-go's transact session
// sets its revoked flag in the first callback after an End, even an empty
// one (an eager member that held nothing), and swallows the later ones
// until the next End: a rewind after such a callback could land on a
// partition of the new assignment whose committed offset is still being
// fetched, and the abort would then skip the records below it.
func TestRewindOnlyWithoutARebalanceSinceTheLastEnd(t *testing.T) {
	r := upperRunner(t)
	rest := map[string]map[int32]kgo.EpochOffset{"in": {0: {Offset: 40}}}
	cut := func(s session) *batch {
		b := r.loop.newBatch(context.Background(), s)
		t.Cleanup(b.stop)
		b.rest = rest
		return b
	}

	// No callback since the last End: rewind, and the batch may commit.
	r.loop.revokesAtEnd = r.contexts.callbacks.Load()
	s := &rewindSession{}
	b := cut(s)
	b.rewindRest()
	if s.rewinds != 1 || b.doomed || b.rewindRaced {
		t.Fatalf("rewinds %d, doomed %v, raced %v: want one rewind of a batch that may commit", s.rewinds, b.doomed, b.rewindRaced)
	}

	// An empty revoke (nothing taken away) since the last End: the batch
	// is doomed and must not rewind.
	r.onRevoked(context.Background(), nil, map[string][]int32{})
	s = &rewindSession{}
	b = cut(s)
	b.rewindRest()
	if s.rewinds != 0 || !b.doomed || b.decide() {
		t.Fatalf("rewinds %d, doomed %v: a batch after a revoke callback must abort without rewinding", s.rewinds, b.doomed)
	}
	if got := b.abortReason(nil); got != abortRebalance {
		t.Fatalf("abort reason %v, want %v", got, abortRebalance)
	}

	// A rebalance that completed during the batch, seen in the group
	// generation though no callback came: doomed too.
	r.loop.revokesAtEnd = r.contexts.callbacks.Load()
	s = &rewindSession{gen: 7}
	b = cut(s)
	s.gen = 8
	b.rewindRest()
	if s.rewinds != 0 || !b.doomed {
		t.Fatalf("rewinds %d, doomed %v: a batch whose group generation moved must abort without rewinding", s.rewinds, b.doomed)
	}

	// A callback during the rewind: the client must be rebuilt.
	r.loop.revokesAtEnd = r.contexts.callbacks.Load()
	s = &rewindSession{during: func() { r.onRevoked(context.Background(), nil, map[string][]int32{"in": {0}}) }}
	b = cut(s)
	b.rewindRest()
	if s.rewinds != 1 || !b.rewindRaced {
		t.Fatalf("rewinds %d, raced %v: a revoke during the rewind must be caught", s.rewinds, b.rewindRaced)
	}
}
