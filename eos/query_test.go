package eos_test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/eosflow/eosflow/codec"
	"github.com/eosflow/eosflow/config"
	"github.com/eosflow/eosflow/eos"
	"github.com/eosflow/eosflow/state"
	"github.com/eosflow/eosflow/state/pebble"
	"github.com/eosflow/eosflow/tools/conformance"
	"github.com/eosflow/eosflow/tools/kafkatest"
	"github.com/eosflow/eosflow/tools/verdict"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"
)

// queryCount reads key's count from the "counts" store of r.
func queryCount(t *testing.T, r *eos.Runner, key string) (int64, bool, error) {
	t.Helper()
	q, err := r.Query("counts")
	if err != nil {
		t.Fatal(err)
	}
	return eos.GetAs(context.Background(), q, []byte(key), codec.Int64())
}

// A query sees only what committed: while a batch is about to end (its
// writes in the store's overlay), a query answers with the count of the
// records committed before it, not with the batch's; a batch whose
// transaction aborts (its TxnOffsetCommit fails) never shows, and the
// batch that redoes its records shows once it commits.
func TestQueryReadsCommittedOnly(t *testing.T) {
	env := kafkatest.Fake(t)
	env.CreateTopics(t, 1, "in", "out")
	cl := env.Client(t)
	const n = 40
	for range n {
		cl.Produce(context.Background(), &kgo.Record{Topic: "in", Key: []byte("k"), Value: []byte("v")}, nil)
	}
	if err := cl.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	cfg := env.Config("app", "a", config.ExactlyOnce)
	cfg.MaxBatchRecords = 5
	var (
		runner atomic.Pointer[eos.Runner]
		calls  atomic.Int32
		fault  atomic.Pointer[kfake.FaultHandle]
		seenMu sync.Mutex // seen grows in the batch loop's goroutine
		seen   []string
	)
	check := eos.BeforeCommit(func(_ context.Context, b eos.BatchInfo) error {
		r := runner.Load()
		committed := int64(r.Stats().RecordsIn)
		got, found, err := queryCount(t, r, "k")
		if err != nil || found != (committed > 0) || got != committed {
			t.Errorf("batch of %d records about to end, %d committed before: query answered %d (found %v, %v)", b.Records, committed, got, found, err)
		}
		seenMu.Lock()
		seen = append(seen, fmt.Sprintf("%d+%d", got, b.Records))
		seenMu.Unlock()
		if calls.Add(1) == 2 {
			h := env.Fake.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.TxnOffsetCommit}, Err: kerr.IllegalGeneration})
			fault.Store(h)
		}
		return nil
	})
	r, err := eos.New(cfg, conformance.CountTopology("in", "out", state.Memory()), check, quiet())
	if err != nil {
		t.Fatal(err)
	}
	runner.Store(r)
	runAsync(t, r)
	conformance.Until(t, 60*time.Second, "every record committed", func() bool { return r.Stats().RecordsIn >= n })
	conformance.Until(t, 30*time.Second, "the final count readable", func() bool {
		got, _, err := queryCount(t, r, "k")
		return err == nil && got == n
	})
	if h := fault.Load(); h == nil || h.Hits() == 0 || r.Stats().Aborted == 0 {
		t.Fatalf("no batch aborted (stats %+v): the test proves nothing about aborted writes", r.Stats())
	}
	seenMu.Lock()
	defer seenMu.Unlock()
	t.Logf("answers during batches (committed+in batch): %v; stats %+v", seen, r.Stats())
}

// quiet silences a Runner.
func quiet() eos.Option { return eos.Logger(zap.NewNop()) }

// runAsync runs r until the test ends, and fails the test if Run returns
// an error.
func runAsync(t *testing.T, r *eos.Runner) {
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- r.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-errc; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
}

// A query of a Runner that is not running, and of a store the topology
// does not declare, says so; after Run returns, Locate owns nothing.
func TestQueryStatusOutsideRun(t *testing.T) {
	env := kafkatest.Fake(t)
	env.CreateTopics(t, 3, "in", "out")
	r, err := eos.New(env.Config("app", "a", config.ExactlyOnce), conformance.CountTopology("in", "out", state.Memory()), quiet())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Query("nope"); !errors.Is(err, eos.ErrUnknownStore) {
		t.Fatalf("unknown store: %v, want ErrUnknownStore", err)
	}
	stopped := func(when string) {
		t.Helper()
		_, _, err = queryCount(t, r, "k1")
		var qe *eos.QueryError
		if !errors.Is(err, eos.ErrStopped) || !errors.As(err, &qe) || qe.Store != "counts" {
			t.Fatalf("%s: %v, want a *QueryError for ErrStopped", when, err)
		}
		q, _ := r.Query("counts")
		yielded := 0
		for _, err := range q.Range(context.Background(), nil, nil) {
			yielded++
			if !errors.Is(err, eos.ErrStopped) {
				t.Fatalf("Range %s: %v, want ErrStopped", when, err)
			}
		}
		if yielded != 1 {
			t.Fatalf("Range %s yielded %d times, want ErrStopped once", when, yielded)
		}
	}
	stopped("before Run")

	conformance.SeedRange(t, env, "in", 0, 30)
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- r.Run(ctx) }()
	q, _ := r.Query("counts")
	conformance.Until(t, 60*time.Second, "a key readable", func() bool {
		_, _, err := queryCount(t, r, "k1")
		return err == nil
	})
	cancel()
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	stopped("after Run")
	for p := range 3 {
		key := []byte(fmt.Sprint("k", p))
		if loc, err := q.Locate(context.Background(), key); err == nil && loc.Owned {
			t.Fatalf("Locate after Run: %+v, want not Owned", loc)
		}
	}
}

