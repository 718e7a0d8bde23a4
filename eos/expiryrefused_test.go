package eos_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/eosflow/eosflow/codec"
	"github.com/eosflow/eosflow/config"
	"github.com/eosflow/eosflow/processor"
	"github.com/eosflow/eosflow/state"
	"github.com/eosflow/eosflow/tools/conformance"
	"github.com/eosflow/eosflow/tools/kafkatest"
	"github.com/eosflow/eosflow/topology"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The broker refuses the output of an outer join's unmatched record (its
// old timestamp is past message.timestamp.before.max.ms): the entry goes
// through the refusing sink's DeadLetter policy itself, and the record
// whose stream time expired it, and those after it, are processed as if
// nothing had been refused, never dead-lettered as themselves.
func TestRefusedExpiryOutputChargedToTheEntry(t *testing.T) {
	env := kafkatest.Fake(t)
	env.CreateTopics(t, 1, "orders", "payments", "matched", "lonely", "lonely-dlq")
	top := topology.New()
	orders := topology.Source(top, "orders", codec.String())
	payments := topology.Source(top, "payments", codec.String())
	joined := topology.OuterJoinStreams(orders, payments, "match", topology.Within(10*time.Second).Grace(5*time.Second),
		func(_ context.Context, _ []byte, o, p string, _, _ bool) (string, error) { return o + "+" + p, nil },
		state.Memory(), codec.String(), codec.String())
	pairs := topology.Filter(joined, "pairs", func(_ []byte, v string) bool { return !strings.HasPrefix(v, "+") && !strings.HasSuffix(v, "+") })
	alone := topology.Filter(joined, "alone", func(_ []byte, v string) bool { return strings.HasPrefix(v, "+") || strings.HasSuffix(v, "+") })
	topology.To(pairs, "matched", codec.String(), topology.Named("out"))
	topology.To(alone, "lonely", codec.String(), topology.Named("lonely-out"))
	top.OnError("lonely-out", topology.DeadLetter("lonely-dlq"))
	h := env.Fake.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Topic: "lonely", Err: kerr.InvalidTimestamp, Count: -1})
	x := conformance.Start(t, env.Config("app", "a", config.ExactlyOnce), top)

	cl := env.Client(t)
	produceAt(t, cl, "orders", 10, "o1", "lonely")
	produceAt(t, cl, "payments", 12, "o2", "pay2")
	produceAt(t, cl, "orders", 13, "o2", "order2")
	x.WaitCommitted(t, 3, 60*time.Second)
	produceAt(t, cl, "orders", 40, "t1", "tick")
	produceAt(t, cl, "orders", 41, "o3", "order3")
	produceAt(t, cl, "payments", 42, "o3", "pay3")
	x.WaitCommitted(t, 6, 60*time.Second)

	if h.Hits() == 0 {
		t.Fatal("the fault never hit; the test proves nothing")
	}
	var got []string
	for _, r := range conformance.Drain(t, env, "matched", 2) {
		got = append(got, string(r.Key)+"="+string(r.Value))
	}
	slices.Sort(got)
	if want := []string{"o2=order2+pay2", "o3=order3+pay3"}; !slices.Equal(got, want) {
		t.Fatalf("matched %v, want %v", got, want)
	}
	dls := conformance.Drain(t, env, "lonely-dlq", 1)
	hs := make([]processor.Header, len(dls[0].Headers))
	for i, hd := range dls[0].Headers {
		hs[i] = processor.Header{Key: hd.Key, Value: hd.Value}
	}
	dl, _ := processor.ParseDeadLetter(hs)
	if len(dls) != 1 || string(dls[0].Key) != "o1" || string(dls[0].Value) != "lonely" || !dls[0].Timestamp.Equal(time.Unix(10, 0)) ||
		dl.Node != "lonely-out" || dl.ExpiryNode != "match" || !strings.Contains(dl.Error, "INVALID_TIMESTAMP") {
		t.Fatalf("dead letters %+v (%+v): want the entry o1=lonely at 10 s, naming the sink, the join and the broker's error", dls, dl)
	}
	if s := x.R.Stats(); s.ExpiriesDeadLettered != 1 || s.DeadLettered != 0 || s.Skipped != 0 || s.RecordsIn != 6 {
		t.Fatalf("Stats %+v: want the entry dead-lettered and no input record dead-lettered or skipped", s)
	}
}
