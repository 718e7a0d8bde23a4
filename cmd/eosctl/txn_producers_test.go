package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kfake"
)

func TestTxnProducersShowsOpenTransaction(t *testing.T) {
	_, addr := newCluster(t, kfake.SeedTopics(2, "orders"))
	produceCommitted(t, addr, "orders", "finished", 2) // offsets 0-3: records and markers
	openTxn(t, addr, "orders", "app-1")

	out, errOut, code := runCLI(t, nil, "--brokers", addr, "-o", "json", "txn", "producers", "--topic", "orders")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var got []producerJSON
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, out)
	}
	if len(got) != 1 {
		t.Fatalf("want the one open producer, got %+v", got)
	}
	p := got[0]
	if p.Topic != "orders" || p.Partition != 0 || p.CurrentTxnStartOffset != 4 || p.LastSequence != 0 || p.LastTimestamp == nil {
		t.Errorf("got %+v, want partition 0, txn start offset 4, last sequence 0", p)
	}

	out, _, code = runCLI(t, nil, "--brokers", addr, "txn", "producers", "--topic", "orders", "--partition", "1")
	if code != exitOK || strings.Count(out, "\n") != 1 {
		t.Errorf("partition 1 has no producers; exit %d, output:\n%s", code, out)
	}
}

func TestTxnProducersUnknownTopic(t *testing.T) {
	_, addr := newCluster(t, kfake.SeedTopics(1, "orders"))
	for _, args := range [][]string{
		{"--topic", "nope"},
		{"--topic", "orders", "--partition", "7"},
	} {
		_, errOut, code := runCLI(t, nil, append([]string{"--brokers", addr, "txn", "producers"}, args...)...)
		if code != exitFailure || !strings.Contains(errOut, "check --topic") && !strings.Contains(errOut, "has no partition 7") {
			t.Errorf("%v: exit %d, stderr %s", args, code, errOut)
		}
	}
}
