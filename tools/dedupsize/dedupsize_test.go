package dedupsize

import (
	"fmt"
	"math"
	"testing"
	"time"
)

// TestArticleExample checks the worked example of the design article:
// 10,000 msg/s for 7 days with 36-byte ids and 1.5 overhead ≈ 327 GB, one
// hour in a Redis sorted set ≈ 2.9 GB, and 10 million ids in a 1 % Bloom
// filter ≈ 12 MB (decimal units, as the article uses).
func TestArticleExample(t *testing.T) {
	e, err := Compute(Params{Rate: 10000, Window: 7 * 24 * time.Hour, IDBytes: 36, Overhead: 1.5, SortedSetWindow: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if want := 10000.0 * 604800 * 36 * 1.5; e.Exact.Bytes != want {
		t.Errorf("exact bytes = %v, want %v", e.Exact.Bytes, want)
	}
	if got := HumanBytes(e.Exact.Bytes); got != "327 GB" {
		t.Errorf("exact = %s, want 327 GB", got)
	}
	if e.SortedSet.Entries != 36e6 {
		t.Errorf("sorted set entries = %v, want 36 million", e.SortedSet.Entries)
	}
	if e.SortedSet.BytesPerEntry != 80 {
		t.Errorf("sorted set bytes per entry = %v, want the article's ~80", e.SortedSet.BytesPerEntry)
	}
	if got := HumanBytes(e.SortedSet.Bytes); got != "2.88 GB" {
		t.Errorf("sorted set = %s, want 2.88 GB (≈ 2.9 GB)", got)
	}
	b := BloomFilter(10e6, 0.01)
	if got := HumanBytes(b.Bytes); got != "12.0 MB" {
		t.Errorf("bloom = %s, want 12.0 MB", got)
	}
	if b.Hashes != 7 {
		t.Errorf("bloom hashes = %d, want 7", b.Hashes)
	}
}

func TestComputeDefaultsAndErrors(t *testing.T) {
	e, err := Compute(Params{Rate: 100, Window: time.Minute, IDBytes: 16})
	if err != nil {
		t.Fatal(err)
	}
	if e.Exact.Overhead != DefaultOverhead || e.Bloom.FalsePositiveRate != DefaultFalsePositiveRate {
		t.Errorf("defaults not applied: %+v", e)
	}
	if e.SortedSet.Entries != e.Exact.Entries {
		t.Errorf("sorted set window should default to the window: %v vs %v", e.SortedSet.Entries, e.Exact.Entries)
	}
	for _, p := range []Params{
		{Rate: 0, Window: time.Minute, IDBytes: 16},
		{Rate: math.NaN(), Window: time.Minute, IDBytes: 16},
		{Rate: 1, Window: 0, IDBytes: 16},
		{Rate: 1, Window: time.Minute, IDBytes: 0},
		{Rate: 1, Window: time.Minute, IDBytes: 16, Overhead: 0.5},
		{Rate: 1, Window: time.Minute, IDBytes: 16, FalsePositiveRate: 1.5},
	} {
		if _, err := Compute(p); err == nil {
			t.Errorf("Compute(%+v) = nil error, want one", p)
		}
	}
}

func TestHumanBytes(t *testing.T) {
	for _, tc := range []struct {
		in   float64
		want string
	}{
		{0, "0 B"}, {999, "999 B"}, {1000, "1.00 kB"}, {12345, "12.3 kB"}, {326.592e9, "327 GB"}, {2.5e15, "2.50 PB"},
	} {
		t.Run(fmt.Sprint(tc.in), func(t *testing.T) {
			if got := HumanBytes(tc.in); got != tc.want {
				t.Errorf("HumanBytes(%v) = %q, want %q", tc.in, got, tc.want)
			}
		})
	}
}

func ExampleCompute() {
	e, _ := Compute(Params{Rate: 10000, Window: 7 * 24 * time.Hour, IDBytes: 36, Overhead: 1.5, SortedSetWindow: time.Hour})
	fmt.Println(HumanBytes(e.Exact.Bytes), HumanBytes(e.SortedSet.Bytes))
	// Output: 327 GB 2.88 GB
}

// TestHugeIDBytesNeverWrapNegative: an id size near MaxInt plus a store's
// per-entry overhead overflowed an int and gave a negative size.
func TestHugeIDBytesNeverWrapNegative(t *testing.T) {
	e, err := Compute(Params{Rate: 1, Window: time.Second, IDBytes: math.MaxInt})
	if err != nil {
		t.Fatal(err)
	}
	if e.SortedSet.BytesPerEntry <= 0 || e.SortedSet.Bytes <= 0 {
		t.Errorf("sorted set of MaxInt-byte ids: %+v, want positive sizes", e.SortedSet)
	}
	for _, kind := range []string{"redis", "redis-sorted-set", "postgres"} {
		s, err := ForStore(kind, 1, math.MaxInt)
		if err != nil {
			t.Fatal(err)
		}
		if s.BytesPerEntry <= 0 || s.Bytes <= 0 {
			t.Errorf("%s with MaxInt-byte ids: %+v, want positive sizes", kind, s)
		}
	}
}
