package main

import (
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/eosflow/eosflow/dedup"
	"github.com/eosflow/eosflow/tools/dedupsize"
)

// newDedupCmd groups the dedup store helpers.
func newDedupCmd(g *globals) *cobra.Command {
	return newGroupingCmd("dedup", "Plan the dedup store of an idempotent consumer", newDedupSizeCmd(g))
}

// dedupSizeJSON is the -o json shape: Bytes is the exact store, as scripts
// most often want one number, and the alternatives follow.
type dedupSizeJSON struct {
	Bytes    float64            `json:"bytes"`
	Entries  float64            `json:"entries"`
	Estimate dedupsize.Estimate `json:"estimate"`
	Warnings []string           `json:"warnings"`
	// Store and Settings are there with --store: its measured size and
	// the settings to run it with.
	Store    *dedupsize.StoreSize `json:"store,omitempty"`
	Settings []string             `json:"settings,omitempty"`
}

// newDedupSizeCmd estimates dedup store memory with the article's formula.
func newDedupSizeCmd(g *globals) *cobra.Command {
	var p dedupsize.Params
	var store, prefix string
	c := &cobra.Command{
		Use:   "size --rate R --window D --id-bytes N",
		Short: "Estimate the memory of a message-id dedup store",
		Long: `Estimate the memory a dedup store needs: memory = rate × window × id bytes × overhead.

Also sizes two alternatives: a Redis sorted set (ZADD id with a timestamp
score, expired with ZREMRANGEBYSCORE) kept for --sorted-set-window, and a
Bloom filter over the whole window at --fp-rate. Keep ids for twice the
longest redelivery window.

With --store redis, redis-sorted-set or postgres it also sizes that store
with the per-entry costs measured on Redis 7 and PostgreSQL 15, and prints
the settings to run it with. With --store bloom it sizes redisdedup.NewBloom:
two generations of a filter for the window's ids, each at half --fp-rate.`,
		Example: "  eosctl dedup size --rate 10000 --window 168h --id-bytes 36 --sorted-set-window 1h\n  eosctl dedup size --rate 2000 --window 24h --id-bytes 36 --store redis",
		Args:    usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			e, err := dedupsize.Compute(p)
			if err != nil {
				return usageError{err}
			}
			warnings := []string{fmt.Sprintf(
				"a Bloom filter false positive reports a new message as already seen, and the dedup step drops it: at --fp-rate %g about 1 in %.0f new messages is lost; use it only where losing messages is acceptable",
				e.Bloom.FalsePositiveRate, 1/e.Bloom.FalsePositiveRate)}
			out := dedupSizeJSON{Bytes: e.Exact.Bytes, Entries: e.Exact.Entries, Estimate: e}
			if store != "" {
				if err := storeSettings(&out, store, prefix, p); err != nil {
					return usageError{err}
				}
			}
			if e.Exact.Bytes > 64e9 {
				warnings = append(warnings, "the exact store is too large for one machine's memory: shorten --window or use a sorted set with a shorter retention")
			}
			t := newTable("STORE", "ENTRIES", "PER ENTRY", "SIZE", "HOW")
			t.add("exact hash set", count(e.Exact.Entries), fmt.Sprintf("%d B × %g", p.IDBytes, e.Exact.Overhead),
				dedupsize.HumanBytes(e.Exact.Bytes), fmt.Sprintf("every id for %s", p.Window))
			t.add("redis sorted set", count(e.SortedSet.Entries), fmt.Sprintf("%.0f B", e.SortedSet.BytesPerEntry),
				dedupsize.HumanBytes(e.SortedSet.Bytes), fmt.Sprintf("ids for %s, ZREMRANGEBYSCORE cleanup", e.SortedSet.Window))
			t.add("bloom filter", count(e.Bloom.Entries), fmt.Sprintf("%.1f bits", e.Bloom.Bits/max(e.Bloom.Entries, 1)),
				dedupsize.HumanBytes(e.Bloom.Bytes), fmt.Sprintf("p=%g, %d hashes; false positives drop messages", e.Bloom.FalsePositiveRate, e.Bloom.Hashes))
			out.Warnings = warnings
			if err := g.render(cmd.OutOrStdout(), out, t); err != nil {
				return err
			}
			if g.output == outputTable && len(out.Settings) > 0 {
				fmt.Fprintf(cmd.OutOrStdout(), "\n%s\n", strings.Join(out.Settings, "\n"))
			}
			if g.output == outputTable {
				for _, w := range warnings {
					fmt.Fprintf(cmd.ErrOrStderr(), "warning: %s\n", w)
				}
			}
			return nil
		},
	}
	f := c.Flags()
	f.Float64Var(&p.Rate, "rate", 0, "messages per second")
	f.DurationVar(&p.Window, "window", 0, "how long ids are kept"+durationFlagHelp)
	f.IntVar(&p.IDBytes, "id-bytes", 0, "bytes per message id (36 for a UUID string)")
	f.Float64Var(&p.Overhead, "overhead", dedupsize.DefaultOverhead, "hash table overhead factor of the exact store")
	f.Float64Var(&p.FalsePositiveRate, "fp-rate", dedupsize.DefaultFalsePositiveRate, "Bloom filter false-positive rate")
	f.DurationVar(&p.SortedSetWindow, "sorted-set-window", 0, "retention of the sorted-set alternative (default --window)"+durationFlagHelp)
	f.StringVar(&store, "store", "", "also size this store and print its settings: redis, redis-sorted-set, postgres or bloom")
	f.StringVar(&prefix, "prefix", "eosflow:dedup:", "key prefix of --store redis (redisdedup.Prefix), counted in each key's bytes")
	for _, n := range []string{"rate", "window", "id-bytes"} {
		_ = c.MarkFlagRequired(n)
	}
	return c
}

