package conformance

import (
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/eosflow/eosflow/state"
	"github.com/eosflow/eosflow/tools/kafkatest"
	"github.com/eosflow/eosflow/topology"
	"github.com/twmb/franz-go/pkg/kgo"
)

// retractStats says which retractions a seed exercises under every-update
// output.
type retractStats struct {
	merged int // tombstones for sessions a merge absorbed or extended
	grown  int // tombstones for the old window of a session that grew
}

// sessionUpdate is how an every-update output reads in the expected and
// the committed results: an update as "[start,end]=ids@ts", a tombstone as
// "-[start,end]@ts" with the window it retracts, times of day in ms.
func sessionUpdate(tombstone bool, start, end, ts time.Time, ids []int) string {
	const f = "15:04:05.000"
	if tombstone {
		return fmt.Sprintf("-[%s,%s]@%s", start.UTC().Format(f), end.UTC().Format(f), ts.UTC().Format(f))
	}
	return fmt.Sprintf("[%s,%s]=%v@%s", start.UTC().Format(f), end.UTC().Format(f), ids, ts.UTC().Format(f))
}

// expectedUpdates computes, in plain Go (walkSessions), every output of
// every-update session windows, per key in order: for each record on
// time, a tombstone for each session it merged whose window changed (in
// order of start, with the record's timestamp), then the merged session.
// Closing a session emits nothing.
func expectedUpdates(recs []sessionRecord) (map[string][]string, retractStats, sessionStats) {
	want := map[string][]string{}
	var rs retractStats
	st := walkSessions(recs, func(r sessionRecord, merged []modelSession, s modelSession) {
		for _, o := range merged {
			if o.start.Equal(s.start) && o.end.Equal(s.end) {
				continue // the same window: the update replaces it
			}
			if len(merged) >= 2 {
				rs.merged++
			} else {
				rs.grown++
			}
			want[s.key] = append(want[s.key], sessionUpdate(true, o.start, o.end, r.ts, nil))
		}
		want[s.key] = append(want[s.key], sessionUpdate(false, s.start, s.end, r.ts, s.ids))
	}, func(modelSession) {})
	return want, rs, st
}

// readUpdate is how the committed output r reads (see sessionUpdate): a
// tombstone's window comes from its headers.
func readUpdate(r *kgo.Record) (string, error) {
	if r.Value != nil {
		var w topology.Windowed[[]int]
		if err := json.Unmarshal(r.Value, &w); err != nil {
			return "", fmt.Errorf("output %q: %w", r.Value, err)
		}
		return sessionUpdate(false, w.Window.Start, w.Window.End, r.Timestamp, w.Value), nil
	}
	var win [2]time.Time
	for _, h := range r.Headers {
		i := slices.Index([]string{topology.HeaderWindowStart, topology.HeaderWindowEnd}, h.Key)
		if i < 0 {
			continue
		}
		t, err := time.Parse(topology.WindowTimeFormat, string(h.Value))
		if err != nil {
			return "", fmt.Errorf("tombstone of %q: header %s: %w", r.Key, h.Key, err)
		}
		win[i] = t
	}
	if win[0].IsZero() || win[1].IsZero() {
		return "", fmt.Errorf("tombstone of %q without its window's headers: %v", r.Key, r.Headers)
	}
	return sessionUpdate(true, win[0], win[1], r.Timestamp, nil), nil
}

// SessionUpdatesExactlyOnce is SessionWindowsExactlyOnce with every update
// emitted, through the same faults: the committed output of each key must
// be, in order, exactly what the plain-Go model computes, retractions
// included: a record that merges sessions or extends one emits a
// tombstone (nil value, the window in its headers, the record's
// timestamp) for each window it replaced, then the merged session, as
// Kafka Streams does. A retraction lost, repeated, out of order or
// naming the wrong window fails it, as does a wrong update.
func SessionUpdatesExactlyOnce(t *testing.T, env *kafkatest.Env, e state.Engine) {
	recs := sessionSeed(24, 3, 4*time.Minute, 23)
	want, rs, stats := expectedUpdates(recs)
	total := 0
	for _, outs := range want {
		total += len(outs)
	}
	t.Logf("seed: %d records, %d outputs, %d late, %d merges absorbing %d sessions; %d tombstones for merged sessions, %d for grown ones",
		len(recs), total, stats.late, stats.merges, stats.absorbed, rs.merged, rs.grown)
	if stats.late == 0 || stats.outOfOrder == 0 || stats.merges == 0 || rs.merged == 0 || rs.grown == 0 {
		t.Fatalf("seed stats %+v, %+v: the scenario must exercise lateness, disorder, merges and growth", stats, rs)
	}
	f, out, v := runSessionFaults(t, env, recs, topology.Session(sessionGap).Grace(sessionGrace), e)

	got := map[string][]string{}
	for _, r := range Drain(t, env, out, total) {
		s, err := readUpdate(r)
		if err != nil {
			t.Fatal(err)
		}
		got[string(r.Key)] = append(got[string(r.Key)], s)
	}
	var wrong []string
	for key := range mergedKeys(want, got) {
		w, g := want[key], got[key]
		if i := firstDiff(w, g); i >= 0 {
			wrong = append(wrong, fmt.Sprintf("%s: output %d of %d is %q, want %q (of %d)", key, i, len(g), at(g, i), at(w, i), len(w)))
		}
	}
	slices.Sort(wrong)
	if len(wrong) > 0 {
		t.Fatalf("%d keys differ from the computed outputs (first ones: %v)", len(wrong), wrong[:min(5, len(wrong))])
	}
	checkSessionFaults(t, env, f, out, v, stats, total)
}

// mergedKeys is the set of keys of a and b.
func mergedKeys(a, b map[string][]string) map[string]bool {
	keys := map[string]bool{}
	for k := range a {
		keys[k] = true
	}
	for k := range b {
		keys[k] = true
	}
	return keys
}

// firstDiff is the first index where a and b differ, or -1.
func firstDiff(a, b []string) int {
	for i := range max(len(a), len(b)) {
		if i >= len(a) || i >= len(b) || a[i] != b[i] {
			return i
		}
	}
	return -1
}

// at is s[i], or "(none)" past its end.
func at(s []string, i int) string {
	if i < len(s) {
		return s[i]
	}
	return "(none)"
}
