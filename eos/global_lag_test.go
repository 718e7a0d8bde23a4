package eos_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/eosflow/eosflow/config"
	"github.com/eosflow/eosflow/eos"
	"github.com/eosflow/eosflow/state"
	"github.com/eosflow/eosflow/tools/conformance"
	"github.com/eosflow/eosflow/tools/kafkatest"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

// A transaction aborted behind one left open on the global topic: its
// records are never delivered and its marker lies past the last stable
// offset, so no record reaches the end the load aims for. The load
// completes all the same, once the read has caught up, and the aborted
// row is never joined.
func TestGlobalTableLoadsPastAnAbortedTransaction(t *testing.T) {
	env := kafkatest.Fake(t)
	env.CreateTopics(t, 1, "orders", "out", "products")
	produceAll(t, env, []*kgo.Record{{Topic: "products", Key: []byte("p00"), Value: []byte("p00-v1")}})
	ctx := context.Background()
	aborted := env.Client(t, kgo.TransactionalID("aborter"))
	if err := aborted.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := aborted.ProduceSync(ctx, &kgo.Record{Topic: "products", Key: []byte("p00"), Value: []byte("aborted")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	open := env.Client(t, kgo.TransactionalID("opener"))
	if err := open.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := open.ProduceSync(ctx, &kgo.Record{Topic: "products", Key: []byte("p00"), Value: []byte("p00-v2")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if err := aborted.EndTransaction(ctx, kgo.TryAbort); err != nil {
		t.Fatal(err)
	}
	cfg := env.Config("app", "a", config.ExactlyOnce)
	core, logs := observer.New(zapcore.InfoLevel)
	x := conformance.Start(t, cfg, conformance.GlobalJoinTopology("orders", "products", "out", state.Memory()), eos.Logger(zap.New(core)))
	conformance.Until(t, 30*time.Second, "the global table's load", func() bool { return logs.FilterMessage("global tables loaded").Len() > 0 })
	conformance.WaitAssigned(t, env, cfg.AppID, cfg.InstanceID)
	produceAll(t, env, []*kgo.Record{{Topic: "orders", Key: []byte("o0"), Value: []byte("p00")}})
	x.WaitCommitted(t, 1, 30*time.Second)
	if got := conformance.Drain(t, env, "out", 1); string(got[0].Value) != "o0 by p00-v1" {
		t.Fatalf("joined %q, want o0 by p00-v1: the aborted row or the open one was visible", got[0].Value)
	}
}

// A global topic deleted while Run runs leaves the table without its
// source: Run stops, between batches and within the bound
// max(connect_timeout, the stall bound), with an error naming the topic,
// the partition, how far behind it is, and the command to check it,
// rather than joining a stale table for good. It warns meanwhile.
func TestGlobalTableDeletedTopicStopsRun(t *testing.T) {
	t.Parallel() // it waits out the stall bound on a cluster of its own
	env := kafkatest.Fake(t)
	env.CreateTopics(t, 1, "orders", "out", "products")
	produceAll(t, env, []*kgo.Record{{Topic: "products", Key: []byte("p00"), Value: []byte("p00-v1")}})
	cfg := env.Config("app", "a", config.ExactlyOnce)
	cfg.ConnectTimeout = 2 * time.Second
	cfg.CommitInterval, cfg.TransactionTimeout = 500*time.Millisecond, 2*time.Second
	cfg.SessionTimeout, cfg.RebalanceTimeout = config.MinSessionTimeout, config.MinSessionTimeout
	const bound = 22 * time.Second // the stall bound: max(2s+10s, 6s, 6s) + 10s
	core, logs := observer.New(zapcore.InfoLevel)
	x := conformance.Start(t, cfg, conformance.GlobalJoinTopology("orders", "products", "out", state.Memory()), eos.Logger(zap.New(core)))
	conformance.WaitAssigned(t, env, cfg.AppID, cfg.InstanceID)
	if _, err := env.Admin(t).DeleteTopics(context.Background(), "products"); err != nil {
		t.Fatal(err)
	}
	deleted := time.Now()
	err := x.Wait(t, bound+20*time.Second)
	took := time.Since(deleted)
	if err == nil || !strings.Contains(err.Error(), "global table topic products partition 0") ||
		!strings.Contains(err.Error(), "eosctl topic describe products") {
		t.Fatalf("Run: %v, want an error naming the deleted global topic, its partition and the command", err)
	}
	if took > bound+10*time.Second {
		t.Fatalf("Run stopped %s after the deletion, past the bound %s", took, bound)
	}
	if logs.FilterLevelExact(zapcore.WarnLevel).Len() == 0 {
		t.Fatal("no warning while the table lagged")
	}
	t.Logf("after %s: %v", took.Round(time.Millisecond), err)
}
