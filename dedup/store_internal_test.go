package dedup

import (
	"testing"

	"github.com/eosflow/eosflow/dedup/internal/check"
)

// The stores refuse ttls with the checks of package check: its bound must
// be the one MinTTL documents.
func TestMinTTLIsTheChecks(t *testing.T) {
	if MinTTL != check.MinTTL {
		t.Fatalf("MinTTL %v, but the stores check against %v", MinTTL, check.MinTTL)
	}
}
