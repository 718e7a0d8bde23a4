package dedup

import (
	"fmt"
	"math"
	"time"
)

// BloomOptions size the filter of redisdedup.NewBloom. Every instance
// sharing a filter must use the same ones.
type BloomOptions struct {
	// Entries is how many ids are marked per Retention: each generation
	// is sized for that many. Count the ids marked in the busiest
	// Retention (rate × Retention); more than that and the false-positive
	// rate climbs fast (twice as many: about 12 times the rate at 1%).
	Entries int64
	// FalsePositiveRate is the chance that an id never marked is reported
	// as seen, such as 0.01. Each generation is sized for half of it, so an
	// id checked against two full generations stays within this rate.
	FalsePositiveRate float64
	// Retention is how long an id is remembered at least; it is forgotten
	// within twice that. Mark refuses a ttl longer than it.
	Retention time.Duration
}

// BloomParams describe a Redis Bloom filter (redisdedup.Bloom), so that its
// false-positive rate and its memory can be stated and checked.
type BloomParams struct {
	// Entries, FalsePositiveRate and Retention are the configured
	// BloomOptions.
	Entries           int64
	FalsePositiveRate float64
	Retention         time.Duration
	// Bits (m) and Hashes (k) are one generation's filter, sized for
	// Entries at FalsePositiveRate/2: an id sets or checks Hashes bits.
	Bits   uint64
	Hashes int
	// Bytes is one generation's bitmap, ⌈Bits/8⌉. Redis holds two
	// generations at most: see MemoryBytes.
	Bytes int64
}

// MemoryBytes is what the filter takes in Redis at most, two generations'
// bitmaps, for the maxmemory setting. Redis's allocator (jemalloc) rounds
// each bitmap up to its size class: up to a quarter more.
func (p BloomParams) MemoryBytes() int64 { return RedisBloomGenerations * p.Bytes }

// RedisBloomGenerations is how many filters a redisdedup.Bloom keeps in
// Redis at once: the current time slice's and the one before.
const RedisBloomGenerations = 2

// MaxRedisBloomBits is the largest generation one Redis string holds:
// SETBIT takes offsets below 2³² (a 512 MB string).
const MaxRedisBloomBits = 1 << 32

// SizeBloom sizes one generation of a redisdedup.Bloom for entries ids at
// false-positive rate fp, without the checks of BloomOptions.Params: for
// capacity planning, where a size beyond Redis's limit is an answer too.
// A generation is sized for half the rate, as an id is checked against
// two generations and each may say "seen" wrongly: 1 - (1 - fp/2)² < fp.
// m and k are the filter library's (bloom.EstimateParameters, computed
// here so that this package needs no library), the target lowered until a
// full generation's rate, (1 - e^(-kn/m))^k, is at most fp/2: the
// library's whole k costs a little over its formula's.
func SizeBloom(entries, fp float64) BloomParams {
	// Clamp before converting: a float64 beyond uint's range converts
	// to an undefined value, and no Redis string holds such a filter.
	n := uint(min(max(math.Ceil(entries), 1), 1<<52))
	var m, k uint
	// A few steps suffice; the bound stops a fp outside (0, 1), which
	// Params refuses first.
	target := fp / 2
	for range 1000 {
		m, k = estimateBloom(n, target)
		if FullRate(float64(m), int(k), float64(n)) <= fp/2 {
			break
		}
		target *= 0.995
	}
	return BloomParams{Entries: int64(n), FalsePositiveRate: fp, Bits: uint64(m), Hashes: int(k), Bytes: int64((m + 7) / 8)}
}

// estimateBloom is the filter library's bloom.EstimateParameters, which
// a test checks it against: the m bits and k hashes of a filter for n ids
// at false-positive rate p, by the textbook formulas.
func estimateBloom(n uint, p float64) (m, k uint) {
	m = uint(math.Ceil(-1 * float64(n) * math.Log(p) / math.Pow(math.Log(2), 2)))
	k = uint(math.Ceil(math.Log(2) * float64(m) / float64(n)))
	return m, k
}

// FullRate is the false-positive rate of a Bloom filter of m bits and k
// hashes holding n ids: (1 - e^(-kn/m))^k.
func FullRate(m float64, k int, n float64) float64 {
	return math.Pow(1-math.Exp(-float64(k)*n/m), float64(k))
}

// Params validates o and computes the filter it describes, without a
// server: for sizing a Redis before building the store.
func (o BloomOptions) Params() (BloomParams, error) {
	switch {
	case o.Entries <= 0:
		return BloomParams{}, fmt.Errorf("%w: bloom entries %d: give the ids marked per retention window (rate × retention), such as 10000000", ErrInvalid, o.Entries)
	case !(o.FalsePositiveRate > 0 && o.FalsePositiveRate < 1):
		return BloomParams{}, fmt.Errorf("%w: bloom false-positive rate %v: must be between 0 and 1, such as 0.01 (1 in 100 new ids reported as seen)", ErrInvalid, o.FalsePositiveRate)
	case o.Retention < MinTTL:
		return BloomParams{}, fmt.Errorf("%w: bloom retention %v: use at least %v; keep ids twice the longest redelivery window", ErrInvalid, o.Retention, MinTTL)
	}
	p := SizeBloom(float64(o.Entries), o.FalsePositiveRate)
	if p.Bits > MaxRedisBloomBits {
		return BloomParams{}, fmt.Errorf("%w: bloom filter of %d entries at false-positive rate %v needs %.0f MB per generation, beyond the 512 MB a Redis string holds: lower Entries (a shorter Retention) or raise FalsePositiveRate",
			ErrInvalid, o.Entries, o.FalsePositiveRate, math.Ceil(float64(p.Bytes)/1e6))
	}
	p.Entries, p.Retention = o.Entries, o.Retention
	return p, nil
}
