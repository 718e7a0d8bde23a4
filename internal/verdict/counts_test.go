package verdict

import (
	"encoding/binary"
	"strconv"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
)

func countRec(key string, c int64) *kgo.Record {
	return &kgo.Record{Key: []byte(key), Value: []byte(strconv.FormatInt(c, 10))}
}

func changelogRec(key string, c int64) *kgo.Record {
	return &kgo.Record{Key: []byte(key), Value: binary.BigEndian.AppendUint64(nil, uint64(c))}
}

// Five records over two keys: k0 is seeded three times, k1 twice.
func TestJudgeCounts(t *testing.T) {
	good := []*kgo.Record{countRec("k0", 1), countRec("k1", 1), countRec("k0", 2), countRec("k1", 2), countRec("k0", 3)}
	log := []*kgo.Record{changelogRec("k0", 2), changelogRec("k1", 2), changelogRec("k0", 3)}
	for _, tc := range []struct {
		name      string
		out, log  []*kgo.Record
		want      Counts
		unknown   int
		ok        bool
		recordOut int
	}{
		{"exact", good, log, Counts{}, 0, true, 5},
		{"lost update", []*kgo.Record{countRec("k0", 1), countRec("k1", 1), countRec("k1", 2), countRec("k0", 3)}, log,
			Counts{CountGaps: 1}, 0, false, 4},
		{"double count", []*kgo.Record{countRec("k0", 1), countRec("k1", 1), countRec("k0", 2), countRec("k0", 2), countRec("k1", 2), countRec("k0", 3)}, log,
			Counts{CountRepeats: 1}, 0, false, 6},
		{"rolled back state", []*kgo.Record{countRec("k0", 1), countRec("k0", 2), countRec("k1", 1), countRec("k0", 1), countRec("k0", 2), countRec("k1", 2), countRec("k0", 3)}, log,
			Counts{CountRepeats: 2}, 0, false, 7},
		{"counted past the input", append(append([]*kgo.Record(nil), good...), countRec("k0", 4)), log,
			Counts{CountFinalMismatch: 1}, 0, false, 6},
		{"key never emitted", good[:1], log, Counts{CountFinalMismatch: 2}, 0, false, 1},
		{"changelog behind", good, log[:2], Counts{ChangelogMismatch: 1}, 0, false, 5},
		{"changelog unreadable", good, append(append([]*kgo.Record(nil), log...), &kgo.Record{Key: []byte("k1"), Value: []byte("2")}),
			Counts{ChangelogMismatch: 1}, 0, false, 5},
		{"unknown output", append(append([]*kgo.Record(nil), good...), countRec("k9", 1), &kgo.Record{Key: []byte("k0"), Value: []byte("x")}), log,
			Counts{}, 2, true, 7},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v, c := JudgeCounts(5, 2, tc.out, tc.log)
			tc.want.CountKeys, tc.want.ChangelogRead = 2, len(tc.log)
			if c != tc.want || c.OK() != tc.ok {
				t.Fatalf("got %s ok=%v, want %s ok=%v", c, c.OK(), tc.want, tc.ok)
			}
			if v.RecordsIn != 5 || v.RecordsOut != tc.recordOut || v.Unknown != tc.unknown || v.Missing+v.Duplicates+v.OutOfOrder != 0 {
				t.Fatalf("verdict %s, want out=%d unknown=%d", v, tc.recordOut, tc.unknown)
			}
		})
	}
}

func TestCountTrackerLive(t *testing.T) {
	tr := NewCountTracker()
	for _, c := range []int64{1, 2, 2, 5, 6} {
		tr.Add("k", c)
	}
	if tr.Repeats != 1 || tr.Gaps != 2 {
		t.Fatalf("repeats %d gaps %d, want 1 and 2", tr.Repeats, tr.Gaps)
	}
}
