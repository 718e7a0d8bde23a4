package conformance

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/eosflow/eosflow/codec"
	"github.com/eosflow/eosflow/config"
	"github.com/eosflow/eosflow/eos"
	"github.com/eosflow/eosflow/state"
	"github.com/eosflow/eosflow/tools/kafkatest"
	"github.com/eosflow/eosflow/topology"
	"github.com/twmb/franz-go/pkg/kgo"
)

// streamJoinPartitions is the partition count of each topic of a stream
// join scenario.
const streamJoinPartitions = 3

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
	orders, payments := ordersAndPayments(600, 1, 2)
	want, _, _ := streamJoinModel(orders, payments, matchWithin)
	_, _, out := runStreamJoin(t, env, "match", orders, payments, func(in1, in2, out string) *topology.Topology {
		return StreamJoinTopology(in1, in2, out, e)
	})
	onceEach(t, Drain(t, env, out, len(want)), want)
	t.Logf("%d pairs joined exactly once from %d orders and %d payments", len(want), len(orders), len(payments))
}

// ordersAndPayments makes n orders of ids o000…, one every 100 ms of
// event time, each with lo to hi payments of its id up to 8 s before or
// after it, the same for every run.
func ordersAndPayments(n, lo, hi int) (orders, payments []timedRecord) {
	rng := rand.New(rand.NewPCG(11, 13))
	base := eventBase()
	for i := 0; i < n; i++ {
		id := fmt.Sprintf("o%03d", i)
		at := base.Add(time.Duration(i) * 100 * time.Millisecond)
		orders = append(orders, timedRecord{id, "order-" + id, at})
		for j := 0; j < lo+rng.IntN(hi-lo+1); j++ {
			d := time.Duration(rng.IntN(16000)-8000) * time.Millisecond
			payments = append(payments, timedRecord{id, fmt.Sprintf("pay-%s-%d", id, j), at.Add(d)})
		}
	}
	return orders, payments
}

// streamJoinModel computes in plain Go what joining orders with payments
// of the same key within d gives: the pairs "<order>+<payment>", and the
// orders and the payments that join nothing.
func streamJoinModel(orders, payments []timedRecord, d time.Duration) (pairs map[string]bool, lonelyOrders, lonelyPayments []timedRecord) {
	pairs = map[string]bool{}
	paid := map[string]bool{}
	for _, o := range orders {
		joined := false
		for _, p := range payments {
			if p.key == o.key && o.ts.Sub(p.ts).Abs() <= d {
				pairs[o.value+"+"+p.value] = true
				paid[p.value], joined = true, true
			}
		}
		if !joined {
			lonelyOrders = append(lonelyOrders, o)
		}
	}
	for _, p := range payments {
		if !paid[p.value] {
			lonelyPayments = append(lonelyPayments, p)
		}
	}
	return pairs, lonelyOrders, lonelyPayments
}

// runStreamJoin creates the topics of a stream join scenario and runs the
// topology build makes from them through the faults every stream join
// scenario shares: half of orders and payments are read by one instance,
// which stops; it starts again beside a second instance, and the rest is
// read by the two. It returns once every record is read, with the
// instances "a" and "b" still running in f. Each instance gets opts.
func runStreamJoin(t *testing.T, env *kafkatest.Env, name string, orders, payments []timedRecord,
	build func(orders, payments, out string) *topology.Topology, opts ...eos.Option) (f *fleet, in1, out string) {
	names := topics(t, env, streamJoinPartitions, "orders", "payments", "matched")
	in1, in2, out := names[0], names[1], names[2]
	app := env.Name(name)
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
	f = newFleet(t, env, cfg, func() *topology.Topology { return build(in1, in2, out) }, opts...)
	n, half := len(orders), len(payments)/2
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
	return f, in1, out
}

// onceEach fails t unless the values of recs are those of want, each
// once.
func onceEach(t *testing.T, recs []*kgo.Record, want map[string]bool) {
	t.Helper()
	got := map[string]bool{}
	for _, r := range recs {
		v := string(r.Value)
		if got[v] {
			t.Fatalf("%s came out twice", v)
		}
		if !want[v] {
			t.Fatalf("%s came out, but the model computed from the seed has no such result", v)
		}
		got[v] = true
	}
	if len(got) != len(want) {
		t.Fatalf("%d of %d results came out", len(got), len(want))
	}
}
