package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/eosflow/eosflow/internal/dedupsize"
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
}

// newDedupSizeCmd estimates dedup store memory with the article's formula.
func newDedupSizeCmd(g *globals) *cobra.Command {
	var p dedupsize.Params
	c := &cobra.Command{
		Use:   "size --rate R --window D --id-bytes N",
		Short: "Estimate the memory of a message-id dedup store",
		Long: `Estimate the memory a dedup store needs: memory = rate × window × id bytes × overhead.

Also sizes two alternatives: a Redis sorted set (ZADD id with a timestamp
score, expired with ZREMRANGEBYSCORE) kept for --sorted-set-window, and a
Bloom filter over the whole window at --fp-rate. Keep ids for twice the
longest redelivery window.`,
		Example: "  eosctl dedup size --rate 10000 --window 168h --id-bytes 36 --sorted-set-window 1h",
		Args:    usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			e, err := dedupsize.Compute(p)
			if err != nil {
				return usageError{err}
			}
			warnings := []string{fmt.Sprintf(
				"a Bloom filter false positive reports a new message as already seen, and the dedup step drops it: at --fp-rate %g about 1 in %.0f new messages is lost; use it only where losing messages is acceptable",
				e.Bloom.FalsePositiveRate, 1/e.Bloom.FalsePositiveRate)}
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
			if err := g.render(cmd.OutOrStdout(), dedupSizeJSON{Bytes: e.Exact.Bytes, Entries: e.Exact.Entries, Estimate: e, Warnings: warnings}, t); err != nil {
				return err
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
