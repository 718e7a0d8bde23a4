// Package dedupsize estimates the storage a message-id dedup store needs, for
// the exact store and for two cheaper alternatives, so an operator can choose
// a retention window before the store runs out of memory. The formulas and
// the worked example come from the project's design article: memory = message
// rate × retention window × id size × overhead factor.
package dedupsize

import (
	"errors"
	"fmt"
	"math"
	"time"
)

// Defaults used when a Params field is zero.
const (
	// DefaultOverhead is the hash-table overhead factor of the exact store.
	DefaultOverhead = 1.5
	// DefaultFalsePositiveRate is the Bloom filter's false-positive rate.
	DefaultFalsePositiveRate = 0.01
)

// SortedSetEntryOverhead is what a Redis sorted set (ZADD id with a
// timestamp score, trimmed by ZREMRANGEBYSCORE) costs per entry beyond the id
// itself: the 8-byte score, the skiplist node and its dict entry. 44 bytes
// reproduces the article's figure of ~80 bytes per 36-byte UUID entry
// (36 million entries ≈ 2.9 GB for one hour at 10,000 msg/s).
const SortedSetEntryOverhead = 44

// Params are the inputs of an estimate.
type Params struct {
	// Rate is the number of messages per second the store sees.
	Rate float64
	// Window is how long an id must be remembered; the article advises
	// twice the longest redelivery window.
	Window time.Duration
	// IDBytes is the size of one message id, e.g. 36 for a UUID string.
	IDBytes int
	// Overhead multiplies the raw id bytes of the exact store, overriding
	// DefaultOverhead when non-zero.
	Overhead float64
	// FalsePositiveRate is the Bloom filter's target, overriding
	// DefaultFalsePositiveRate when non-zero.
	FalsePositiveRate float64
	// SortedSetWindow is the retention of the sorted-set alternative,
	// overriding Window when non-zero: a sorted set is usually kept shorter.
	SortedSetWindow time.Duration
}

// Exact is the size of a hash set holding every id of the window.
type Exact struct {
	Entries  float64 `json:"entries"`
	Bytes    float64 `json:"bytes"`
	Overhead float64 `json:"overhead"`
}

// SortedSet is the size of a Redis sorted set with TTL-style cleanup.
type SortedSet struct {
	Window        time.Duration `json:"-"`
	WindowSeconds float64       `json:"window_seconds"`
	Entries       float64       `json:"entries"`
	BytesPerEntry float64       `json:"bytes_per_entry"`
	Bytes         float64       `json:"bytes"`
}

// Bloom is the size of a Bloom filter over the window's ids. It never
// misses a duplicate, but a false positive reports a new id as seen, and a
// dedup step then drops that message.
type Bloom struct {
	Entries           float64 `json:"entries"`
	FalsePositiveRate float64 `json:"false_positive_rate"`
	Bits              float64 `json:"bits"`
	Bytes             float64 `json:"bytes"`
	Hashes            int     `json:"hashes"`
}

// Estimate holds the three alternatives for one set of Params.
type Estimate struct {
	Exact     Exact     `json:"exact"`
	SortedSet SortedSet `json:"sorted_set"`
	Bloom     Bloom     `json:"bloom"`
}

// Compute validates p, fills its defaults and returns the estimate.
func Compute(p Params) (Estimate, error) {
	if p.Overhead == 0 {
		p.Overhead = DefaultOverhead
	}
	if p.FalsePositiveRate == 0 {
		p.FalsePositiveRate = DefaultFalsePositiveRate
	}
	if p.SortedSetWindow == 0 {
		p.SortedSetWindow = p.Window
	}
	var errs []error
	if !(p.Rate > 0) || math.IsInf(p.Rate, 0) {
		errs = append(errs, fmt.Errorf("rate %v: must be a positive number of messages per second", p.Rate))
	}
	if p.Window <= 0 {
		errs = append(errs, fmt.Errorf("window %s: must be positive", p.Window))
	}
	if p.IDBytes <= 0 {
		errs = append(errs, fmt.Errorf("id bytes %d: must be positive", p.IDBytes))
	}
	if !(p.Overhead >= 1) || math.IsInf(p.Overhead, 0) { // NaN fails >= too
		errs = append(errs, fmt.Errorf("overhead %v: must be at least 1 (1 means no overhead)", p.Overhead))
	}
	if !(p.FalsePositiveRate > 0 && p.FalsePositiveRate < 1) {
		errs = append(errs, fmt.Errorf("false-positive rate %v: must be between 0 and 1, e.g. 0.01", p.FalsePositiveRate))
	}
	if p.SortedSetWindow < 0 {
		errs = append(errs, fmt.Errorf("sorted-set window %s: must be positive", p.SortedSetWindow))
	}
	if len(errs) > 0 {
		return Estimate{}, errors.Join(errs...)
	}

	n := p.Rate * p.Window.Seconds()
	var e Estimate
	e.Exact = Exact{Entries: n, Overhead: p.Overhead, Bytes: n * float64(p.IDBytes) * p.Overhead}

	zn := p.Rate * p.SortedSetWindow.Seconds()
	per := float64(p.IDBytes) + SortedSetEntryOverhead // in float: an int sum wraps near MaxInt
	e.SortedSet = SortedSet{
		Window:        p.SortedSetWindow,
		WindowSeconds: p.SortedSetWindow.Seconds(),
		Entries:       zn,
		BytesPerEntry: per,
		Bytes:         zn * per,
	}

	e.Bloom = BloomFilter(n, p.FalsePositiveRate)
	for _, v := range []float64{e.Exact.Bytes, e.SortedSet.Bytes, e.Bloom.Bits, e.Bloom.Bytes} {
		if math.IsInf(v, 0) || math.IsNaN(v) {
			return Estimate{}, fmt.Errorf("rate %v × window %s × %d id bytes × overhead %v: the sizes overflow a float64; use realistic values", p.Rate, p.Window, p.IDBytes, p.Overhead)
		}
	}
	return e, nil
}

