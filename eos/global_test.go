package eos_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/eosflow/eosflow/config"
	"github.com/eosflow/eosflow/eos"
	"github.com/eosflow/eosflow/state"
	"github.com/eosflow/eosflow/state/pebble"
	"github.com/eosflow/eosflow/tools/conformance"
	"github.com/eosflow/eosflow/tools/kafkatest"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

// With workers: 2 each worker loads the whole global table, all three
// partitions of its topic, before its first batch (its own log says how
// many records), and every order of every worker's partitions joins a
// product of any partition. An update and a tombstone during the run
// reach both workers: later orders join the new row, or none.
func TestGlobalTableWorkersHoldWholeTable(t *testing.T) {
	env := kafkatest.Fake(t)
	env.CreateTopics(t, 4, "orders", "out")
	env.CreateTopics(t, 3, "products")
	const products, orders = 60, 600
	var recs []*kgo.Record
	for p := range products {
		recs = append(recs, &kgo.Record{Topic: "products", Key: fmt.Appendf(nil, "p%02d", p), Value: fmt.Appendf(nil, "p%02d-v1", p)})
	}
	produceAll(t, env, recs)
	cfg := env.Config("app", "pod", config.ExactlyOnce)
	cfg.Workers = 2
	cfg.MaxBatchRecords = 50
	core, logs := observer.New(zapcore.InfoLevel)
	x := conformance.Start(t, cfg, conformance.GlobalJoinTopology("orders", "products", "out", pebble.New()), eos.Logger(zap.New(core)))
	waitWorkersAssigned(t, env, cfg, 2)
	loaded := map[int64]int64{} // records loaded, by worker
	for _, e := range logs.FilterMessage("global tables loaded").All() {
		loaded[e.ContextMap()["worker"].(int64)] = e.ContextMap()["records"].(int64)
	}
	if loaded[0] != products || loaded[1] != products {
		t.Fatalf("records loaded by worker: %v, want %d each", loaded, products)
	}
	order := func(from, to int) {
		recs = recs[:0]
		for i := from; i < to; i++ {
			recs = append(recs, &kgo.Record{Topic: "orders", Key: fmt.Appendf(nil, "o%04d", i), Value: fmt.Appendf(nil, "p%02d", i%products)})
		}
		produceAll(t, env, recs)
	}
	order(0, orders)
	x.WaitCommitted(t, orders, 60*time.Second)
	for _, r := range conformance.Drain(t, env, "out", orders) {
		if !strings.HasSuffix(string(r.Value), "-v1") {
			t.Fatalf("order %s joined %q, want a v1 product", r.Key, r.Value)
		}
	}
	produceAll(t, env, []*kgo.Record{{Topic: "products", Key: []byte("p00")}, // a tombstone
		{Topic: "products", Key: []byte("p01"), Value: []byte("p01-v2")}})
	// Each worker's loop applies the two records between batches.
	conformance.Until(t, 30*time.Second, "both workers applied the update", func() bool {
		return x.R.Stats().GlobalRecords >= 2*(products+2)
	})
	order(orders, orders+products)
	x.WaitCommitted(t, orders+products, 60*time.Second)
	after := map[string]string{}
	for _, r := range conformance.Drain(t, env, "out", orders+products-1) {
		after[string(r.Key)] = string(r.Value)
	}
	if len(after) != orders+products-1 {
		t.Fatalf("%d distinct orders joined, want %d (every order but the one of the deleted product)", len(after), orders+products-1)
	}
	if v, ok := after[fmt.Sprintf("o%04d", orders)]; ok {
		t.Fatalf("an order of the deleted product p00 joined %q", v)
	}
	if v := after[fmt.Sprintf("o%04d", orders+1)]; v != fmt.Sprintf("o%04d by p01-v2", orders+1) {
		t.Fatalf("the order of the updated product p01 joined %q, want p01-v2", v)
	}
}

