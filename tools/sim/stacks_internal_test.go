package sim

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"
)

func parkedInside(parked, stop chan struct{})  { close(parked); <-stop }
func parkedOutside(parked, stop chan struct{}) { close(parked); <-stop }

// A run's stack dump holds the goroutines the run started, however deep,
// and none of another run's.
func TestAStackDumpHoldsOnlyTheRunsGoroutines(t *testing.T) {
	stop := make(chan struct{})
	defer close(stop)
	outside := make(chan struct{})
	go parkedOutside(outside, stop)
	<-outside
	var path string
	labelled(context.Background(), func(_ context.Context, label string) {
		parked := make(chan struct{})
		go func() { go parkedInside(parked, stop) }() // a goroutine of a goroutine of the run
		<-parked
		var err error
		if path, err = dumpStacks(label, Schedule{Seed: 7, Pipeline: Stateless}); err != nil {
			t.Fatal(err)
		}
	})
	defer os.Remove(path)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	dump := string(b)
	if !strings.Contains(dump, "parkedInside") || strings.Contains(dump, "parkedOutside") || !strings.HasPrefix(dump, "seed 7 upper") {
		t.Fatalf("the dump at %s:\n%s", path, dump)
	}
}

// A run that fails its bound dumps its stacks before its members close:
// the dump holds the runtime's goroutines caught at work, not closing.
func TestAHangingRunDumpsTheRuntimeAtWork(t *testing.T) {
	r := Run(context.Background(), Schedule{Seed: 7, Pipeline: Stateless}, Config{Bound: 300 * time.Millisecond})
	_, path, ok := strings.Cut(r.Failure, "the run's goroutines: ")
	if r.Kind != KindLiveness || !ok {
		t.Fatalf("want a liveness failure naming a stack dump; got %s: %s", r.Kind, r.Failure)
	}
	path = strings.TrimSuffix(path, ")")
	defer os.Remove(path)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), "eosflow/eos.(*streamLoop).consume") {
		t.Fatalf("the dump at %s holds no runtime at work (its consume loop):\n%s", path, b)
	}
}
