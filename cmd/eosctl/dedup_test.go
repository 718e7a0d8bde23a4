package main

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestDedupSizeArticleExample(t *testing.T) {
	out, errOut, code := runCLI(t, nil, "dedup", "size", "--rate", "10000", "--window", "168h",
		"--id-bytes", "36", "--overhead", "1.5", "--sorted-set-window", "1h")
	if code != exitOK {
		t.Fatalf("exit %d, stderr %s", code, errOut)
	}
	for _, want := range []string{"327 GB", "2.88 GB", "36.0M", "80 B"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if !strings.Contains(errOut, "drops it") {
		t.Errorf("no Bloom filter warning on stderr: %q", errOut)
	}
}

func TestDedupSizeJSON(t *testing.T) {
	// 10,000 msg/s for 1000 s is the article's 10 million ids for the
	// Bloom filter example.
	out, errOut, code := runCLI(t, nil, "-o", "json", "dedup", "size", "--rate", "10000", "--window", "1000s", "--id-bytes", "36")
	if code != exitOK {
		t.Fatalf("exit %d, stderr %s", code, errOut)
	}
	var got struct {
		Bytes    float64 `json:"bytes"`
		Estimate struct {
			Bloom struct {
				Bytes float64 `json:"bytes"`
			} `json:"bloom"`
		} `json:"estimate"`
		Warnings []string `json:"warnings"`
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, out)
	}
	if got.Bytes != 10000*1000*36*1.5 {
		t.Errorf("bytes = %v", got.Bytes)
	}
	if mb := got.Estimate.Bloom.Bytes / 1e6; mb < 11.9 || mb > 12.1 {
		t.Errorf("bloom = %.2f MB, want ≈ 12 MB", mb)
	}
	if len(got.Warnings) == 0 {
		t.Error("no warnings in JSON")
	}
}

func TestDedupSizeUsage(t *testing.T) {
	for _, args := range [][]string{
		{"dedup", "size", "--rate", "10"},
		{"dedup", "size", "--rate", "-1", "--window", "1h", "--id-bytes", "36"},
		{"dedup", "size", "--rate", "1", "--window", "1h", "--id-bytes", "36", "--fp-rate", "2"},
		{"dedup", "size", "--rate", "abc"},
	} {
		if _, errOut, code := runCLI(t, nil, args...); code != exitUsage {
			t.Errorf("%v: exit %d, want %d (stderr %s)", args, code, exitUsage, errOut)
		}
	}
}

// TestDedupSizeStore checks --store: the measured per-entry cost of each
// store (TestStoreSizesMatchServers in package dedup holds it to the real
// servers) and the settings that keep it from losing ids.
func TestDedupSizeStore(t *testing.T) {
	for store, want := range map[string][]string{
		"redis":            {"maxmemory-policy noeviction", `redisdedup.Prefix("eosflow:dedup:")`, "DedupRetention(24*time.Hour)"},
		"redis-sorted-set": {"ZREMRANGEBYSCORE", "Cluster"},
		"postgres":         {"pgdedup.New", "Purge every"},
		"bloom": {"k = 8 hashes", "172.8M ids", "maxmemory", "noeviction",
			"redisdedup.NewBloom(url, name, dedup.BloomOptions{Entries: 172800000, FalsePositiveRate: 0.01, Retention: 24*time.Hour}), topology.DedupRetention(24*time.Hour), topology.AcceptFalsePositives()",
			"1 in 100 new ids"},
	} {
		out, errOut, code := runCLI(t, nil, "dedup", "size", "--rate", "2000", "--window", "24h", "--id-bytes", "36", "--store", store)
		if code != exitOK {
			t.Fatalf("--store %s: exit %d, stderr %s", store, code, errOut)
		}
		for _, w := range want {
			if !strings.Contains(out, w) {
				t.Errorf("--store %s: output lacks %q:\n%s", store, w, out)
			}
		}
	}
	out, errOut, code := runCLI(t, nil, "-o", "json", "dedup", "size", "--rate", "2000", "--window", "24h", "--id-bytes", "36", "--store", "redis", "--prefix", "p:")
	if code != exitOK {
		t.Fatalf("exit %d, stderr %s", code, errOut)
	}
	var got struct {
		Store struct {
			Bytes float64 `json:"bytes"`
		} `json:"store"`
		Settings []string `json:"settings"`
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, out)
	}
	if want := 2000.0 * 86400 * (36 + 2 + 104); got.Store.Bytes != want || len(got.Settings) == 0 {
		t.Errorf("store bytes %v, %d settings; want %v and some", got.Store.Bytes, len(got.Settings), want)
	}
	if _, _, code := runCLI(t, nil, "dedup", "size", "--rate", "1", "--window", "1h", "--id-bytes", "36", "--store", "memcached"); code == exitOK {
		t.Error("--store memcached: exit 0, want a usage error")
	}
}
