package main

import (
	"bytes"
	"testing"
	"time"

	"github.com/eosflow/eosflow/codec"
	"github.com/eosflow/eosflow/eostest"
	"github.com/eosflow/eosflow/processor"
)

// A payment that is not JSON is dead-lettered with the reason and where
// it was read (an account keeps its partition through the pipeline); the
// replay pipeline sends it back there as it was read.
func TestPoisonPaymentDeadLetteredAndReplayed(t *testing.T) {
	d := eostest.New(t, pipeline(), eostest.DefaultPartitions(3))
	at := time.Date(2026, 1, 2, 15, 4, 5, 0, time.UTC)
	payments := []string{`{"id":"p-1","account":"ada","cents":107}`, `{"id":"p-2","acc`, `{"id":"p-3","account":"ada","cents":9}`}
	for _, p := range payments {
		if err := d.Pipe("payments", []byte("ada"), []byte(p), eostest.Timestamp(at), eostest.Header("origin", []byte("shop"))); err != nil {
			t.Fatal(err)
		}
	}
	valid := eostest.Output(d, "payments-valid", codec.JSON[Payment]()).ReadAll()
	if len(valid) != 2 || valid[0].Value.ID != "p-1" || valid[1].Value.ID != "p-3" {
		t.Fatalf("valid payments: %+v", valid)
	}
	dls := d.DeadLetters("payments-dlq")
	if len(dls) != 1 {
		t.Fatalf("%d dead letters, want 1", len(dls))
	}
	dl := dls[0]
	if dl.Node != "payments" || dl.Topic != "payments" || dl.Offset != 1 || dl.Partition != valid[0].Partition ||
		string(dl.Value) != payments[1] || dl.Error == "" {
		t.Errorf("dead letter: %+v", dl)
	}

	r := eostest.New(t, replay(), eostest.Topics("payments"))
	if err := r.Pipe("payments-dlq", dl.Key, dl.Value, eostest.Timestamp(at), eostest.Headers(dl.Headers...)); err != nil {
		t.Fatal(err)
	}
	back := eostest.Output(r, "payments", codec.Bytes()).ReadAll()
	if len(back) != 1 {
		t.Fatalf("replayed %d records, want 1", len(back))
	}
	b := back[0]
	if string(b.Key) != "ada" || string(b.Value) != payments[1] || !b.Timestamp.Equal(at) ||
		len(b.Headers) != 1 || b.Headers[0].Key != "origin" || !bytes.Equal(b.Headers[0].Value, []byte("shop")) {
		t.Errorf("replayed: %+v, want the record as first read, its own headers only", b)
	}
}

// The replay leaves an expired entry's dead letter (a join's unmatched
// record, a window's result) alone: it was read from no topic, and the
// record its headers name only expired it.
func TestExpiredEntryNotReplayed(t *testing.T) {
	r := eostest.New(t, replay(), eostest.Topics("payments", "orders"))
	headers := []processor.Header{
		{Key: processor.HeaderNode, Value: []byte("match")},
		{Key: processor.HeaderError, Value: []byte("no payment")},
		{Key: processor.HeaderExpiryNode, Value: []byte("match")},
		{Key: processor.HeaderExpiryWhat, Value: []byte("unmatched left record")},
		{Key: processor.HeaderExpirySourceTopic, Value: []byte("orders")},
		{Key: processor.HeaderExpirySourcePartition, Value: []byte("0")},
		{Key: processor.HeaderExpirySourceOffset, Value: []byte("2")},
	}
	if err := r.Pipe("payments-dlq", []byte("o1"), []byte("bad"), eostest.Headers(headers...)); err != nil {
		t.Fatalf("Pipe: %v, want the expired entry's letter left alone", err)
	}
	for _, topic := range []string{"payments", "orders"} {
		if back := eostest.Output(r, topic, codec.Bytes()).ReadAll(); len(back) != 0 {
			t.Fatalf("replayed %v to %s, want nothing", back, topic)
		}
	}
}