// BloomFilter sizes an optimal Bloom filter for n entries at false-positive
// rate fp: m = -n ln(fp) / (ln 2)² bits and k = (m/n) ln 2 hash functions.
func BloomFilter(n, fp float64) Bloom {
	m := math.Ceil(-n * math.Log(fp) / (math.Ln2 * math.Ln2))
	k := 1
	if n > 0 {
		k = max(1, int(math.Round(m/n*math.Ln2)))
	}
	return Bloom{Entries: n, FalsePositiveRate: fp, Bits: m, Bytes: math.Ceil(m / 8), Hashes: k}
}

// HumanBytes prints a byte count in decimal units (kB, MB, GB, TB) with
// three significant digits, the units the article uses.
func HumanBytes(b float64) string {
	units := []string{"B", "kB", "MB", "GB", "TB", "PB", "EB"}
	i := 0
	for b >= 999.5 && i < len(units)-1 {
		b /= 1000
		i++
	}
	switch {
	case i == 0:
		return fmt.Sprintf("%.0f %s", b, units[i])
	case b >= 99.5:
		return fmt.Sprintf("%.0f %s", b, units[i])
	case b >= 9.95:
		return fmt.Sprintf("%.1f %s", b, units[i])
	default:
		return fmt.Sprintf("%.2f %s", b, units[i])
	}
}

// Measured per-entry costs of eosflow's dedup stores beyond the id's own
// bytes, on Redis 7.0 (jemalloc) and PostgreSQL 15 with 36-byte UUID ids;
// TestStoreSizesMatchServers in redisdedup and pgdedup measures them again against
// the real servers and fails when an estimate is off by more than 25%.
const (
	// RedisKeyOverhead is a redisdedup.New entry (SET prefix+id 1 NX PX):
	// the key's dict entry, its string header, the shared value and the
	// expires entry. The key prefix counts as id bytes.
	RedisKeyOverhead = 104
	// RedisSortedSetMemberOverhead is a redisdedup.NewSortedSet member:
	// the score, the skiplist node and the dict entry. The article's
	// figure (SortedSetEntryOverhead, 44) is about half of what Redis 7
	// takes. Both Redis figures move by about 10% with where the
	// hash tables are in their doubling.
	RedisSortedSetMemberOverhead = 96
	// PostgresRowOverhead is a pgdedup.New row with its primary-key
	// index entry: tuple header, item pointer, expires_at and page slack.
	PostgresRowOverhead = 143
)

// StoreSize is what one of eosflow's dedup stores needs for a window.
type StoreSize struct {
	Store         string  `json:"store"`
	Entries       float64 `json:"entries"`
	BytesPerEntry float64 `json:"bytes_per_entry"`
	Bytes         float64 `json:"bytes"`
}

// ForStore sizes the store kind ("redis", "redis-sorted-set" or
// "postgres") for entries ids of idBytes bytes each (with any key
// prefix), using the measured overheads.
func ForStore(kind string, entries float64, idBytes int) (StoreSize, error) {
	var over int
	switch kind {
	case "redis":
		over = RedisKeyOverhead
	case "redis-sorted-set":
		over = RedisSortedSetMemberOverhead
	case "postgres":
		over = PostgresRowOverhead
	default:
		return StoreSize{}, fmt.Errorf("store %q: want redis, redis-sorted-set, postgres or bloom", kind)
	}
	per := float64(idBytes) + float64(over) // in float: an int sum wraps near MaxInt
	return StoreSize{Store: kind, Entries: entries, BytesPerEntry: per, Bytes: entries * per}, nil
}
