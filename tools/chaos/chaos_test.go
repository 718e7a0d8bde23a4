package chaos

import (
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/eosflow/eosflow/tools/verdict"
)

func TestProblems(t *testing.T) {
	for _, tc := range []struct {
		name        string
		res         Result
		liveUnknown int
		want        []Problem
	}{
		{"exactly once, clean", Result{Guarantee: "exactly-once", Verdict: verdict.Verdict{RecordsIn: 10, RecordsOut: 10}}, 0, nil},
		{"at-most-once control loses", Result{Guarantee: "at-most-once", Verdict: verdict.Verdict{RecordsIn: 10, RecordsOut: 8, Missing: 2}}, 0,
			[]Problem{ProblemMissing}},
		{"at-most-once repeats", Result{Guarantee: "at-most-once", Verdict: verdict.Verdict{RecordsIn: 10, RecordsOut: 10, Missing: 1, Duplicates: 1}}, 0,
			[]Problem{ProblemMissing, ProblemDuplicates, ProblemAtMostOnceRepeated}},
		{"at-most-once repeats only live", Result{Guarantee: "at-most-once", Verdict: verdict.Verdict{RecordsIn: 10, RecordsOut: 9, Missing: 1}, LiveDuplicates: 1}, 0,
			[]Problem{ProblemMissing, ProblemAtMostOnceRepeated, ProblemLiveDuplicates}},
		{"at-least-once control repeats", Result{Guarantee: "at-least-once", Verdict: verdict.Verdict{RecordsIn: 10, RecordsOut: 12, Duplicates: 2}, LiveDuplicates: 2}, 0,
			[]Problem{ProblemDuplicates, ProblemLiveDuplicates}},
		{"count, clean", Result{Guarantee: "exactly-once", Verdict: verdict.Verdict{RecordsIn: 10, RecordsOut: 10}, Counts: &verdict.Counts{CountKeys: 3}}, 0, nil},
		{"count, every violation", Result{Guarantee: "at-least-once", Verdict: verdict.Verdict{RecordsIn: 10, RecordsOut: 12},
			Counts: &verdict.Counts{CountKeys: 3, CountGaps: 1, CountRepeats: 2, CountFinalMismatch: 1, ChangelogMismatch: 1}, LiveDuplicates: 2}, 0,
			[]Problem{ProblemCountGaps, ProblemCountRepeats, ProblemCountFinalMismatch, ProblemChangelogMismatch, ProblemLiveDuplicates}},
		{"everything else", Result{Guarantee: "exactly-once", Verdict: verdict.Verdict{OutOfOrder: 1, Unknown: 1}, TimedOut: true, FaultsPlanned: 3, FaultsNotInjected: 1}, 2,
			[]Problem{ProblemOutOfOrder, ProblemUnknown, ProblemLiveUnknown, ProblemTimedOut, ProblemFaultsNotInjected}},
		{"timed out on a broker that stopped serving the group", Result{Guarantee: "exactly-once", Verdict: verdict.Verdict{RecordsIn: 10, RecordsOut: 4},
			TimedOut: true, UnservedGroup: "the coordinator of group g served none"}, 0, []Problem{ProblemTimedOut}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			names, words := problems(tc.res, tc.liveUnknown)
			if !slices.Equal(names, tc.want) {
				t.Fatalf("failed %v, want %v (%s)", names, tc.want, strings.Join(words, "; "))
			}
			if len(words) != len(names) {
				t.Fatalf("%d names but %d messages", len(names), len(words))
			}
			for _, w := range words {
				if w == "" {
					t.Fatal("an empty message")
				}
			}
		})
	}
}

func TestOptionsValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		o    Options
		want string // "" accepts
	}{
		{"upper by default", Options{Exe: "x"}, ""},
		{"count", Options{Exe: "x", Pipeline: PipelineCount}, ""},
		{"count on pebble under at-least-once", Options{Exe: "x", Pipeline: PipelineCount, State: StatePebble, Guarantee: "at-least-once"}, ""},
		{"unknown pipeline", Options{Exe: "x", Pipeline: "sum"}, "--pipeline"},
		{"unknown state", Options{Exe: "x", Pipeline: PipelineCount, State: "rocks"}, "--state"},
		{"state without count", Options{Exe: "x", State: StateMemory}, "--pipeline count"},
		{"count at most once", Options{Exe: "x", Pipeline: PipelineCount, Guarantee: "at-most-once"}, "at-most-once"},
		{"count by value", Options{Exe: "x", Pipeline: PipelineCount, GroupBy: GroupingValue}, ""},
		{"count by key", Options{Exe: "x", Pipeline: PipelineCount, GroupBy: GroupingKey}, ""},
		{"unknown grouping", Options{Exe: "x", Pipeline: PipelineCount, GroupBy: "partition"}, "--group-by"},
		{"grouping without count", Options{Exe: "x", GroupBy: GroupingValue}, "--pipeline count"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.o.Validate()
			if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
				t.Fatalf("Validate() = %v, want %q", err, tc.want)
			}
		})
	}
}

func TestResultFails(t *testing.T) {
	r := Result{Failed: []Problem{ProblemMissing}}
	if !r.Fails(ProblemMissing) || r.Fails(ProblemDuplicates) {
		t.Fatalf("Fails is wrong for %v", r.Failed)
	}
}

func TestDedupProblems(t *testing.T) {
	for _, tc := range []struct {
		name string
		v    DedupVerdict
		want []Problem
	}{
		{"after, repeats within the kills", DedupVerdict{DedupMode: DedupAfter, EffectsRepeated: 2, EffectsExtraRuns: 3, EffectsBound: 3}, nil},
		{"after, a repeat beyond the kills", DedupVerdict{DedupMode: DedupAfter, EffectsRepeated: 2, EffectsExtraRuns: 4, EffectsBound: 3},
			[]Problem{ProblemEffectsRepeated}},
		{"after loses nothing", DedupVerdict{DedupMode: DedupAfter, EffectsMissing: 1, EffectsBound: 3}, []Problem{ProblemEffectsMissing}},
		{"before, with leases, loses nothing", DedupVerdict{DedupMode: DedupBefore, EffectsMissing: 1, EffectsBound: 3}, []Problem{ProblemEffectsMissing}},
		{"before, repeats within the kills", DedupVerdict{DedupMode: DedupBefore, EffectsRepeated: 3, EffectsExtraRuns: 3, EffectsBound: 3}, nil},
		{"before, a repeat beyond the kills", DedupVerdict{DedupMode: DedupBefore, EffectsRepeated: 4, EffectsExtraRuns: 4, EffectsBound: 3},
			[]Problem{ProblemEffectsRepeated}},
		{"the control is judged as after", DedupVerdict{DedupMode: DedupNone, EffectsRepeated: 200, EffectsExtraRuns: 250, EffectsBound: 3},
			[]Problem{ProblemEffectsRepeated}},
		{"unknown ids", DedupVerdict{DedupMode: DedupAfter, EffectsUnknown: 1}, []Problem{ProblemEffectsUnknown}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := tc.v
			got, words := problems(Result{Guarantee: "exactly-once", DedupVerdict: &v}, 0)
			if !slices.Equal(got, tc.want) {
				t.Fatalf("problems %v (%v), want %v", got, words, tc.want)
			}
		})
	}
}

// Events reported from several goroutines at once (the loop and the table
// writer) reach Options.Events one at a time.
func TestEventsOneAtATime(t *testing.T) {
	var inside, overlaps, calls atomic.Int32
	r := newRun(Options{Records: 10, Events: func(string) {
		if inside.Add(1) > 1 {
			overlaps.Add(1)
		}
		calls.Add(1)
		time.Sleep(50 * time.Microsecond)
		inside.Add(-1)
	}})
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 200 {
				r.event("goroutine %d, event %d", g, i)
			}
		}()
	}
	wg.Wait()
	if calls.Load() != 1600 || overlaps.Load() != 0 {
		t.Fatalf("%d calls, %d while another was under way: want 1600 and 0", calls.Load(), overlaps.Load())
	}
}
