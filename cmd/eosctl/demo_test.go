package main

import (
	"bytes"
	"context"
	"encoding/json"
	"testing"
)

func TestDemoJSON(t *testing.T) {
	var out, errb bytes.Buffer
	code := run(context.Background(), []string{"demo", "--records", "4000", "-o", "json"}, nil, &out, &errb)
	if code != exitOK {
		t.Fatalf("exit %d, stderr %s, stdout %s", code, errb.String(), out.String())
	}
	var v map[string]any
	if err := json.Unmarshal(out.Bytes(), &v); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, out.String())
	}
	for _, f := range []string{"records_in", "records_out", "missing", "duplicates", "aborted_transactions", "records_per_sec"} {
		if _, ok := v[f]; !ok {
			t.Errorf("field %q missing from %s", f, out.String())
		}
	}
	if v["missing"].(float64) != 0 || v["duplicates"].(float64) != 0 || v["aborted_transactions"].(float64) == 0 {
		t.Fatalf("verdict: %s", out.String())
	}
}

func TestDemoRejectsUnknownGuarantee(t *testing.T) {
	var out, errb bytes.Buffer
	if code := run(context.Background(), []string{"demo", "--guarantee", "twice"}, nil, &out, &errb); code != exitUsage {
		t.Fatalf("exit %d, want %d; stderr %s", code, exitUsage, errb.String())
	}
	if !bytes.Contains(errb.Bytes(), []byte("exactly-once")) {
		t.Fatalf("error should list the allowed values: %s", errb.String())
	}
}
