package chaos

import (
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// The outer join's verdict follows from the seed only if no record is
// late and no partner comes after a record expired: stream time must
// stay within the window plus the grace of every record, in every
// partition, and the closing records must expire every record.
func TestOuterSeedKeepsEveryRecordInTime(t *testing.T) {
	const n, keys, partitions = 3000, 50, 6
	recs := outerSeed("in", n, keys, partitions, 7, testNow)
	if len(recs) != n {
		t.Fatalf("%d records, want %d", len(recs), n)
	}
	stream := map[int32]time.Time{}
	for i, r := range recs[:n-partitions] {
		stream[r.partition] = later(stream[r.partition], r.ts)
		if lag := stream[r.partition].Sub(r.ts); lag >= JoinWithin+OuterGrace {
			t.Fatalf("record %d is %s behind stream time: late", i, lag)
		}
		if r.topic != "in" || (r.value[0] != 'o' && r.value[0] != 'p') {
			t.Fatalf("record %d: topic %q, value %q", i, r.topic, r.value)
		}
	}
	for _, c := range recs[n-partitions:] {
		if !strings.HasPrefix(c.key, closeKey) || c.ts.Sub(stream[c.partition]) <= 2*JoinWithin+OuterGrace {
			t.Errorf("closing record %+v does not expire partition %d's records (stream time %s)", c, c.partition, stream[c.partition])
		}
		if !c.ts.Before(testNow) {
			t.Errorf("closing record at %s is not before now, so a broker may refuse it", c.ts)
		}
	}
	m := expectOuter(recs, partitions)
	if len(m.pairs) == 0 || m.leftAlone == 0 || m.rightAlone == 0 || m.early == 0 || m.early >= m.leftAlone+m.rightAlone {
		t.Fatalf("pairs %d, lonely orders %d, payments %d, early %d: want some of each, and some left for the closing records",
			len(m.pairs), m.leftAlone, m.rightAlone, m.early)
	}
	for id := range m.lonely {
		key, v, _ := strings.Cut(id, "/")
		o, p, _ := strings.Cut(v, "+")
		if m.joined[key+"/"+o] || m.joined[key+"/"+p] {
			t.Fatalf("lonely %s joined", id)
		}
	}
}

func TestJudgeOuter(t *testing.T) {
	recs := outerSeed("in", 3000, 50, 6, 9, testNow)
	m := expectOuter(recs, 6)
	var out []*kgo.Record
	add := func(id string) {
		key, v, _ := strings.Cut(id, "/")
		out = append(out, &kgo.Record{Key: []byte(key), Value: []byte(v)})
	}
	for id := range m.pairs {
		add(id)
	}
	for id := range m.lonely {
		add(id)
	}
	pv, lv := judgeOuter(m, out)
	if !pv.OK() || !lv.OK() || lv.LonelySeen != len(m.lonely) {
		t.Fatalf("exact output: %s; %s", pv, lv)
	}
	var pair, lonely string
	for id := range m.pairs {
		pair = id
		break
	}
	for id := range m.lonely {
		lonely = id
		break
	}
	key, v, _ := strings.Cut(pair, "/")
	o, _, _ := strings.Cut(v, "+")
	bad := append(out[1:len(out):len(out)], &kgo.Record{Key: []byte(key), Value: []byte(o + "+none")}) // a joined order alone
	add(lonely)                                                                                        // once more
	bad = append(bad, out[len(out)-1], &kgo.Record{Key: []byte("c1"), Value: []byte("none+p999999")})
	pv, lv = judgeOuter(m, bad)
	if lv.LonelyJoined != 1 || lv.LonelyDuplicates != 1 || lv.LonelyUnexpected != 1 || pv.PairMissing+lv.LonelyMissing != 1 {
		t.Fatalf("%s; %s; %v: want one joined, one repeated, one unexpected and one missing", pv, lv, lv.LonelyExamples)
	}
	var names []Problem
	lonelyProblems(Result{LonelyVerdict: &lv}, func(cond bool, p Problem, _ string, _ ...any) {
		if cond {
			names = append(names, p)
		}
	})
	if len(names) < 3 {
		t.Fatalf("problems %v", names)
	}
}
