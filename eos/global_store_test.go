package eos_test

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/eosflow/eosflow/config"
	"github.com/eosflow/eosflow/state"
	"github.com/eosflow/eosflow/tools/conformance"
	"github.com/eosflow/eosflow/tools/kafkatest"
	"github.com/twmb/franz-go/pkg/kgo"
)

// countingEngine is the memory engine, counting its stores and reads.
type countingEngine struct {
	state.Engine
	opened, gets *atomic.Int64
}

func (e countingEngine) Open(dir, name string, task state.Task) (state.Backend, error) {
	b, err := e.Engine.Open(dir, name, task)
	e.opened.Add(1)
	return countingBackend{b, e.gets}, err
}

type countingBackend struct {
	state.Backend
	gets *atomic.Int64
}

func (b countingBackend) Get(key []byte) ([]byte, bool, error) {
	b.gets.Add(1)
	return b.Backend.Get(key)
}

// A global table over a topic of 12 partitions is one store: a lookup,
// hit or miss, is one read, not one per partition.
func TestGlobalTableIsOneStore(t *testing.T) {
	env := kafkatest.Fake(t)
	env.CreateTopics(t, 1, "orders", "out")
	env.CreateTopics(t, 12, "products")
	var recs []*kgo.Record
	for p := range 24 {
		recs = append(recs, &kgo.Record{Topic: "products", Key: fmt.Appendf(nil, "p%02d", p), Value: fmt.Appendf(nil, "p%02d-v1", p)})
	}
	produceAll(t, env, recs)
	e := countingEngine{Engine: state.Memory(), opened: new(atomic.Int64), gets: new(atomic.Int64)}
	cfg := env.Config("app", "a", config.ExactlyOnce)
	x := conformance.Start(t, cfg, conformance.GlobalJoinTopology("orders", "products", "out", e))
	conformance.WaitAssigned(t, env, cfg.AppID, cfg.InstanceID)
	produceAll(t, env, []*kgo.Record{{Topic: "orders", Key: []byte("o0"), Value: []byte("p23")},
		{Topic: "orders", Key: []byte("o1"), Value: []byte("missing")}})
	x.WaitCommitted(t, 2, 30*time.Second)
	if got := conformance.Drain(t, env, "out", 1); string(got[0].Value) != "o0 by p23-v1" {
		t.Fatalf("joined %q, want o0 by p23-v1", got[0].Value)
	}
	if n := e.opened.Load(); n != 1 {
		t.Fatalf("%d stores opened for the table, want 1", n)
	}
	if n := e.gets.Load(); n != 2 {
		t.Fatalf("%d store reads for two lookups (a hit and a miss), want 2", n)
	}
}