// Instances count while two join and one leaves, records arriving all
// along, and per instance goroutines query every key and read ranges
// (conformance.QueriesDuringRebalance), under both group protocols and
// with both engines: each once, as integration's TestQueriesDuringRebalance
// runs all four pairs on a real broker.
func TestQueryDuringRebalance(t *testing.T) {
	for _, c := range []struct {
		e  state.Engine
		gp config.GroupProtocol
	}{{state.Memory(), config.GroupProtocolConsumer}, {pebble.New(), config.GroupProtocolClassic}} {
		t.Run(c.e.String()+"/"+string(c.gp), func(t *testing.T) { conformance.QueriesDuringRebalance(t, kafkatest.Fake(t), c.e, c.gp) })
	}
}

// With workers > 1 a query reads each key from the worker that owns its
// partition, and Range and Prefix read every worker's partitions: every
// key reads its count, Locate names the process's instance_id (a
// worker's suffix removed), and the ranges hold each key once. With
// metrics_serve_queries the process's metrics_addr answers every key,
// whichever worker holds it.
func TestQueryWorkers(t *testing.T) {
	env := kafkatest.Fake(t)
	env.CreateTopics(t, 6, "in", "out")
	const n = 2000
	conformance.SeedRange(t, env, "in", 0, n)
	cfg := env.Config("app", "pod", config.ExactlyOnce)
	cfg.Workers = 2
	cfg.MetricsAddr, cfg.MetricsServeQueries = "127.0.0.1:0", true
	x := conformance.Start(t, cfg, conformance.CountTopology("in", "out", state.Memory()))
	waitWorkersAssigned(t, env, cfg, 2)
	x.WaitCommitted(t, n, 90*time.Second)
	want := map[string]int64{}
	for i := range n {
		want[string(verdict.Key(i, conformance.SeedKeys))]++
	}
	q, err := x.R.Query("counts")
	if err != nil {
		t.Fatal(err)
	}
	workers := map[int]bool{}
	for k, c := range want {
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(10 * time.Millisecond) {
			v, _, err := eos.GetAs(context.Background(), q, []byte(k), codec.Int64())
			if err == nil && v == c {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("key %s: read %d (%v), want %d", k, v, err, c)
			}
		}
		loc, err := q.Locate(context.Background(), []byte(k))
		if err != nil || !loc.Owned || loc.Instance != "pod" {
			t.Fatalf("key %s: %+v %v, want owned by a worker, instance pod", k, loc, err)
		}
		workers[loc.Worker] = true
		code, r := getKey(t, "http://"+x.R.MetricsAddr(), "counts", k)
		if code != http.StatusOK || len(r.Value) != 8 || int64(binary.BigEndian.Uint64(r.Value)) != c || r.Instance != "pod" {
			t.Fatalf("GET key %s on metrics_addr: %d %+v, want 200 with count %d, instance pod", k, code, r, c)
		}
	}
	if len(workers) != 2 {
		t.Fatalf("keys were read from workers %v, want both", workers)
	}
	got := map[string]int64{}
	for e, err := range q.Range(context.Background(), nil, nil) {
		if err != nil {
			t.Fatal(err)
		}
		if _, dup := got[string(e.Key)]; dup {
			t.Fatalf("key %s twice in the range", e.Key)
		}
		got[string(e.Key)] = int64(binary.BigEndian.Uint64(e.Value))
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("range %v, want %v", got, want)
	}
	prefixed := 0
	for e, err := range q.Prefix(context.Background(), []byte("k1")) {
		if err != nil || e.Key[0] != 'k' || e.Key[1] != '1' {
			t.Fatalf("prefix k1 yielded %q %v", e.Key, err)
		}
		prefixed++
	}
	if prefixed != 11 { // k1, k10 … k19
		t.Fatalf("prefix k1: %d keys, want 11", prefixed)
	}

	locateNamesProcess(t, env, cfg, q, want)
}

// locateNamesProcess starts another process, pod2, with cfg's workers
// (their members' group.instance.ids carry a worker suffix) and waits
// until q's Locate names pod2, suffix removed, for a key of want it holds.
func locateNamesProcess(t *testing.T, env *kafkatest.Env, cfg config.Config, q *eos.StoreQuery, want map[string]int64) {
	t.Helper()
	ocfg := cfg
	ocfg.InstanceID, ocfg.MetricsAddr, ocfg.MetricsServeQueries = "pod2", "", false
	conformance.Start(t, ocfg, conformance.CountTopology("in", "out", state.Memory()))
	waitWorkersAssigned(t, env, ocfg, 2)
	conformance.Until(t, 30*time.Second, "Locate naming pod2 for a key it holds", func() bool {
		for k := range want {
			loc, err := q.Locate(context.Background(), []byte(k))
			if err != nil {
				t.Fatal(err)
			}
			if !loc.Owned && loc.Instance != "" {
				if loc.Instance != "pod2" {
					t.Fatalf("key %s: Locate names %q, want pod2", k, loc.Instance)
				}
				return true
			}
		}
		return false
	})
}
