package engine_test

import (
	"context"
	"testing"
	"time"

	"github.com/eosflow/eosflow/internal/engine"
	"github.com/eosflow/eosflow/processor"
	"github.com/eosflow/eosflow/topology"
	"github.com/twmb/franz-go/pkg/kgo"
)

// A dead letter's headers parse back into where it came from and why, and
// stripping them leaves the headers the source record had.
func TestDeadLetterRoundTrip(t *testing.T) {
	calls := 0
	e, err := engine.New(build(topology.DeadLetter("dlq"), &calls))
	if err != nil {
		t.Fatal(err)
	}
	ts := time.UnixMilli(1_700_000_000_123)
	in := &kgo.Record{Topic: "in", Partition: 4, Offset: 99, Value: []byte("bad"), Timestamp: ts,
		Headers: []kgo.RecordHeader{{Key: "trace", Value: []byte("t1")}}}
	var dead *kgo.Record
	if _, err := e.Process(context.Background(), in, func(r *kgo.Record) { dead = r }); err != nil || dead == nil {
		t.Fatalf("no dead letter: %v", err)
	}
	dl, ok := processor.ParseDeadLetter(dead.Headers)
	if !ok || dl.Node != "check" || dl.Error != "boom" || dl.Topic != "in" || dl.Partition != 4 || dl.Offset != 99 || !dl.Timestamp.Equal(ts) || dl.Stack != "" {
		t.Fatalf("parsed %+v ok=%v", dl, ok)
	}
	if h := processor.WithoutDeadLetter(dead.Headers); len(h) != 1 || h[0].Key != "trace" {
		t.Fatalf("stripped headers %v, want only the source's", h)
	}
	if _, ok := processor.ParseDeadLetter(in.Headers); ok {
		t.Fatal("a record without dead-letter headers parsed as one")
	}
}
