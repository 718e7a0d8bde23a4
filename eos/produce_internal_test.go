package eos

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Noting who wrote each acknowledged record allocates once a batch, for
// the first record, not once per record: at hundreds of thousands of
// records a second an allocation each is GC work the raw loop does not
// do. It still tells a batch written under one epoch from a mixed one.
func TestProduceErrsNoteWritersWithoutAllocating(t *testing.T) {
	var p produceErrs
	first := &kgo.Record{ProducerID: 7, ProducerEpoch: 1}
	p.record(first, nil)
	same := &kgo.Record{ProducerID: 7, ProducerEpoch: 1}
	if allocs := testing.AllocsPerRun(1000, func() { p.record(same, nil) }); allocs != 0 {
		t.Errorf("%.1f allocations per acknowledged record, want 0", allocs)
	}
	if p.mixed.Load() {
		t.Fatal("one producer epoch taken for a mixed batch")
	}
	p.record(&kgo.Record{ProducerID: 7, ProducerEpoch: 2}, nil)
	if !p.mixed.Load() {
		t.Fatal("a record of another epoch went unnoticed")
	}
	p.reset()
	if p.written.Load() != nil || p.mixed.Load() {
		t.Fatal("reset kept the last batch's writers")
	}
}
