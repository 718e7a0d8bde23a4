package demo

import (
	"context"
	"testing"
	"time"

	"github.com/eosflow/eosflow/config"
)

func TestDemoIsExactlyOnceUnderFailures(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	res, err := Run(ctx, Options{Records: 8000, Restarts: 2})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Pass || res.Missing != 0 || res.Duplicates != 0 {
		t.Fatalf("demo verdict failed: %+v", res)
	}
	// The failures really happened, or the verdict proves nothing.
	if res.AbortedTransactions == 0 || res.InjectedErrors == 0 || res.BrokerFaults == 0 || res.Restarts < 2 {
		t.Fatalf("failures were not injected: %+v", res)
	}
	if res.DeadLettered != 20 || res.RecordsOut != 8000-20 {
		t.Fatalf("want 20 dead letters and 7980 outputs, got %d and %d", res.DeadLettered, res.RecordsOut)
	}
}

// At-most-once commits offsets before processing, so a pipeline stopped by
// an injected error loses the rest of its batch: the verdict must see that.
func TestDemoCatchesLossUnderAtMostOnce(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	res, err := Run(ctx, Options{Records: 8000, Restarts: 1, Guarantee: config.AtMostOnce})
	if err != nil {
		t.Fatal(err)
	}
	if res.Pass || res.Missing == 0 {
		t.Fatalf("at-most-once with injected errors should lose records: %+v", res)
	}
}
