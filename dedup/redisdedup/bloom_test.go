package redisdedup_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"

	"github.com/eosflow/eosflow/dedup"
	"github.com/eosflow/eosflow/dedup/redisdedup"
	"github.com/eosflow/eosflow/tools/servertest"
)

// bloomFixture is a Bloom of its own on the test's Redis, with a
// plain client to look at its keys.
type bloomFixture struct {
	store  *redisdedup.Bloom
	client *redis.Client
	keys   string // the generations' key prefix
}

func newBloomFixture(t *testing.T, o dedup.BloomOptions) *bloomFixture {
	t.Helper()
	url := servertest.RedisURL(t)
	const prefix = "eosflow:dedup-test:"
	name := fmt.Sprintf("%s:%d", t.Name(), time.Now().UnixNano())
	b, err := redisdedup.NewBloom(url, name, o, redisdedup.Prefix(prefix))
	if err != nil {
		t.Fatal(err)
	}
	opt, err := redis.ParseURL(url)
	if err != nil {
		t.Fatal(err)
	}
	f := &bloomFixture{store: b, client: redis.NewClient(opt), keys: prefix + name + ":"}
	t.Cleanup(func() {
		b.Close()
		dropRedisPrefix(t, f.client, f.keys)
		f.client.Close()
	})
	if err := b.Ping(t.Context()); err != nil {
		t.Fatalf("EOS_REDIS_URL=%s: %v", url, err)
	}
	return f
}

// generations lists the filter's generation keys in Redis.
func (f *bloomFixture) generations(t *testing.T) []string {
	t.Helper()
	keys, err := f.client.Keys(t.Context(), f.keys+"*").Result()
	if err != nil {
		t.Fatal(err)
	}
	return keys
}

