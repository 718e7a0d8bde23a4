package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/eosflow/eosflow/tools/chaos"
	"github.com/eosflow/eosflow/tools/verdict"
)

func TestVerifyEventUsageErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"windowed at most once", []string{"verify", "--pipeline", "windowed", "--guarantee", "at-most-once"}, "at-most-once"},
		{"join at most once", []string{"verify", "--pipeline", "join", "--guarantee", "at-most-once"}, "at-most-once"},
		{"windowed with too few records", []string{"verify", "--pipeline", "windowed", "--records", "4", "--partitions", "6"}, "--partitions"},
		{"join spanning beyond its grace", []string{"verify", "--pipeline", "join", "--records", "1000000", "--keys", "2"}, "--keys"},
		{"windowed with an unknown state", []string{"verify", "--pipeline", "windowed", "--state", "rocks"}, "--state"},
		{"join worker without payments", []string{"verify", "worker", "--app", "a", "--instance", "w", "--in", "i", "--out", "o",
			"--brokers", "127.0.0.1:1", "--pipeline", "join"}, "--payments"},
		{"windowed worker with payments", []string{"verify", "worker", "--app", "a", "--instance", "w", "--in", "i", "--out", "o",
			"--brokers", "127.0.0.1:1", "--pipeline", "windowed", "--payments", "p"}, "join"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			code := run(context.Background(), tc.args, nil, &out, &errb)
			if code != exitUsage {
				t.Fatalf("exit %d, want %d; stderr %s", code, exitUsage, errb.String())
			}
			if !strings.Contains(errb.String(), tc.want) {
				t.Fatalf("stderr %q does not mention %q", errb.String(), tc.want)
			}
		})
	}
}

func TestVerifyHelpNamesEventChecks(t *testing.T) {
	var out, errb bytes.Buffer
	if code := run(context.Background(), []string{"verify", "--help"}, nil, &out, &errb); code != exitOK {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	for _, want := range []string{"windowed", "join", "window_missing", "window_duplicates", "window_wrong_count", "window_unexpected",
		"late_records", "pair_missing", "pair_duplicates", "pair_unexpected"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("help does not mention %q", want)
		}
	}
}

func TestVerifyTableEvents(t *testing.T) {
	w := chaos.Result{
		Verdict:       verdict.Verdict{RecordsIn: 10, RecordsOut: 4},
		WindowVerdict: &chaos.WindowVerdict{WindowsExpected: 3, WindowDuplicates: 1, LateRecords: 2, WindowExamples: []string{"window k1@x emitted 2 times"}},
		Pipeline:      "windowed", State: "pebble", Input: "in", Output: "out", AbortedRecords: -1,
	}
	j := chaos.Result{
		Verdict:     verdict.Verdict{RecordsIn: 10, RecordsOut: 5},
		JoinVerdict: &chaos.JoinVerdict{PairsExpected: 5, PairMissing: 1},
		Pipeline:    "join", State: "memory", Input: "in", Payments: "pay", Output: "out", AbortedRecords: -1,
	}
	for _, tc := range []struct {
		r     chaos.Result
		want  []string
		claim string
	}{
		{w, []string{"windowed (pebble state)", "windows expected", "late records", "window duplicates", "window wrong count",
			"window unexpected", "window k1@x emitted 2 times"}, "every window's final count exactly once"},
		{j, []string{"join (memory state)", "in + pay → out", "pairs expected", "pair missing", "pair duplicates", "pair unexpected"},
			"every joined pair exactly once"},
	} {
		var b bytes.Buffer
		if err := verifyTable(tc.r).write(&b); err != nil {
			t.Fatal(err)
		}
		for _, want := range tc.want {
			if !strings.Contains(b.String(), want) {
				t.Errorf("%s table lacks %q:\n%s", tc.r.Pipeline, want, b.String())
			}
		}
		for _, not := range []string{"out of order", "count gaps"} {
			if strings.Contains(b.String(), not) {
				t.Errorf("the %s table shows %q, a check it does not make:\n%s", tc.r.Pipeline, not, b.String())
			}
		}
		if c := eventClaim(tc.r); !strings.Contains(c, tc.claim) {
			t.Errorf("claim %q lacks %q", c, tc.claim)
		}
	}
}
