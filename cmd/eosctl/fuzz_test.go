package main

import (
	"encoding/json"
	"math"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"
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
	f.Add("1e3", "2562047h", "9223372036854775807", "1e30", "1e-300") // the id bytes plus the per-entry overhead wrapped an int
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

// FuzzParseListen checks dev broker's --listen, --brokers-count and
// --partitions: arbitrary text and counts are a usage error or a concrete
// host with a port range that fits in 0..65535, never a panic or a range
// that wrapped around.
func FuzzParseListen(f *testing.F) {
	f.Add("127.0.0.1:9092", 1, 1)
	f.Add("127.0.0.1:0", 3, 1)
	f.Add("localhost:65535", 1, 1)
	f.Add("localhost:65535", 2, 1)
	f.Add("127.0.0.1:2", math.MaxInt, 1)
	f.Add("127.0.0.1:9092", math.MinInt, 1)
	f.Add("[::1]:9092", 1, 0)
	f.Add("0.0.0.0:9092", 1, 1)
	f.Add("[::]:1", 1, 1)
	f.Add(":9092", 1, 1)
	f.Add("nohost", 1, 1)
	f.Add("h:-1", 1, 1)
	f.Add("h:99999999999999999999", 1, 1)
	f.Add("h:+1", 1, 1)
	f.Add("h\xff:1", 1, 1)
	f.Fuzz(func(t *testing.T, listen string, count, partitions int) {
		host, port, err := parseListen(listen, count, partitions)
		if err != nil {
			if _, ok := err.(usageError); !ok {
				t.Fatalf("parseListen(%q, %d, %d): %v is not a usage error", listen, count, partitions, err)
			}
			return
		}
		if count < 1 || partitions < 1 || host == "" || port < 0 || int64(port)+int64(count)-1 > 65535 {
			t.Fatalf("parseListen(%q, %d, %d) accepted host %q port %d", listen, count, partitions, host, port)
		}
		if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
			t.Fatalf("parseListen(%q) accepted the unspecified address %q", listen, host)
		}
	})
}

// FuzzMsDuration checks that a broker's millisecond setting, whatever it
// holds, becomes a duration of the same sign, exact when it fits.
func FuzzMsDuration(f *testing.F) {
	for _, s := range []string{"60000", "0", "-1", "900000", "9223372036854775807", "-9223372036854775808", "9223372036855", "9223372036854", "1e3", "", " 1", "+5"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		d, ok := msDuration(v)
		ms, err := strconv.ParseInt(v, 10, 64)
		if ok != (err == nil) {
			t.Fatalf("msDuration(%q) ok = %v, but ParseInt says %v", v, ok, err)
		}
		if !ok {
			return
		}
		if (d > 0) != (ms > 0) || (d < 0) != (ms < 0) {
			t.Fatalf("msDuration(%q) = %v: the sign flipped", v, d)
		}
		if ms/1000 < math.MaxInt64/int64(time.Second) && ms/1000 > math.MinInt64/int64(time.Second) && d.Milliseconds() != ms {
			t.Fatalf("msDuration(%q) = %v, want %d ms exactly", v, d, ms)
		}
	})
}
