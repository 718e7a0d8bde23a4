package eos

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// The hook follows records only while the pipeline fails, and forgets
// those it followed whenever their promises run, on or off.
func TestUnackedOutputsFollowOnlyWhileFailing(t *testing.T) {
	var on atomic.Bool
	u := newUnackedOutputs(&on)
	a, b, c := &kgo.Record{Topic: "out", Partition: 1}, &kgo.Record{Topic: "out", Partition: 1}, &kgo.Record{Topic: "dlq", Partition: 0}
	u.OnProduceRecordPartitioned(a, 0)
	if len(u.held()) != 0 {
		t.Fatalf("followed a record while healthy: %v", u.held())
	}
	on.Store(true)
	for _, r := range []*kgo.Record{a, b, c} {
		u.OnProduceRecordPartitioned(r, 0)
	}
	if h := u.held(); h[topicPartition{"out", 1}] != 2 || h[topicPartition{"dlq", 0}] != 1 || len(h) != 2 {
		t.Fatalf("held %v, want out/1: 2, dlq/0: 1", h)
	}
	u.OnProduceRecordUnbuffered(a, nil)
	on.Store(false)
	u.OnProduceRecordUnbuffered(c, nil)
	if h := u.held(); len(h) != 1 || h[topicPartition{"out", 1}] != 1 || u.n.Load() != 1 {
		t.Fatalf("held %v (n %d), want out/1: 1", h, u.n.Load())
	}
	u.OnProduceRecordUnbuffered(b, nil)
	if u.n.Load() != 0 || len(u.at) != 0 {
		t.Fatalf("%d records still followed", len(u.at))
	}
}

// A flush error other than its deadline, or with nothing held, is kept as
// it is.
func TestUnackedAfterOnlyExplainsADeadline(t *testing.T) {
	var on atomic.Bool
	on.Store(true)
	u := newUnackedOutputs(&on)
	other := errors.New("closed")
	if err := unackedAfter(other, u, nil, 0); err != other {
		t.Fatalf("got %v", err)
	}
	if err := unackedAfter(context.DeadlineExceeded, u, nil, 0); err != context.DeadlineExceeded {
		t.Fatalf("nothing held: got %v", err)
	}
}

// A record the producer gives up on with its partition's error names the
// partition; one refused for itself does not.
func TestProduceErrorNamesThePartition(t *testing.T) {
	var p produceErrs
	p.sent()
	p.record(&kgo.Record{Topic: "out", Partition: 4}, kerr.NotLeaderForPartition)
	err := p.take()
	if !errors.Is(err, kerr.NotLeaderForPartition) || !strings.Contains(err.Error(), "writing to out/4: ") ||
		!strings.Contains(err.Error(), "eosctl topic describe out") {
		t.Fatalf("got %v", err)
	}
	p.sent()
	p.record(&kgo.Record{Topic: "out", Partition: 4}, kerr.MessageTooLarge)
	if err := p.take(); strings.Contains(err.Error(), "out/4") {
		t.Fatalf("a rejected record's error names its partition: %v", err)
	}
}
