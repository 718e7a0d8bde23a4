package conformance

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/eosflow/eosflow/codec"
	"github.com/eosflow/eosflow/config"
	"github.com/eosflow/eosflow/state"
	"github.com/eosflow/eosflow/tools/kafkatest"
	"github.com/eosflow/eosflow/topology"
	"github.com/twmb/franz-go/pkg/kgo"
)

// matchWithin is how far apart an order and its payment may be to match.
const matchWithin = 5 * time.Second

// StreamJoinTopology matches orders with payments of the same key (order
// id) within matchWithin of event time, writing "<order>+<payment>" to
// out. The grace is long enough that no record of the scenario expires
// or is late, whatever order the two topics are read in.
func StreamJoinTopology(orders, payments, out string, e state.Engine) *topology.Topology {
	top := topology.New()
	ords := topology.Source(top, orders, codec.String(), topology.Named("orders"))
	ps := topology.Source(top, payments, codec.String(), topology.Named("payments"))
	matched := topology.JoinStreams(ords, ps, "match", topology.Within(matchWithin).Grace(time.Hour),
		func(_ context.Context, _ []byte, o, p string) (string, error) { return o + "+" + p, nil }, e, codec.String(), codec.String())
	topology.To(matched, out, codec.String(), topology.Named("out"))
	return top
}

type timedRecord struct {
	key, value string
	ts         time.Time
}

// StreamJoinExactlyOnce matches orders with payments while the pipeline
// restarts and a second instance joins: the committed output must hold
// each pair of an order and a payment of its id within matchWithin exactly
// once, and no other, as computed from the seed in plain Go. Stores use
// engine e.
func StreamJoinExactlyOnce(t *testing.T, env *kafkatest.Env, e state.Engine) {
	const n, partitions = 600, 3
	rng := rand.New(rand.NewPCG(11, 13))
	base := eventBase()
	var orders, payments []timedRecord
	want := map[string]bool{}
	for i := 0; i < n; i++ {
		id := fmt.Sprintf("o%03d", i)
		at := base.Add(time.Duration(i) * 100 * time.Millisecond)
		orders = append(orders, timedRecord{id, "order-" + id, at})
		for j := 0; j < 1+rng.IntN(2); j++ {
			d := time.Duration(rng.IntN(16000)-8000) * time.Millisecond
			p := timedRecord{id, fmt.Sprintf("pay-%s-%d", id, j), at.Add(d)}
			payments = append(payments, p)
			if d.Abs() <= matchWithin {
				want["order-"+id+"+"+p.value] = true
			}
		}
	}
	names := topics(t, env, partitions, "orders", "payments", "matched")
	in1, in2, out := names[0], names[1], names[2]
	app := env.Name("match")
	cfg := env.Config(app, "a", config.ExactlyOnce)
	cfg.MaxBatchRecords = 100
	produce := func(topic string, recs []timedRecord) {
		cl := env.Client(t)
		for _, r := range recs {
			cl.Produce(context.Background(), &kgo.Record{Topic: topic, Key: []byte(r.key), Value: []byte(r.value), Timestamp: r.ts}, nil)
		}
		if err := cl.Flush(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	f := newFleet(t, env, cfg, func() *topology.Topology { return StreamJoinTopology(in1, in2, out, e) })
	half := len(payments) / 2
	produce(in1, orders[:n/2])
	produce(in2, payments[:half])
	first := f.start("a")
	Until(t, 120*time.Second, "the first half read", func() bool { return f.recordsIn() >= uint64(n/2+half) })
	first.Stop()
	if err := first.Wait(t, 60*time.Second); err != nil {
		t.Fatal(err)
	}
	f.start("a")
	f.start("b")
	checkCoPartitioned(t, env, app, in1, in2)
	produce(in1, orders[n/2:])
	produce(in2, payments[half:])
	Until(t, 120*time.Second, "every record read", func() bool { return f.recordsIn() >= uint64(n+len(payments)) })

	got := map[string]bool{}
	for _, r := range Drain(t, env, out, len(want)) {
		v := string(r.Value)
		if got[v] {
			t.Fatalf("pair %s joined twice", v)
		}
		if !want[v] {
			t.Fatalf("pair %s joined, but its records are more than %s apart or do not exist", v, matchWithin)
		}
		got[v] = true
	}
	if len(got) != len(want) {
		t.Fatalf("%d of %d pairs joined", len(got), len(want))
	}
	t.Logf("%d pairs joined exactly once from %d orders and %d payments", len(want), n, len(payments))
}