// A global table whose topic does not exist stops Run, after
// connect_timeout, with an error naming the topic and the fix.
func TestGlobalTableUnknownTopic(t *testing.T) {
	env := kafkatest.Fake(t)
	env.CreateTopics(t, 1, "orders", "out")
	cfg := env.Config("app", "a", config.ExactlyOnce)
	cfg.ConnectTimeout = 2 * time.Second
	r, err := eos.New(cfg, conformance.GlobalJoinTopology("orders", "no-such-products", "out", state.Memory()))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	began := time.Now()
	err = r.Run(ctx)
	if err == nil || !strings.Contains(err.Error(), "no-such-products") || !strings.Contains(err.Error(), "create the global tables' topics") {
		t.Fatalf("Run: %v, want an error naming the topic and the fix", err)
	}
	if took := time.Since(began); took > 20*time.Second {
		t.Fatalf("Run took %s to report the missing topic", took)
	}
	t.Log(err)
}

// A global table's reader that meets a fetch error no retry cures, while
// the stream runs, stops Run with that error naming the topic, rather
// than leaving the table silently stale.
func TestGlobalTableReaderErrorStopsRun(t *testing.T) {
	env := kafkatest.Fake(t)
	env.CreateTopics(t, 1, "orders", "out", "products")
	produceAll(t, env, []*kgo.Record{{Topic: "products", Key: []byte("p00"), Value: []byte("p00-v1")}})
	cfg := env.Config("app", "a", config.ExactlyOnce)
	core, logs := observer.New(zapcore.InfoLevel)
	x := conformance.Start(t, cfg, conformance.GlobalJoinTopology("orders", "products", "out", state.Memory()), eos.Logger(zap.New(core)))
	conformance.WaitAssigned(t, env, cfg.AppID, cfg.InstanceID)
	if logs.FilterMessage("global tables loaded").Len() != 1 {
		t.Fatal("the global table was not loaded before the first batch")
	}
	h := env.Fake.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Fetch}, Topic: "products", Err: kerr.UnsupportedCompressionType, Count: -1})
	produceAll(t, env, []*kgo.Record{{Topic: "products", Key: []byte("p00"), Value: []byte("p00-v2")}})
	err := x.Wait(t, 60*time.Second)
	if h.Hits() == 0 {
		t.Fatal("no fetch of the global topic was failed")
	}
	if err == nil || !strings.Contains(err.Error(), "reading global table topic products/0") {
		t.Fatalf("Run: %v, want the reader's error naming the topic", err)
	}
	t.Log(err)
}