// count prints an entry count compactly (36000000 → 36.0M).
func count(n float64) string {
	switch {
	case n >= 1e9:
		return fmt.Sprintf("%.2fG", n/1e9)
	case n >= 1e6:
		return fmt.Sprintf("%.1fM", n/1e6)
	case n >= 1e4:
		return fmt.Sprintf("%.1fk", n/1e3)
	default:
		return fmt.Sprintf("%.0f", n)
	}
}

// storeSettings sizes the chosen store and says how to run it: the
// retention, what to give the server, how often to purge.
func storeSettings(out *dedupSizeJSON, store, prefix string, p dedupsize.Params) error {
	window := p.Window.String()
	if store == "bloom" {
		bloomSettings(out, p)
		return nil
	}
	idBytes := p.IDBytes
	entries := out.Entries
	if store == "redis" {
		idBytes += len(prefix)
	}
	if store == "redis-sorted-set" && p.SortedSetWindow > 0 {
		entries = p.Rate * p.SortedSetWindow.Seconds()
		window = p.SortedSetWindow.String()
	}
	sz, err := dedupsize.ForStore(store, entries, idBytes)
	if err != nil {
		return err
	}
	out.Store = &sz
	head := fmt.Sprintf("%s: %s ids × %.0f B = %s (measured per-entry cost)", store, count(sz.Entries), sz.BytesPerEntry, dedupsize.HumanBytes(sz.Bytes))
	retention := fmt.Sprintf("topology.DedupRetention(%s)", goDuration(p.Window))
	switch store {
	case "redis":
		out.Settings = []string{head,
			fmt.Sprintf("redis.conf: maxmemory %.0fmb (the ids and 25%% headroom), maxmemory-policy noeviction (an evicted id repeats its effect)", sz.Bytes*1.25/1e6),
			fmt.Sprintf("eosflow: redisdedup.New(url, redisdedup.Prefix(%q)), %s; keys expire by themselves", prefix, retention)}
	case "redis-sorted-set":
		out.Settings = []string{head,
			fmt.Sprintf("redis.conf: maxmemory %.0fmb (the set and 25%% headroom), maxmemory-policy noeviction", sz.Bytes*1.25/1e6),
			fmt.Sprintf("eosflow: redisdedup.NewSortedSet(url, key), DedupRetention(%s); call Purge (ZREMRANGEBYSCORE) every %s or the set keeps growing", goDuration(p.SortedSetWindow), goDuration(purgeEvery(p.SortedSetWindow))),
			"one key holds every id: in Redis Cluster it lives on one shard"}
	case "postgres":
		out.Settings = []string{head,
			fmt.Sprintf("postgres: %s of table and index in %s (eosflow_dedup); one write per message, %.0f/s", dedupsize.HumanBytes(sz.Bytes), window, p.Rate),
			fmt.Sprintf("eosflow: pgdedup.New(ctx, url), %s; call Purge every %s so expired rows go and autovacuum can reuse their space", retention, goDuration(purgeEvery(p.Window)))}
	}
	return nil
}

// bloomSettings sizes redisdedup.NewBloom for the window's ids: two
// generations, each sized for rate × window ids at half the rate, and says
// what its false positives cost.
func bloomSettings(out *dedupSizeJSON, p dedupsize.Params) {
	entries := math.Ceil(p.Rate * p.Window.Seconds())
	g := dedup.SizeBloom(entries, p.FalsePositiveRate)
	mem := float64(g.MemoryBytes())
	out.Store = &dedupsize.StoreSize{Store: "bloom", Entries: entries, BytesPerEntry: mem / entries, Bytes: mem}
	head := fmt.Sprintf("bloom: %d generations × (m = %d bits, k = %d hashes) for %s ids each at p/2 = %g: %s, %.2f B per id",
		dedup.RedisBloomGenerations, g.Bits, g.Hashes, count(entries), g.FalsePositiveRate/2, dedupsize.HumanBytes(mem), mem/entries)
	if g.Bits > dedup.MaxRedisBloomBits {
		out.Settings = []string{head, "a generation is larger than the 512 MB a Redis string holds: shorten --window or raise --fp-rate"}
		return
	}
	out.Settings = []string{head,
		fmt.Sprintf("redis.conf: maxmemory %.0fmb (both generations and 25%% headroom), maxmemory-policy noeviction", mem*1.25/1e6),
		fmt.Sprintf("eosflow: redisdedup.NewBloom(url, name, dedup.BloomOptions{Entries: %.0f, FalsePositiveRate: %g, Retention: %s}), topology.DedupRetention(%s), topology.AcceptFalsePositives(); ids are remembered %s to %s",
			entries, p.FalsePositiveRate, goDuration(p.Window), goDuration(p.Window), p.Window, 2*p.Window),
		fmt.Sprintf("false positives drop messages: about 1 in %.0f new ids is reported as seen and its effect skipped, more when over %s ids come in %s", 1/p.FalsePositiveRate, count(entries), p.Window),
	}
}

// purgeEvery is a tenth of the window, at least a minute: the set holds
// at most 10% expired ids.
func purgeEvery(w time.Duration) time.Duration { return max(w/10, time.Minute).Round(time.Minute) }

// goDuration writes d as Go source.
func goDuration(d time.Duration) string {
	switch {
	case d%time.Hour == 0:
		return fmt.Sprintf("%d*time.Hour", d/time.Hour)
	case d%time.Minute == 0:
		return fmt.Sprintf("%d*time.Minute", d/time.Minute)
	default:
		return fmt.Sprintf("%d*time.Second", d/time.Second)
	}
}
