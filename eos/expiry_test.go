package eos_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/eosflow/eosflow/codec"
	"github.com/eosflow/eosflow/config"
	"github.com/eosflow/eosflow/processor"
	"github.com/eosflow/eosflow/state"
	"github.com/eosflow/eosflow/tools/conformance"
	"github.com/eosflow/eosflow/tools/kafkatest"
	"github.com/eosflow/eosflow/topology"
	"github.com/twmb/franz-go/pkg/kgo"
)

// produceAt writes key=value to topic, partition 0, at sec seconds of
// event time, and waits until it is written.
func produceAt(t *testing.T, cl *kgo.Client, topic string, sec int, key, value string) {
	t.Helper()
	r := &kgo.Record{Topic: topic, Key: []byte(key), Value: []byte(value), Timestamp: time.Unix(int64(sec), 0)}
	if err := cl.ProduceSync(context.Background(), r).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

// In the runtime, an outer join's unmatched record whose function fails
// under DeadLetter is dead-lettered once, itself, in the transaction of
// the batch that expired it; the record that expired it and those after
// it join as if nothing had failed, and Stats counts the expiry apart
// from the input records.
func TestUnmatchedRecordDeadLetteredByTheRuntime(t *testing.T) {
	env := kafkatest.Fake(t)
	env.CreateTopics(t, 1, "orders", "payments", "matched", "match-dlq")
	top := topology.New()
	orders := topology.Source(top, "orders", codec.String())
	payments := topology.Source(top, "payments", codec.String())
	matched := topology.OuterJoinStreams(orders, payments, "match", topology.Within(10*time.Second).Grace(5*time.Second),
		func(_ context.Context, _ []byte, o, p string, hasO, hasP bool) (string, error) {
			if o == "bad" && !hasP {
				return "", errors.New("no payment for a bad order")
			}
			return o + "+" + p, nil
		}, state.Memory(), codec.String(), codec.String())
	topology.To(matched, "matched", codec.String(), topology.Named("out"))
	top.OnError("match", topology.DeadLetter("match-dlq"))
	x := conformance.Start(t, env.Config("app", "a", config.ExactlyOnce), top)

	cl := env.Client(t)
	produceAt(t, cl, "orders", 10, "o1", "bad")
	produceAt(t, cl, "payments", 12, "o2", "pay2")
	produceAt(t, cl, "orders", 13, "o2", "order2")
	x.WaitCommitted(t, 3, 60*time.Second) // stream time 13 s before the tick, so no payment is late
	produceAt(t, cl, "orders", 40, "t1", "tick")
	produceAt(t, cl, "orders", 41, "o3", "order3")
	produceAt(t, cl, "payments", 42, "o3", "pay3")
	x.WaitCommitted(t, 6, 60*time.Second)

	var got []string
	for _, r := range conformance.Drain(t, env, "matched", 2) {
		got = append(got, string(r.Key)+"="+string(r.Value))
	}
	slices.Sort(got)
	if want := []string{"o2=order2+pay2", "o3=order3+pay3"}; !slices.Equal(got, want) {
		t.Fatalf("matched %v, want %v", got, want)
	}
	dls := conformance.Drain(t, env, "match-dlq", 1)
	hs := make([]processor.Header, len(dls[0].Headers))
	for i, h := range dls[0].Headers {
		hs[i] = processor.Header{Key: h.Key, Value: h.Value}
	}
	dl, ok := processor.ParseDeadLetter(hs)
	if len(dls) != 1 || !ok || string(dls[0].Key) != "o1" || string(dls[0].Value) != "bad" || !dls[0].Timestamp.Equal(time.Unix(10, 0)) ||
		dl.Node != "match" || dl.ExpiryNode != "match" || dl.ExpiryWhat != "unmatched left record" || dl.ExpirySourceTopic != "orders" || dl.Topic != "" {
		t.Fatalf("dead letters %+v (%+v): want o1=bad at 10 s, naming the join", dls, dl)
	}
	if s := x.R.Stats(); s.ExpiriesDeadLettered != 1 || s.DeadLettered != 0 || s.Skipped != 0 || s.RecordsIn != 6 {
		t.Fatalf("Stats %+v: want one expiry dead-lettered and no input record dead-lettered or skipped", s)
	}
}
