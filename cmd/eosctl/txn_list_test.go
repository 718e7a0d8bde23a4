package main

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
)

func TestTxnListShowsOpenTransaction(t *testing.T) {
	_, addr := newCluster(t, kfake.SeedTopics(2, "orders"))
	produceCommitted(t, addr, "orders", "finished", 1)
	openTxn(t, addr, "orders", "app-1")
	time.Sleep(20 * time.Millisecond) // so the open transaction has an age

	out, errOut, code := runCLI(t, nil, "--brokers", addr, "txn", "list")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if !strings.Contains(out, "app-1") || !strings.Contains(out, "Ongoing") || !strings.Contains(out, "finished") {
		t.Errorf("table lacks the transactions:\n%s", out)
	}

	out, errOut, code = runCLI(t, nil, "--brokers", addr, "-o", "json", "txn", "list", "--state", "ongoing")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var got []txnJSON
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, out)
	}
	if len(got) != 1 || got[0].TransactionalID != "app-1" || got[0].State != "Ongoing" {
		t.Fatalf("--state ongoing: got %+v", got)
	}
	if got[0].ProducerID < 0 || got[0].AgeMillis < 20 || got[0].StartTime == nil {
		t.Errorf("want producer id, age and start time: %+v", got[0])
	}

	for _, tc := range []struct {
		args []string
		want []string // transactional ids expected
	}{
		{[]string{"--state", "Empty"}, []string{"finished"}},
		{[]string{"--pattern", "^app-"}, []string{"app-1"}},
		{[]string{"--pattern", "^nothing"}, nil},
		{[]string{"--older-than", "1h"}, nil},
		{[]string{"--older-than", "10ms"}, []string{"app-1"}},
		{[]string{"--producer-id", "999999"}, nil},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			out, errOut, code := runCLI(t, nil, append([]string{"--brokers", addr, "-o", "json", "txn", "list"}, tc.args...)...)
			if code != exitOK {
				t.Fatalf("exit %d: %s", code, errOut)
			}
			var got []txnJSON
			if err := json.Unmarshal([]byte(out), &got); err != nil {
				t.Fatalf("not JSON: %v\n%s", err, out)
			}
			var ids []string
			for _, g := range got {
				ids = append(ids, g.TransactionalID)
			}
			if strings.Join(ids, ",") != strings.Join(tc.want, ",") {
				t.Errorf("got %v, want %v", ids, tc.want)
			}
		})
	}
}

func TestTxnListBadFlags(t *testing.T) {
	for _, args := range [][]string{
		{"txn", "list", "--state", "Running"},
		{"txn", "list", "--pattern", "("},
	} {
		if _, errOut, code := runCLI(t, nil, args...); code != exitUsage {
			t.Errorf("%v: exit %d, want %d: %s", args, code, exitUsage, errOut)
		}
	}
}
