package main

import (
	"errors"
	"testing"

	"github.com/eosflow/eosflow/codec"
	"github.com/eosflow/eosflow/eostest"
	"github.com/eosflow/eosflow/processor"
)

// Purchases go to the partition of their store, page events to a topic
// per type in their user's partition, and other events nowhere.
func TestFanout(t *testing.T) {
	// As run makes them: three partitions, the per-type topics included.
	d := eostest.New(t, pipeline(), eostest.DefaultPartitions(3), eostest.Topics("events-click", "events-view"))
	in := eostest.Input(d, "events", codec.JSON[Event]())
	for _, e := range []Event{
		{Type: "purchase", User: "ada", Store: 4, Cents: 900},
		{Type: "purchase", User: "ada", Store: 5, Cents: 100},
		{Type: "click", User: "ada", Store: 4},
		{Type: "view", User: "grace", Store: 1},
		{Type: "heartbeat", User: "ada"},
	} {
		if err := in.Pipe(e.User, e); err != nil {
			t.Fatal(err)
		}
	}
	purchases := eostest.Output(d, "purchases", codec.JSON[Event]()).ReadAll()
	if len(purchases) != 2 || purchases[0].Partition != 4%3 || purchases[1].Partition != 5%3 {
		t.Errorf("purchases: %+v, want stores 4 and 5 in partitions 1 and 2", purchases)
	}
	clicks := eostest.Output(d, "events-click", codec.JSON[Event]()).ReadAll()
	views := eostest.Output(d, "events-view", codec.JSON[Event]()).ReadAll()
	if len(clicks) != 1 || len(views) != 1 || views[0].Value.User != "grace" {
		t.Fatalf("clicks %+v, views %+v", clicks, views)
	}
	// Keyed by user, as the input: Kafka's hash puts "ada" in partition 2 of 3.
	if clicks[0].Partition != 2 || string(clicks[0].Key) != "ada" {
		t.Errorf("click of ada in partition %d, want 2", clicks[0].Partition)
	}
	if s := d.Stats(); s.Processed != 5 {
		t.Errorf("Stats: %+v", s)
	}
}

// Without the per-type topics, a page event fails its sink: under the
// default Fail policy the record is the error, as Run would stop with.
func TestFanoutNeedsItsTopics(t *testing.T) {
	d := eostest.New(t, pipeline())
	err := eostest.Input(d, "events", codec.JSON[Event]()).Pipe("ada", Event{Type: "click", User: "ada"})
	var re *processor.RecordError
	if !errors.As(err, &re) || !errors.Is(err, processor.ErrUnknownTopic) {
		t.Fatalf("Pipe: %v, want a RecordError wrapping ErrUnknownTopic", err)
	}
}