// A global table is rebuilt from its topic at every start: a pebble store
// left by an earlier run is emptied first, so a row whose record the topic
// no longer holds (deleted by retention, here DeleteRecords) is gone, and
// the table holds exactly what the topic does.
func TestGlobalTableRebuiltAtStart(t *testing.T) {
	env := kafkatest.Fake(t)
	env.CreateTopics(t, 1, "orders", "out", "products")
	produceAll(t, env, []*kgo.Record{{Topic: "products", Key: []byte("p00"), Value: []byte("p00-v1")},
		{Topic: "products", Key: []byte("p01"), Value: []byte("p01-v1")}})
	cfg := env.Config("app", "a", config.ExactlyOnce)
	cfg.StateDir = t.TempDir()
	run := func() (*conformance.Run, *observer.ObservedLogs) {
		core, logs := observer.New(zapcore.InfoLevel)
		x := conformance.Start(t, cfg, conformance.GlobalJoinTopology("orders", "products", "out", pebble.New()), eos.Logger(zap.New(core)))
		conformance.WaitAssigned(t, env, cfg.AppID, cfg.InstanceID)
		return x, logs
	}
	x, _ := run()
	x.Stop()
	if err := x.Wait(t, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	del := kadm.Offsets{}
	del.Add(kadm.Offset{Topic: "products", Partition: 0, At: 1}) // p00's record
	if _, err := env.Admin(t).DeleteRecords(context.Background(), del); err != nil {
		t.Fatal(err)
	}
	y, logs := run()
	conformance.Until(t, 30*time.Second, "the second start's load", func() bool { return logs.FilterMessage("global tables loaded").Len() > 0 })
	loaded := logs.FilterMessage("global tables loaded").All()
	if len(loaded) != 1 || loaded[0].ContextMap()["records"].(int64) != 1 {
		t.Fatalf("second start loaded %v, want the one record left", loaded)
	}
	produceAll(t, env, []*kgo.Record{{Topic: "orders", Key: []byte("o0"), Value: []byte("p00")},
		{Topic: "orders", Key: []byte("o1"), Value: []byte("p01")}})
	y.WaitCommitted(t, 2, 30*time.Second)
	var got []string
	for _, r := range conformance.Drain(t, env, "out", 1) {
		got = append(got, string(r.Value))
	}
	if len(got) != 1 || got[0] != "o1 by p01-v1" {
		t.Fatalf("joined %q, want only o1 by p01-v1: p00's row left the topic", got)
	}
}

// A transaction open on the global topic at start does not hold the load
// up: it reads to the last stable offset, before the open transaction.
// The transaction's records become visible once it commits, never before.
func TestGlobalTableLoadsPastAnOpenTransaction(t *testing.T) {
	env := kafkatest.Fake(t)
	env.CreateTopics(t, 1, "orders", "out", "products")
	produceAll(t, env, []*kgo.Record{{Topic: "products", Key: []byte("p00"), Value: []byte("p00-v1")}})
	ctx := context.Background()
	w := env.Client(t, kgo.TransactionalID("products-writer"))
	if err := w.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := w.ProduceSync(ctx, &kgo.Record{Topic: "products", Key: []byte("p00"), Value: []byte("p00-v2")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	cfg := env.Config("app", "a", config.ExactlyOnce)
	x := conformance.Start(t, cfg, conformance.GlobalJoinTopology("orders", "products", "out", state.Memory()))
	conformance.WaitAssigned(t, env, cfg.AppID, cfg.InstanceID)
	produceAll(t, env, []*kgo.Record{{Topic: "orders", Key: []byte("o0"), Value: []byte("p00")}})
	x.WaitCommitted(t, 1, 30*time.Second)
	if err := w.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	conformance.Until(t, 30*time.Second, "the committed row applied", func() bool { return x.R.Stats().GlobalRecords >= 2 })
	produceAll(t, env, []*kgo.Record{{Topic: "orders", Key: []byte("o1"), Value: []byte("p00")}})
	x.WaitCommitted(t, 2, 30*time.Second)
	var got []string
	for _, r := range conformance.Drain(t, env, "out", 2) {
		got = append(got, string(r.Value))
	}
	if strings.Join(got, "|") != "o0 by p00-v1|o1 by p00-v2" {
		t.Fatalf("joined %q, want o0 with v1 (v2 open) and o1 with v2 (committed)", got)
	}
}

// A retriable fetch error on the global topic for 2.5 s during the load,
// longer than one poll, does not stop Run: the load rides it out and the
// table is there for the first batch.
func TestGlobalTableLoadRidesOutRetriableErrors(t *testing.T) {
	env := kafkatest.Fake(t)
	env.CreateTopics(t, 1, "orders", "out", "products")
	produceAll(t, env, []*kgo.Record{{Topic: "products", Key: []byte("p00"), Value: []byte("p00-v1")}})
	h := env.Fake.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Fetch}, Topic: "products", Err: kerr.NotLeaderForPartition, Count: -1})
	removed := time.AfterFunc(2500*time.Millisecond, h.Remove)
	defer removed.Stop()
	cfg := env.Config("app", "a", config.ExactlyOnce)
	core, logs := observer.New(zapcore.InfoLevel)
	x := conformance.Start(t, cfg, conformance.GlobalJoinTopology("orders", "products", "out", state.Memory()), eos.Logger(zap.New(core)))
	conformance.WaitAssigned(t, env, cfg.AppID, cfg.InstanceID)
	if h.Hits() == 0 {
		t.Fatal("no fetch of the global topic was failed")
	}
	loaded := logs.FilterMessage("global tables loaded").All()
	if len(loaded) != 1 || loaded[0].ContextMap()["records"].(int64) != 1 {
		t.Fatalf("loaded %v, want the one record", loaded)
	}
	produceAll(t, env, []*kgo.Record{{Topic: "orders", Key: []byte("o0"), Value: []byte("p00")}})
	x.WaitCommitted(t, 1, 30*time.Second)
	if got := conformance.Drain(t, env, "out", 1); string(got[0].Value) != "o0 by p00-v1" {
		t.Fatalf("joined %q, want o0 by p00-v1", got[0].Value)
	}
}
