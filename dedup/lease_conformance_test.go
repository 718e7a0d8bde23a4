package dedup_test

import (
	"testing"

	"github.com/eosflow/eosflow/dedup"
	"github.com/eosflow/eosflow/dedup/deduptest"
)

// TestLeaseConformance runs every store that holds leases (dedup.Leaser)
// through the promises mark-before relies on: a claimed id is pending for
// its owner, never reported done, until Complete; another owner waits
// while the lease lives and takes it over once it expired; Release removes
// only its owner's pending mark; of concurrent claims exactly one wins.
func TestLeaseConformance(t *testing.T) {
	for _, b := range backends(t) {
		t.Run(b.name, func(t *testing.T) {
			if b.skip != "" {
				t.Skip(b.skip)
			}
			if _, ok := b.Open(t).(dedup.Leaser); !ok {
				if b.name != "redis-bloom" {
					t.Fatalf("store %s holds no leases (dedup.Leaser)", b.name)
				}
				t.Skipf("store %s holds no leases; topology.Dedup's MarkBefore falls back to Mark and Forget with it", b.name)
			}
			deduptest.RunLeaser(t, func(t *testing.T) dedup.Leaser { return b.Open(t).(dedup.Leaser) })
		})
	}
}
