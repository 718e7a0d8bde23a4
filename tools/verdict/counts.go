package verdict

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"strconv"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Counts is the judgement of a counting pipeline, one that emits for every
// input record its key's new count: for each key k seeded n_k times, the
// committed output must be exactly 1, 2, … n_k in order, and the last
// changelog value of k must be n_k.
type Counts struct {
	// CountKeys is how many keys were seeded.
	CountKeys int `json:"count_keys"`
	// CountGaps adds up the counts a key skipped: lost updates.
	CountGaps int `json:"count_gaps"`
	// CountRepeats is how many output records carry a count their key had
	// already reached: an input counted twice, or an update emitted twice.
	CountRepeats int `json:"count_repeats"`
	// CountFinalMismatch is how many keys' last output count is not n_k
	// (none at all counts too).
	CountFinalMismatch int `json:"count_final_mismatch"`
	// ChangelogMismatch is how many keys' last changelog value is not n_k
	// as 8 big-endian bytes (missing or unreadable counts too).
	ChangelogMismatch int `json:"changelog_mismatch"`
	// ChangelogRead is how many changelog records were read.
	ChangelogRead int `json:"changelog_read"`
	// Examples traces a few gaps and repeats to the records and
	// transactions around them (see TraceCounts).
	Examples []string `json:"count_examples,omitempty"`
}

// OK reports whether every key counted exactly once per input record.
func (c Counts) OK() bool {
	return c.CountGaps == 0 && c.CountRepeats == 0 && c.CountFinalMismatch == 0 && c.ChangelogMismatch == 0
}

// String is the count verdict on one line, for logs.
func (c Counts) String() string {
	return fmt.Sprintf("keys=%d count_gaps=%d count_repeats=%d count_final_mismatch=%d changelog_mismatch=%d",
		c.CountKeys, c.CountGaps, c.CountRepeats, c.CountFinalMismatch, c.ChangelogMismatch)
}

// Want returns n_k for every key of n records seeded over keys keys.
func Want(n, keys int) map[string]int64 {
	want := make(map[string]int64, min(n, keys))
	for i := range n {
		want[string(Key(i, keys))]++
	}
	return want
}

// ParseCount reads a count written as decimal text (the JSON of an
// int64), as the counting pipeline writes its output.
func ParseCount(v []byte) (int64, bool) {
	c, err := strconv.ParseInt(string(bytes.TrimSpace(v)), 10, 64)
	return c, err == nil
}

// CountTracker follows the counts of each key in the order they are read
// (one key lives in one partition, so that order is the key's) and counts
// gaps and repeats as they come; a live reader and the final judgement
// share it.
type CountTracker struct {
	max     map[string]int64
	last    map[string]int64
	Gaps    int
	Repeats int
}

// NewCountTracker returns an empty tracker.
func NewCountTracker() *CountTracker {
	return &CountTracker{max: map[string]int64{}, last: map[string]int64{}}
}

// Add notes that key was emitted with count c: above the key's highest
// count so far by more than one skips counts, at or below it repeats one.
func (t *CountTracker) Add(key string, c int64) {
	hi := t.max[key]
	switch {
	case c <= hi:
		t.Repeats++
	case c > hi+1:
		t.Gaps += int(c - hi - 1)
	}
	t.max[key] = max(hi, c)
	t.last[key] = c
}

// JudgeCounts judges the output and the changelog of a counting pipeline
// against n records seeded over keys keys. The returned Verdict has the
// records in and out, and as Unknown the output records whose key was not
// seeded or whose value is not a count; ids are not judged, since counts
// replace them.
func JudgeCounts(n, keys int, out, changelog []*kgo.Record) (Verdict, Counts) {
	want := Want(n, keys)
	v := Verdict{RecordsIn: n, RecordsOut: len(out)}
	c := Counts{CountKeys: len(want), ChangelogRead: len(changelog)}
	tr := NewCountTracker()
	for _, r := range out {
		cnt, ok := ParseCount(r.Value)
		if _, seeded := want[string(r.Key)]; !ok || !seeded {
			v.Unknown++
			continue
		}
		tr.Add(string(r.Key), cnt)
	}
	c.CountGaps, c.CountRepeats = tr.Gaps, tr.Repeats
	last := map[string][]byte{}
	for _, r := range changelog {
		last[string(r.Key)] = r.Value
	}
	for k, nk := range want {
		if got, ok := tr.last[k]; !ok || got != nk {
			c.CountFinalMismatch++
		}
		if b := last[k]; len(b) != 8 || int64(binary.BigEndian.Uint64(b)) != nk {
			c.ChangelogMismatch++
		}
	}
	return v, c
}

// TraceCounts explains up to limit of the gaps and repeats in a counting
// pipeline's committed output: for a key's first skipped count, the
// committed record that skipped it, the aborted output records that held
// it, and the changelog records that held it, committed or not; for a
// repeated count, both committed records. Each record is named by topic,
// partition and offset, with the producer id and epoch of its batch (what
// the workers' logs name their transactions by) and its timestamp. out and
// changelog are read read_committed; outAll and changelogAll
// read_uncommitted.
func TraceCounts(out, outAll, changelog, changelogAll []*kgo.Record, limit int) []string {
	committed := map[recordAt]bool{}
	for _, r := range out {
		committed[at(r)] = true
	}
	for _, r := range changelog {
		committed[at(r)] = true
	}
	var ex []string
	hi := map[string]int64{}
	first := map[string]map[int64]*kgo.Record{}
	for _, r := range out {
		if len(ex) >= limit {
			break
		}
		c, ok := ParseCount(r.Value)
		if !ok {
			continue
		}
		k := string(r.Key)
		if first[k] == nil {
			first[k] = map[int64]*kgo.Record{}
		}
		switch h := hi[k]; {
		case c <= h:
			if prev := first[k][c]; prev != nil {
				ex = append(ex, fmt.Sprintf("key %s: count %d repeated: %s, then %s", k, c, describe(prev), describe(r)))
			}
		case c > h+1:
			missing := h + 1
			var aborted, logged []string
			for _, a := range outAll {
				if v, ok := ParseCount(a.Value); ok && v == missing && string(a.Key) == k && !committed[at(a)] {
					aborted = append(aborted, describe(a))
				}
			}
			for _, a := range changelogAll {
				if len(a.Value) == 8 && int64(binary.BigEndian.Uint64(a.Value)) == missing && string(a.Key) == k {
					state := "aborted"
					if committed[at(a)] {
						state = "committed"
					}
					logged = append(logged, state+" "+describe(a))
				}
			}
			ex = append(ex, fmt.Sprintf("key %s: count %d skipped: %d follows %d at %s; aborted outputs of %d: %v; changelog records of %d: %v",
				k, missing, c, h, describe(r), missing, aborted, missing, logged))
		}
		if _, seen := first[k][c]; !seen {
			first[k][c] = r
		}
		hi[k] = max(hi[k], c)
	}
	return ex
}

// recordAt is where a record sits in its topic.
type recordAt struct {
	topic     string
	partition int32
	offset    int64
}

func at(r *kgo.Record) recordAt { return recordAt{r.Topic, r.Partition, r.Offset} }

// describe names a record by place, producer and time.
func describe(r *kgo.Record) string {
	return fmt.Sprintf("%s/%d@%d (producer %d epoch %d, %s)", r.Topic, r.Partition, r.Offset, r.ProducerID, r.ProducerEpoch,
		r.Timestamp.UTC().Format("15:04:05.000"))
}
