package sim

import (
	"context"
	"encoding/binary"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/eosflow/eosflow/tools/chaos"
	"github.com/eosflow/eosflow/tools/verdict"
	"github.com/eosflow/eosflow/topology"
	"github.com/twmb/franz-go/pkg/kgo"
)

// timed makes the timer pipeline's input record i: verdict's, its
// timestamp moving on a millisecond every other record, and back every
// seventh, so that some records move stream time and others do not.
func timed(keys int) func(i int) *kgo.Record {
	return func(i int) *kgo.Record {
		ms := int64(i / 2)
		if i%7 == 6 {
			ms -= 5
		}
		return &kgo.Record{Topic: input, Key: verdict.Key(i, keys), Value: verdict.Value(i, 0), Timestamp: time.UnixMilli(timedBase + ms)}
	}
}

// timedBase is the timer pipeline's first event time.
const timedBase = 1_700_000_000_000

// judgeFires checks the timer pipeline's firings, read_committed: each
// task's counts of each kind run 1, 2, … n, none repeated, and its store's
// changelog ends at n. A task's stream-time count is n = the times its
// committed input moved stream time past a multiple of the interval; its
// wall-clock count is at least 1. Firings in commits that were lost may
// be missing, and may skip counts, as many as they held; a task whose
// store lost such a commit's stream time may end as low as its input
// without that commit's records makes it.
func (s *sim) judgeFires(ctx context.Context) error {
	in, err := s.read(ctx, input, true)
	if err != nil {
		return fmt.Errorf("reading the input: %w", err)
	}
	out, err := s.read(ctx, fired, true)
	if err != nil {
		return fmt.Errorf("reading the firings: %w", err)
	}
	changelog, err := s.read(ctx, topology.ChangelogTopic(appID, chaos.FiresStore), true)
	if err != nil {
		return fmt.Errorf("reading the firings' changelog: %w", err)
	}
	lostRecs, err := s.lostToFlips(ctx, fired)
	if err != nil {
		return err
	}
	lost := map[string]int64{}
	for _, r := range lostRecs {
		lost[chaos.FireKey(string(r.Key), r.Partition)]++
	}
	lostCopies, err := s.lostToFlips(ctx, output)
	if err != nil {
		return err
	}
	want := fireBounds{high: streamFires(in, s.cfg.Partitions), low: streamFires(without(in, lostCopies), s.cfg.Partitions)}
	return as(KindFires, judgeFiring(want, out, changelog, lost))
}

// fireBounds is, per task, the fewest and the most stream-time firings
// its input allows: the most when every record counts, the fewest when
// the records of lost commits left no trace in its stream time.
type fireBounds struct{ low, high map[string]int64 }

// without is in less the records whose copies are among lost (the input
// of commits that were lost) and the records each such run shadows: those
// after it on its partition, up to the first that moves stream time past
// where the lost records left it in memory. A shadowed record wrote no
// stream time (stream time was already there), so a store restored after
// the lost commit forgot it as it forgot the lost records.
func without(in, lost []*kgo.Record) []*kgo.Record {
	if len(lost) == 0 {
		return in
	}
	gone := map[int]bool{}
	for _, r := range lost {
		if id, ok := verdict.ID(r.Value); ok {
			gone[id] = true
		}
	}
	st := map[int32]int64{}    // per partition, stream time in memory
	shadow := map[int32]bool{} // a lost record came, and nothing moved stream time since
	var kept []*kgo.Record
	for _, r := range in {
		ts, p := r.Timestamp.UnixMilli(), r.Partition
		old, seen := st[p]
		moves := !seen || ts > old
		if moves {
			st[p] = ts
		}
		if id, ok := verdict.ID(r.Value); ok && gone[id] {
			shadow[p] = true
			continue
		}
		if shadow[p] && !moves {
			continue
		}
		shadow[p] = false
		kept = append(kept, r)
	}
	return kept
}

// streamFires is, per task, how often its stream-time timer fires over
// in: each record that moves the task's stream time (its highest
// timestamp) past a multiple of the interval fires it once; the task's
// first record sets stream time without firing.
func streamFires(in []*kgo.Record, partitions int32) map[string]int64 {
	iv := chaos.StreamEvery.Milliseconds()
	want, st := map[string]int64{}, map[int32]int64{}
	for p := range partitions {
		want[chaos.FireKey(chaos.StreamFire, p)] = 0
	}
	for _, r := range in {
		ts := r.Timestamp.UnixMilli()
		old, seen := st[r.Partition]
		if seen && ts <= old {
			continue
		}
		st[r.Partition] = ts
		if seen && old/iv != ts/iv {
			want[chaos.FireKey(chaos.StreamFire, r.Partition)]++
		}
	}
	return want
}

// judgeFiring checks the firings out against stream, the stream-time
// firings each task's input makes, and the fold of the changelog; lost
// is, per task and kind, the firings of lost commits. Stream time may run
// ahead of the log by a lost commit's records, so a task with lost
// firings may end that many above its count, or below it; and as low as
// the input without them and the records they shadow makes it (a store
// restored from the log forgets their stream time, and even the task's
// first record, when they held it).
func judgeFiring(stream fireBounds, out, changelog []*kgo.Record, lost map[string]int64) error {
	var bad []string
	last, skipped := map[string]int64{}, map[string]int64{}
	for _, r := range out {
		k := chaos.FireKey(string(r.Key), r.Partition)
		c, ok := verdict.ParseCount(r.Value)
		prev := last[k]
		switch {
		case !ok:
			bad = append(bad, fmt.Sprintf("unknown firing %s=%q at %d/%d", k, r.Value, r.Partition, r.Offset))
		case c == prev+1:
		case c > prev && skipped[k]+c-prev-1 <= lost[k]:
			skipped[k] += c - prev - 1
		default:
			bad = append(bad, fmt.Sprintf("%s: count %d after %d at %d/%d", k, c, prev, r.Partition, r.Offset))
		}
		last[k] = c
	}
	fold := map[string]int64{}
	for _, r := range changelog {
		if len(r.Value) == 8 {
			fold[chaos.FireKey(string(r.Key), r.Partition)] = int64(binary.BigEndian.Uint64(r.Value))
		}
	}
	for k, w := range stream.high {
		if got, low := last[k], min(w-lost[k], stream.low[k]); got > w+lost[k] || got < low {
			bad = append(bad, fmt.Sprintf("%s: %d firings, want %d (%d at least)", k, got, w, low))
		}
		wall := chaos.WallFire + strings.TrimPrefix(k, chaos.StreamFire)
		if last[wall] == 0 {
			bad = append(bad, wall+": never fired")
		}
	}
	for k, n := range last {
		if fold[k] != n {
			bad = append(bad, fmt.Sprintf("%s: the store's changelog ends at %d, the firings at %d", k, fold[k], n))
		}
	}
	if len(bad) == 0 {
		return nil
	}
	slices.Sort(bad)
	return fmt.Errorf("%d firing violations (%d tasks with firings of lost commits): %s", len(bad), len(lost), strings.Join(bad[:min(len(bad), 5)], "; "))
}
