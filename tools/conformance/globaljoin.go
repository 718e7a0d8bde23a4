package conformance

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/eosflow/eosflow/codec"
	"github.com/eosflow/eosflow/config"
	"github.com/eosflow/eosflow/state"
	"github.com/eosflow/eosflow/tools/kafkatest"
	"github.com/eosflow/eosflow/topology"
	"github.com/twmb/franz-go/pkg/kgo"
)

// GlobalJoinTopology joins orders (keyed by order id, the value a product
// id) with the global table of products (keyed by product id), writing
// "<order id> by <product>" to out for each order whose product has a
// row. The table lives in a store of engine e.
func GlobalJoinTopology(orders, products, out string, e state.Engine) *topology.Topology {
	top := topology.New()
	os := topology.Source(top, orders, codec.String(), topology.Named("orders"))
	table := topology.GlobalTableFrom(top, products, codec.String(), e, topology.Named("products"))
	joined := topology.JoinGlobal(os, table, "price", func(_ []byte, product string) []byte { return []byte(product) },
		func(_ context.Context, key []byte, _ string, product string) (string, error) {
			return string(key) + " by " + product, nil
		})
	topology.To(joined, out, codec.String(), topology.Named("out"))
	return top
}

// produceTxn writes value(i) under key(i) for i in [from, to) to topic in
// one transaction of a producer with transactional id txnID, and commits
// it, or aborts it if abort.
func produceTxn(t *testing.T, env *kafkatest.Env, txnID, topic string, from, to int, key, value func(int) string, abort bool) {
	t.Helper()
	cl := env.Client(t, kgo.TransactionalID(txnID), kgo.DefaultProduceTopic(topic))
	defer cl.Close()
	ctx := context.Background()
	if err := cl.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	for i := from; i < to; i++ {
		cl.Produce(ctx, &kgo.Record{Topic: topic, Key: []byte(key(i)), Value: []byte(value(i))}, nil)
	}
	if err := cl.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if err := cl.EndTransaction(ctx, kgo.TransactionEndTry(!abort)); err != nil {
		t.Fatal(err)
	}
}

// GlobalJoinExactlyOnce joins orders with a global table of products
// while instance b joins (a rebalance) and instance a restarts, with the
// table pre-loaded and updated twice during the run, in transactions,
// beside an aborted one. The orders topic and the products topic have
// different partition counts: a global table needs no co-partitioning.
// Every order must come out exactly once, joined with a product value
// the products topic committed (never the aborted one); the orders
// produced after the last update committed, and after the running
// instance applied it (Stats.GlobalRecords), must join the last version.
func GlobalJoinExactlyOnce(t *testing.T, env *kafkatest.Env, e state.Engine) {
	const products, orders = 30, 3000
	names := topics(t, env, 3, "orders", "out")
	compact := "compact"
	table := env.Name("products")
	env.CreateTopicsWith(t, 2, map[string]*string{"cleanup.policy": &compact}, table)
	in, out := names[0], names[1]
	app := env.Name("global")
	cfg := env.Config(app, "a", config.ExactlyOnce)
	cfg.MaxBatchRecords = 150
	product := func(i int) string { return fmt.Sprintf("p%02d", i%products) }
	version := func(v string) func(int) string { return func(i int) string { return product(i) + "-" + v } }
	orderID := func(i int) string { return fmt.Sprintf("o%05d", i) }
	txn := env.Name("products-writer")

	produceTxn(t, env, txn, table, 0, products, product, version("v1"), false)
	produceTxn(t, env, txn, table, 0, products, product, version("aborted"), true)
	f := newFleet(t, env, cfg, func() *topology.Topology { return GlobalJoinTopology(in, table, out, e) })
	read := uint64(0)
	phase := func(what string, from, to int) {
		produceKeyed(t, env, in, from, to, orderID, product)
		read += uint64(to - from)
		Until(t, 120*time.Second, what, func() bool { return f.recordsIn() >= read })
	}
	a := f.start("a")
	phase("the first orders joined", 0, orders/3)
	b := f.start("b") // a rebalance, while the table changes
	produceTxn(t, env, txn, table, 0, products, product, version("v2"), false)
	phase("the second orders joined", orders/3, 2*orders/3)
	a.Stop()
	if err := a.Wait(t, 60*time.Second); err != nil {
		t.Fatal(err)
	}
	produceTxn(t, env, txn, table, 0, products, product, version("v3"), false)
	f.start("a") // loads the table, v3 included, before its first batch
	// b applies v3 between its batches: it has then applied v1, v2 and v3
	// (the aborted version is never delivered).
	Until(t, 120*time.Second, "b applied v3", func() bool { return b.R.Stats().GlobalRecords >= 3*products })
	last := 2 * orders / 3
	phase("every order joined", last, orders)

	checkGlobalJoin(t, Drain(t, env, out, orders), orders, last, orderID, product)
}

// checkGlobalJoin checks the outputs of GlobalJoinExactlyOnce: each order
// once, joined with a committed version of its product: the first third,
// processed before any update, with v1; the orders from last on with v3.
func checkGlobalJoin(t *testing.T, recs []*kgo.Record, orders, last int, orderID, product func(int) string) {
	t.Helper()
	got := map[string]string{}
	for _, r := range recs {
		id, joined, ok := strings.Cut(string(r.Value), " by ")
		if !ok || id != string(r.Key) {
			t.Fatalf("output %q (key %q) is not a joined order", r.Value, r.Key)
		}
		if prev, dup := got[id]; dup {
			t.Fatalf("order %s joined twice: %q and %q", id, prev, joined)
		}
		got[id] = joined
	}
	var wrong []string
	versions := map[string]int{}
	for i := 0; i < orders; i++ {
		joined, ok := got[orderID(i)]
		p, v, _ := strings.Cut(joined, "-")
		switch {
		case !ok:
			wrong = append(wrong, orderID(i)+": missing")
		case p != product(i) || !slices.Contains([]string{"v1", "v2", "v3"}, v):
			wrong = append(wrong, fmt.Sprintf("%s: joined %q, not a committed version of %s", orderID(i), joined, product(i)))
		case i < orders/3 && v != "v1":
			wrong = append(wrong, fmt.Sprintf("%s: joined %q, want v1, the only version before the updates", orderID(i), joined))
		case i >= last && v != "v3":
			wrong = append(wrong, fmt.Sprintf("%s: joined %q, want v3, committed before it was produced", orderID(i), joined))
		}
		versions[v]++
	}
	t.Logf("versions joined: %v", versions)
	if len(wrong) > 0 {
		t.Fatalf("%d of %d orders wrong (first ones: %v)", len(wrong), orders, wrong[:min(5, len(wrong))])
	}
	if versions["v1"] == 0 || versions["v2"] == 0 {
		t.Fatalf("versions joined %v: the pre-loaded table (v1) or the update during the run (v2) was never seen", versions)
	}
}
