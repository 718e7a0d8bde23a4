package eos_test

import (
	"context"
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
