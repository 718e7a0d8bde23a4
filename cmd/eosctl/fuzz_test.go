package main

import (
	"encoding/json"
	"math"
	"strings"
	"testing"
)

// FuzzDedupSizeFlags runs `eosctl -o json dedup size` with arbitrary
// --rate, --window, --id-bytes, --overhead and --fp-rate text: numbers and
// Go durations as pflag parses them, including NaN, Inf, overflow and
// garbage. It exits 0 with a JSON estimate whose sizes are finite and not
// negative, or 2 (usage) with a message; never a panic, never exit 1.
func FuzzDedupSizeFlags(f *testing.F) {
	f.Add("10000", "168h", "36", "1.5", "0.01")
	f.Add("1", "1ns", "1", "1", "0.5")
	f.Add("NaN", "1h", "36", "1.5", "0.01")
	f.Add("1e308", "2562047h", "9223372036854775807", "1e308", "1e-300")
	f.Add("10", "1h", "36", "NaN", "0.01")
	f.Add("10", "1h", "36", "+Inf", "0.01")
	f.Add("10", "-1h", "-36", "0.5", "1")
	f.Add("0x1p-2", "1.5h", "036", "1", "0x1p-10")
	f.Add("", "", "", "", "")
	f.Add("abc", "9999999999999999999h", "1e3", "-0", "-0")
	f.Fuzz(func(t *testing.T, rate, window, idBytes, overhead, fp string) {
		args := []string{"-o", "json", "dedup", "size", "--rate=" + rate, "--window=" + window, "--id-bytes=" + idBytes}
		if overhead != "" {
			args = append(args, "--overhead="+overhead)
		}
		if fp != "" {
			args = append(args, "--fp-rate="+fp)
		}
		out, errOut, code := runCLI(t, nil, args...)
		switch code {
		case exitUsage:
			if strings.TrimSpace(errOut) == "" {
				t.Fatalf("%q: usage exit without a message", args)
			}
			return
		case exitOK:
		default:
			t.Fatalf("%q: exit %d, want 0 or %d; stderr %s", args, code, exitUsage, errOut)
		}
		var got struct {
			Bytes    float64 `json:"bytes"`
			Entries  float64 `json:"entries"`
			Estimate struct {
				SortedSet struct{ Bytes float64 } `json:"sorted_set"`
				Bloom     struct{ Bytes float64 } `json:"bloom"`
			} `json:"estimate"`
		}
		if err := json.Unmarshal([]byte(out), &got); err != nil {
			t.Fatalf("%q: output is not JSON (%v):\n%s", args, err, out)
		}
		for _, v := range []float64{got.Bytes, got.Entries, got.Estimate.SortedSet.Bytes, got.Estimate.Bloom.Bytes} {
			if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
				t.Fatalf("%q: a size of %v in %s", args, v, out)
			}
		}
	})
}
