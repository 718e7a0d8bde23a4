package dedup_test

import (
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/eosflow/eosflow/dedup"
)

// Article's example: 10 million ids at 1% is about 12 MB in one filter;
// the store keeps two generations, each at 0.5%.
func ExampleBloomOptions_Params() {
	p, err := dedup.BloomOptions{Entries: 10_000_000, FalsePositiveRate: 0.01, Retention: time.Hour}.Params()
	if err != nil {
		panic(err)
	}
	fmt.Printf("m = %d bits, k = %d hashes, %.1f MB per generation, %.1f MB in Redis\n", p.Bits, p.Hashes, float64(p.Bytes)/1e6, float64(p.MemoryBytes())/1e6)
	// Output:
	// m = 110381864 bits, k = 8 hashes, 13.8 MB per generation, 27.6 MB in Redis
}

// TestSizeBloomTwoGenerationsStayWithinTheRate: each generation of a
// redisdedup.Bloom is sized for half the rate, so an id checked against two
// full generations is a false positive at most at the configured rate (by
// the textbook formula (1 - e^(-kn/m))^k), and one generation alone at
// about half of it.
func TestSizeBloomTwoGenerationsStayWithinTheRate(t *testing.T) {
	for _, fp := range []float64{0.1, 0.05, 0.01, 0.001, 1e-6} {
		for _, n := range []float64{1000, 50_000, 10e6} {
			g := dedup.SizeBloom(n, fp)
			one := dedup.FullRate(float64(g.Bits), g.Hashes, n)
			two := 1 - (1-one)*(1-one)
			if one > fp/2 || one < fp/4 || two > fp {
				t.Errorf("SizeBloom(%v, %v) = %d bits, %d hashes: one full generation %.3g, two %.3g; want at most %v and %v", n, fp, int64(g.Bits), g.Hashes, one, two, fp/2, fp)
			}
			if g.FalsePositiveRate != fp || float64(g.Bytes) != math.Ceil(float64(g.Bits)/8) || g.MemoryBytes() != 2*g.Bytes {
				t.Errorf("SizeBloom(%v, %v) = %+v", n, fp, g)
			}
		}
	}
	// The article's 10 million ids at 1%: 12 MB in one filter at 1%,
	// 13.8 MB per generation at 0.5%.
	if g := dedup.SizeBloom(10e6, 0.01); math.Round(float64(g.Bytes)/1e5) != 138 || g.Hashes != 8 {
		t.Errorf("SizeBloom(10M, 1%%) = %d bytes, %d hashes; want 13.8 MB, 8", g.Bytes, g.Hashes)
	}
}