// each calls fn for every id from 16 goroutines, each call a real script
// run, and counts the calls that returned true.
func each(t *testing.T, ids []string, fn func(context.Context, string) (bool, error)) int {
	t.Helper()
	var next, hits atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for range 16 {
		wg.Go(func() {
			for {
				i := next.Add(1) - 1
				if i >= int64(len(ids)) {
					return
				}
				ok, err := fn(t.Context(), ids[i])
				if err != nil {
					errs <- err
					return
				}
				if ok {
					hits.Add(1)
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	return int(hits.Load())
}

func freshIDs(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = uuid.NewString()
	}
	return out
}

// expectedRate is the textbook false-positive rate of the filter holding
// n ids.
func expectedRate(p dedup.BloomParams, n int) float64 {
	return dedup.FullRate(float64(p.Bits), p.Hashes, float64(n))
}

// TestBloomFalsePositiveRateMatchesConfigured fills a filter with as many
// ids as it was sized for and probes it with as many it never saw: the share
// reported as seen must be at most the configured rate, and well under it as
// one generation holds them all (each is sized for half the rate, so checking
// two stays under it), and at least a tenth of it (the filter is not
// oversized, and really holds the ids). Filled with twice as many ids, the
// rate must exceed the configured one: Entries must count the ids per
// retention.
func TestBloomFalsePositiveRateMatchesConfigured(t *testing.T) {
	const n, probes, overProbes, rate = 25_000, 25_000, 10_000, 0.01
	// A retention of 1000 hours keeps every mark in one generation, unless
	// the test runs across a boundary of them; then it is run again.
	for attempt := 1; ; attempt++ {
		f := newBloomFixture(t, dedup.BloomOptions{Entries: n, FalsePositiveRate: rate, Retention: 1000 * time.Hour})
		p := f.store.Params()
		begin := time.Now()
		mark := func(ctx context.Context, id string) (bool, error) { return f.store.Mark(ctx, id, time.Hour) }
		if firsts := each(t, freshIDs(n), mark); firsts < n*(1-rate) {
			t.Fatalf("%d of %d distinct new ids were marked first; filling the filter should see a few false positives at most", firsts, n)
		}
		full := float64(each(t, freshIDs(probes), f.store.Seen)) / probes
		if firsts := each(t, freshIDs(n), mark); firsts < n*(1-20*rate) {
			t.Fatalf("%d of %d distinct new ids were marked first in the filter's second %d", firsts, n, n)
		}
		over := float64(each(t, freshIDs(overProbes), f.store.Seen)) / overProbes
		if gens := f.generations(t); len(gens) != 1 {
			if attempt < 2 {
				t.Logf("the marks fell into %d generations (%v); running again", len(gens), gens)
				continue
			}
			t.Fatalf("the marks fell into %d generations %v twice, want one", len(gens), gens)
		}
		t.Logf("configured p = %g (m = %d bits, k = %d per generation, sized for p/2); %d ids marked: measured %.4f (%d of %d probes), expected %.4f; overfilled with %d: measured %.4f (%d of %d probes), expected %.4f; %v",
			rate, p.Bits, p.Hashes, n, full, int(math.Round(full*probes)), probes, expectedRate(p, n), 2*n, over, int(math.Round(over*overProbes)), overProbes, expectedRate(p, 2*n), time.Since(begin).Round(time.Millisecond))
		if full > rate {
			t.Errorf("false-positive rate %.4f with %d ids exceeds the configured %g", full, n, rate)
		} else if full > 0.75*rate {
			// One generation holds the ids, sized for rate/2 (0.005 ± 0.0005
			// here); near rate it was sized for rate, and two full
			// generations would exceed it.
			t.Errorf("false-positive rate %.4f with %d ids in one generation: want about %g, the generation's share of the configured %g", full, n, rate/2, rate)
		}
		if full < rate/10 {
			t.Errorf("false-positive rate %.4f with %d ids is below a tenth of the configured %g: the filter is oversized or does not hold the ids", full, n, rate)
		}
		if over <= rate {
			t.Errorf("false-positive rate %.4f with %d ids (twice Entries) is not above the configured %g", over, 2*n, rate)
		}
		return
	}
}

// TestBloomMemoryMatchesParams reads the generation's bitmap in Redis: its
// length is Params().Bytes, and Redis takes that plus the allocator's
// rounding up to a size class.
func TestBloomMemoryMatchesParams(t *testing.T) {
	for _, entries := range []int64{50_000, 1_000_000} {
		t.Run(fmt.Sprint(entries), func(t *testing.T) {
			f := newBloomFixture(t, dedup.BloomOptions{Entries: entries, FalsePositiveRate: 0.01, Retention: time.Hour})
			p := f.store.Params()
			if want := int64(math.Ceil(float64(p.Bits) / 8)); p.Bytes != want || p.MemoryBytes() != 2*want {
				t.Fatalf("Params: %d bits, %d bytes, %d memory bytes; want %d bytes and twice that", p.Bits, p.Bytes, p.MemoryBytes(), want)
			}
			each(t, freshIDs(1000), func(ctx context.Context, id string) (bool, error) { return f.store.Mark(ctx, id, time.Hour) })
			gens := f.generations(t)
			if len(gens) != 1 {
				t.Fatalf("generations %v, want one", gens)
			}
			strlen, err := f.client.StrLen(t.Context(), gens[0]).Result()
			if err != nil {
				t.Fatal(err)
			}
			usage, err := f.client.MemoryUsage(t.Context(), gens[0]).Result()
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%d entries at 1%%: m = %d bits, k = %d, %.2f bits per id; STRLEN %d, Params().Bytes %d, MEMORY USAGE %d (%.1f%% over)",
				entries, p.Bits, p.Hashes, float64(p.Bits)/float64(entries), strlen, p.Bytes, usage, 100*(float64(usage)/float64(p.Bytes)-1))
			if strlen != p.Bytes {
				t.Errorf("STRLEN %s = %d, want Params().Bytes = %d: the whole bitmap is allocated with the generation", gens[0], strlen, p.Bytes)
			}
			// jemalloc's large size classes are a quarter of a power of
			// two apart.
			if float64(usage) < float64(p.Bytes) || float64(usage) > 1.25*float64(p.Bytes)+1024 {
				t.Errorf("MEMORY USAGE %s = %d, want between %d and 25%% more", gens[0], usage, p.Bytes)
			}
			pttl, err := f.client.PTTL(t.Context(), gens[0]).Result()
			if err != nil {
				t.Fatal(err)
			}
			if pttl <= time.Hour || pttl > 2*time.Hour {
				t.Errorf("generation %s expires in %v, want between the retention (1h) and twice it: at the end of the next generation", gens[0], pttl)
			}
		})
	}
}

// A Bloom filter shared by every instance of a pipeline: 10 million ids an
// hour at 1% false positives in two generations of 13.8 MB, where the
// key-per-id Store would take about 1.5 GB (36-byte ids). About 1 in 100
// new ids is reported as seen, and its effect skipped; topology.Dedup refuses the store unless
// topology.AcceptFalsePositives() says that is acceptable.
func ExampleNewBloom() {
	store, err := redisdedup.NewBloom("redis://127.0.0.1:6379/0", "clicks", dedup.BloomOptions{
		Entries:           10_000_000, // ids marked per Retention, at the busiest
		FalsePositiveRate: 0.01,
		Retention:         time.Hour, // ids are remembered 1h to 2h
	})
	if err != nil {
		panic(err)
	}
	defer store.Close()
	p := store.Params()
	fmt.Printf("p = %g, %d bits and %d hashes per generation, %.1f MB of bitmaps in Redis\n", store.FalsePositiveRate(), p.Bits, p.Hashes, float64(p.MemoryBytes())/1e6)

	// With a server: mark after the effect; a first=false for a new id is
	// a false positive, and that effect is lost.
	count := func(ctx context.Context, id string) error {
		if seen, err := store.Seen(ctx, id); err != nil || seen {
			return err // an error: fail open or closed, the caller's choice
		}
		// ... count the click ...
		_, err := store.Mark(ctx, id, time.Hour)
		return err
	}
	_ = count
	// Output:
	// p = 0.01, 110381864 bits and 8 hashes per generation, 27.6 MB of bitmaps in Redis
}

func TestNewBloomRejectsBadArguments(t *testing.T) {
	ok := dedup.BloomOptions{Entries: 1000, FalsePositiveRate: 0.01, Retention: time.Hour}
	for _, c := range []struct {
		name string
		url  string
		o    func(o *dedup.BloomOptions)
		want string
	}{
		{"", "redis://127.0.0.1:1/0", nil, "name"},
		{"a", "http://127.0.0.1:1", nil, "url"},
		{"a", "redis://127.0.0.1:1/0", func(o *dedup.BloomOptions) { o.Entries = 0 }, "entries 0"},
		{"a", "redis://127.0.0.1:1/0", func(o *dedup.BloomOptions) { o.FalsePositiveRate = 0 }, "between 0 and 1"},
		{"a", "redis://127.0.0.1:1/0", func(o *dedup.BloomOptions) { o.FalsePositiveRate = 1 }, "between 0 and 1"},
		{"a", "redis://127.0.0.1:1/0", func(o *dedup.BloomOptions) { o.FalsePositiveRate = math.NaN() }, "between 0 and 1"},
		{"a", "redis://127.0.0.1:1/0", func(o *dedup.BloomOptions) { o.Retention = 0 }, "retention 0s"},
		{"a", "redis://127.0.0.1:1/0", func(o *dedup.BloomOptions) { o.Entries = 400_000_000 }, "lower Entries"},
		{"a", "redis://127.0.0.1:1/0", func(o *dedup.BloomOptions) { o.FalsePositiveRate = 1e-9; o.Entries = 100_000_000 }, "raise FalsePositiveRate"},
	} {
		o := ok
		if c.o != nil {
			c.o(&o)
		}
		_, err := redisdedup.NewBloom(c.url, c.name, o)
		if !errors.Is(err, dedup.ErrInvalid) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("NewBloom(%q, %q, %+v): err = %v, want ErrInvalid saying %q", c.url, c.name, o, err, c.want)
		}
	}
	// The largest filter that fits: 2³² bits in a 512 MB string.
	if p, err := (dedup.BloomOptions{Entries: 380_000_000, FalsePositiveRate: 0.01, Retention: time.Hour}).Params(); err != nil || p.Bits > 1<<32 {
		t.Errorf("380M entries at 1%%: %+v, %v; want a filter under 2³² bits", p, err)
	}
}

// A ttl beyond the filter's retention is refused: the id could be forgotten
// before it.
func TestBloomMarkRefusesTTLBeyondRetention(t *testing.T) {
	b, err := redisdedup.NewBloom("redis://127.0.0.1:1/0", "a", dedup.BloomOptions{Entries: 1000, FalsePositiveRate: 0.01, Retention: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	_, err = b.Mark(t.Context(), "m-1", 2*time.Hour)
	if !errors.Is(err, dedup.ErrInvalid) || !strings.Contains(err.Error(), "2h0m0s") || !strings.Contains(err.Error(), "retention 1h0m0s") {
		t.Errorf("Mark with ttl 2h in a 1h filter: %v, want ErrInvalid naming both", err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatalf("second Close: %v, want nil", err)
	}
	for op, call := range map[string]func() error{
		"Mark":   func() error { _, err := b.Mark(t.Context(), "a", time.Minute); return err },
		"Seen":   func() error { _, err := b.Seen(t.Context(), "a"); return err },
		"Forget": func() error { return b.Forget(t.Context(), "a") },
		"Ping":   func() error { return b.Ping(t.Context()) },
	} {
		if err := call(); !errors.Is(err, dedup.ErrClosed) {
			t.Errorf("%s on a closed Bloom: %v, want ErrClosed", op, err)
		}
	}
}

// A Bloom filter's refused Forget says what to do instead: mark after the
// effect.
func TestBloomForgetSaysMarkAfter(t *testing.T) {
	f := newBloomFixture(t, dedup.BloomOptions{Entries: 1000, FalsePositiveRate: 0.01, Retention: time.Hour})
	if _, err := f.store.Mark(t.Context(), "m-1", time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := f.store.Forget(t.Context(), "m-1"); !errors.Is(err, dedup.ErrCannotForget) || !strings.Contains(err.Error(), "MarkAfter") {
		t.Fatalf("Forget = %v, want dedup.ErrCannotForget naming topology.MarkAfter", err)
	}
}

// Instances that size one filter differently would read each other's bits
// at the wrong places and miss ids: the scripts refuse a generation of
// another size.
func TestBloomRefusesAFilterOfOtherOptions(t *testing.T) {
	f := newBloomFixture(t, dedup.BloomOptions{Entries: 1000, FalsePositiveRate: 0.01, Retention: time.Hour})
	if first, err := f.store.Mark(t.Context(), "a", time.Hour); err != nil || !first {
		t.Fatalf("Mark = %v, %v", first, err)
	}
	name := strings.TrimPrefix(strings.TrimSuffix(f.keys, ":"), "eosflow:dedup-test:")
	other, err := redisdedup.NewBloom(servertest.RedisURL(t), name, dedup.BloomOptions{Entries: 2000, FalsePositiveRate: 0.01, Retention: time.Hour}, redisdedup.Prefix("eosflow:dedup-test:"))
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	for op, call := range map[string]func() error{
		"Mark": func() error { _, err := other.Mark(t.Context(), "b", time.Hour); return err },
		"Seen": func() error { _, err := other.Seen(t.Context(), "a"); return err },
	} {
		err := call()
		if !errors.Is(err, dedup.ErrStore) || !strings.Contains(err.Error(), "same BloomOptions") {
			t.Errorf("%s on a filter written with other options: %v, want a StoreError saying to use the same BloomOptions", op, err)
		}
	}
}
