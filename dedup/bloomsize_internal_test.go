package dedup

import (
	"testing"

	"github.com/bits-and-blooms/bloom/v3"
)

// estimateBloom must size filters as the library redisdedup.Bloom hashes
// with does, or the sizes SizeBloom reports would drift from it.
func TestEstimateBloomIsTheLibrarys(t *testing.T) {
	for _, n := range []uint{1, 7, 1000, 50_000, 10_000_000, 380_000_000} {
		for _, p := range []float64{0.5, 0.1, 0.01, 0.005, 0.001, 1e-6, 1e-9} {
			m, k := estimateBloom(n, p)
			wm, wk := bloom.EstimateParameters(n, p)
			if m != wm || k != wk {
				t.Errorf("estimateBloom(%d, %g) = %d, %d; the library says %d, %d", n, p, m, k, wm, wk)
			}
		}
	}
}
