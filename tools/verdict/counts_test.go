package verdict

import (
	"encoding/binary"
	"reflect"
	"strconv"
	"strings"
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
			if !reflect.DeepEqual(c, tc.want) || c.OK() != tc.ok {
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

// TraceCounts names, for a skipped count, the committed record after the
// gap, the aborted output that held the count and the changelog records
// that held it, each with its producer and epoch; and both records of a
// repeated count.
func TestTraceCounts(t *testing.T) {
	rec := func(topic string, off int64, key string, value []byte, epoch int16) *kgo.Record {
		return &kgo.Record{Topic: topic, Partition: 1, Offset: off, Key: []byte(key), Value: value, ProducerID: 7, ProducerEpoch: epoch}
	}
	cnt := func(c int64) []byte { return []byte(strconv.FormatInt(c, 10)) }
	state := func(c int64) []byte { return binary.BigEndian.AppendUint64(nil, uint64(c)) }
	out := []*kgo.Record{rec("out", 0, "a", cnt(1), 1), rec("out", 4, "a", cnt(3), 3), rec("out", 6, "b", cnt(1), 3), rec("out", 8, "b", cnt(1), 4)}
	outAll := []*kgo.Record{out[0], rec("out", 2, "a", cnt(2), 2), out[1], out[2], out[3]}
	log := []*kgo.Record{rec("log", 0, "a", state(1), 1), rec("log", 4, "a", state(3), 3)}
	logAll := []*kgo.Record{log[0], rec("log", 2, "a", state(2), 2), log[1]}
	ex := TraceCounts(out, outAll, log, logAll, 5)
	if len(ex) != 2 {
		t.Fatalf("examples %q, want a gap and a repeat", ex)
	}
	for _, want := range []string{"key a: count 2 skipped", "3 follows 1 at out/1@4 (producer 7 epoch 3", "aborted outputs of 2: [out/1@2 (producer 7 epoch 2",
		"changelog records of 2: [aborted log/1@2 (producer 7 epoch 2"} {
		if !strings.Contains(ex[0], want) {
			t.Errorf("gap example %q lacks %q", ex[0], want)
		}
	}
	if !strings.Contains(ex[1], "key b: count 1 repeated: out/1@6 (producer 7 epoch 3") || !strings.Contains(ex[1], "then out/1@8 (producer 7 epoch 4") {
		t.Errorf("repeat example %q", ex[1])
	}
	if got := TraceCounts(out, outAll, log, logAll, 1); len(got) != 1 {
		t.Errorf("limit 1 gave %d examples", len(got))
	}
}
