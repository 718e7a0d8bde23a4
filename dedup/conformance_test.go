package dedup_test

import (
	"testing"

	"github.com/eosflow/eosflow/dedup"
	"github.com/eosflow/eosflow/dedup/deduptest"
)

// openMemory opens an empty Memory store for the running test.
func openMemory(t *testing.T) *dedup.Memory {
	m, err := dedup.NewMemory()
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestConformance runs the Memory store through the promises of every
// store: the first mark wins, exactly one of concurrent marks wins, an
// expired or forgotten id is new again, bad arguments are refused. The
// stores on servers run the same suite in redisdedup and pgdedup.
func TestConformance(t *testing.T) {
	deduptest.Run(t, deduptest.Backend{Open: func(t *testing.T) dedup.Store { return openMemory(t) }})
}
