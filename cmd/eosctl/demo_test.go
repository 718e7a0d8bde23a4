package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"
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

// freeAddr returns a loopback address with a port nothing listens on now.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// With --metrics-addr the demo's pipeline serves its metrics while it
// runs, so a dashboard or `eosctl top` has something to show.
func TestDemoServesMetrics(t *testing.T) {
	addr := freeAddr(t)
	done := make(chan int, 1)
	var out, errb syncBuffer
	go func() {
		done <- run(context.Background(), []string{"demo", "--records", "20000", "--metrics-addr", addr, "-o", "json"}, nil, &out, &errb)
	}()
	committed := regexp.MustCompile(`(?m)^eosflow_batches_committed_total\{app="eosflow-demo-[0-9a-f]+",.*instance="demo"\} ([1-9][0-9]*)$`)
	seen := ""
	for seen == "" {
		select {
		case code := <-done:
			t.Fatalf("demo ended (exit %d) before /metrics on %s showed a committed batch; stderr %s", code, addr, errb.String())
		case <-time.After(20 * time.Millisecond):
		}
		resp, err := http.Get("http://" + addr + "/metrics")
		if err != nil {
			continue // not serving yet, or between restarts
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if m := committed.FindStringSubmatch(string(body)); m != nil {
			seen = m[0]
		}
	}
	t.Log(seen)
	if code := <-done; code != exitOK {
		t.Fatalf("exit %d, stderr %s", code, errb.String())
	}
}

// A metrics address that is taken fails the demo with a message naming it.
func TestDemoMetricsAddrInUse(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	_, errOut, code := runCLI(t, nil, "demo", "--records", "100", "--metrics-addr", ln.Addr().String())
	if code != exitFailure || !strings.Contains(errOut, "metrics_addr \""+ln.Addr().String()+"\"") {
		t.Fatalf("exit %d, stderr %s", code, errOut)
	}
}
