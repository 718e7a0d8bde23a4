package dedup_test

import (
	"testing"

	"github.com/eosflow/eosflow/dedup"
	"github.com/eosflow/eosflow/dedup/deduptest"
)

// TestLeaseConformance runs the Memory store through the promises
// mark-before relies on (dedup.Leaser): a claimed id is pending for its
// owner, never reported done, until Complete; another owner waits while
// the lease lives and takes it over once it expired; Release removes only
// its owner's pending mark; of concurrent claims exactly one wins.
func TestLeaseConformance(t *testing.T) {
	deduptest.RunLeaser(t, func(t *testing.T) dedup.Leaser { return openMemory(t) })
}
