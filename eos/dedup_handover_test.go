package eos_test

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eosflow/eosflow/codec"
	"github.com/eosflow/eosflow/config"
	"github.com/eosflow/eosflow/dedup"
	"github.com/eosflow/eosflow/eos"
	"github.com/eosflow/eosflow/internal/conformance"
	"github.com/eosflow/eosflow/internal/kafkatest"
	"github.com/eosflow/eosflow/topology"
)

// handoverEffect is a slow side effect. Its first run of the slow id waits
// for its record's context to end (the revoke), then a while for the
// partition's new owner to take the same record (start it, or pass it on),
// and then either returns the context's error without applying
// (honoursCtx, like a call cancelled late) or applies (like a call already
// sent).
type handoverEffect struct {
	honoursCtx bool
	mu         sync.Mutex
	starts     map[string]int
	applied    map[string]int
	revoked    bool          // the first run saw its context end
	started    chan struct{} // closed when the first run of the slow id starts
	again      chan struct{} // closed when a second run of it starts
	handedOver chan struct{} // closed when instance b passes the slow record on
	handOnce   sync.Once
}

const handoverSlowID = "slow"

func (e *handoverEffect) run(ctx context.Context, r topology.Record[string]) error {
	id := r.Value
	e.mu.Lock()
	e.starts[id]++
	n := e.starts[id]
	e.mu.Unlock()
	if id == handoverSlowID && n == 2 {
		close(e.again)
	}
	if id == handoverSlowID && n == 1 {
		close(e.started)
		select {
		case <-ctx.Done():
		case <-time.After(time.Minute):
			return fmt.Errorf("the slow effect's context did not end within a minute: no revoke")
		}
		e.mu.Lock()
		e.revoked = true
		e.mu.Unlock()
		// Handing the partition over at once, as the revoke did, lets
		// the new owner take the record while this run is in flight.
		select {
		case <-e.again:
		case <-e.handedOver:
		case <-time.After(3 * time.Second):
		}
		if e.honoursCtx {
			return ctx.Err()
		}
	}
	e.mu.Lock()
	e.applied[id]++
	e.mu.Unlock()
	return nil
}

// A partition revoked while a Dedup effect runs (a second runner joins the
// group) is released only once the effect returned, so its new owner
// finds the id marked (done) or not marked at all: each effect is applied
// once, in both modes, whether the slow effect stops when its context
// ends or carries on, and every input offset is committed. Before, the
// revoke only cancelled the record's context: mark-after applied the
// effect twice (old and new owner), mark-before never (the new owner
// skipped the marked id, and the old owner's cancelled effect forgot it).
func TestDedupEffectOnceAcrossHandover(t *testing.T) {
	for _, mode := range []struct {
		name string
		opt  topology.DedupOption
	}{{"MarkBefore", topology.MarkBefore()}, {"MarkAfter", topology.MarkAfter()}} {
		for _, honours := range []bool{true, false} {
			name := mode.name + "/EffectCarriesOn"
			if honours {
				name = mode.name + "/EffectStopsWithContext"
			}
			t.Run(name+"/memory", func(t *testing.T) {
				store, err := dedup.NewMemory()
				if err != nil {
					t.Fatal(err)
				}
				testHandover(t, store, mode.opt, honours)
			})
			t.Run(name+"/redis", func(t *testing.T) {
				url := os.Getenv("EOS_REDIS_URL")
				if url == "" {
					t.Skip("EOS_REDIS_URL is not set: run integration/redis/redis.sh start and export EOS_REDIS_URL=$(integration/redis/redis.sh url)")
				}
				store, err := dedup.NewRedis(url, dedup.Prefix(fmt.Sprintf("eosflow:handover-test:%d:", time.Now().UnixNano())))
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { store.Close() })
				testHandover(t, store, mode.opt, honours)
			})
			t.Run(name+"/redis-sorted-set", func(t *testing.T) {
				url := os.Getenv("EOS_REDIS_URL")
				if url == "" {
					t.Skip("EOS_REDIS_URL is not set: run integration/redis/redis.sh start and export EOS_REDIS_URL=$(integration/redis/redis.sh url)")
				}
				key := fmt.Sprintf("eosflow:handover-test:%d", time.Now().UnixNano())
				store, err := dedup.NewRedisSortedSet(url, key)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() {
					// The set has no expiry: drop it, and its pending hash.
					if opt, err := redis.ParseURL(url); err == nil {
						c := redis.NewClient(opt)
						c.Del(context.Background(), key, "{"+key+"}:pending")
						c.Close()
					}
					store.Close()
				})
				testHandover(t, store, mode.opt, honours)
			})
			t.Run(name+"/postgres", func(t *testing.T) {
				url := os.Getenv("EOS_POSTGRES_URL")
				if url == "" {
					t.Skip("EOS_POSTGRES_URL is not set: run integration/postgres/pg.sh start and export EOS_POSTGRES_URL=$(integration/postgres/pg.sh url)")
				}
				store, err := dedup.NewPostgres(t.Context(), url, dedup.Table(fmt.Sprintf("eosflow_handover_%d", time.Now().UnixNano())))
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { store.Close() })
				testHandover(t, store, mode.opt, honours)
			})
		}
	}
}

func testHandover(t *testing.T, store topology.DedupStore, mode topology.DedupOption, honoursCtx bool) {
	const perPartition = 20
	env := kafkatest.Fake(t)
	env.CreateTopics(t, 2, "in", "out")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	// Partition 1, the one the range balancer gives instance "b" when it
	// joins, starts with the slow id.
	cl := env.Client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	for p := range int32(2) {
		for i := range perPartition {
			id := fmt.Sprintf("id-%d-%d", p, i)
			if p == 1 && i == 0 {
				id = handoverSlowID
			}
			if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "in", Partition: p, Value: []byte(id)}).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
	}
	e := &handoverEffect{honoursCtx: honoursCtx, starts: map[string]int{}, applied: map[string]int{},
		started: make(chan struct{}), again: make(chan struct{}), handedOver: make(chan struct{})}
	var mu sync.Mutex
	passed := map[string]map[string]bool{} // instance → ids it passed on
	build := func(instance string) *topology.Topology {
		top := topology.New("handover")
		in := topology.Source(top, "in", "in", codec.String())
		once := topology.Dedup(in, "once", func(r topology.Record[string]) string { return r.Value }, store, e.run, mode)
		seen := topology.Peek(once, "seen", func(_ context.Context, _ []byte, v string) {
			mu.Lock()
			defer mu.Unlock()
			if passed[instance] == nil {
				passed[instance] = map[string]bool{}
			}
			passed[instance][v] = true
			if instance == "b" && v == handoverSlowID {
				e.handOnce.Do(func() { close(e.handedOver) })
			}
		})
		topology.To(seen, "out", "out", codec.String())
		return top
	}
	start := func(instance string) {
		cfg := env.Config("handover", instance, config.ExactlyOnce)
		cfg.RebalanceTimeout = 20 * time.Second
		conformance.Start(t, cfg, build(instance), eos.ClientOpts(kgo.Balancers(kgo.RangeBalancer())))
	}
	start("a")
	select {
	case <-e.started:
	case <-ctx.Done():
		t.Fatal("the slow effect never started")
	}
	start("b")

	adm := kadm.NewClient(env.Client(t))
	conformance.Until(t, 90*time.Second, "every input offset committed", func() bool {
		offs, err := adm.FetchOffsets(ctx, "handover")
		if err != nil {
			return false
		}
		for p := range int32(2) {
			if o, ok := offs.Lookup("in", p); !ok || o.At != perPartition {
				return false
			}
		}
		return true
	})

	e.mu.Lock()
	defer e.mu.Unlock()
	mu.Lock()
	defer mu.Unlock()
	if !e.revoked {
		t.Fatal("the slow effect's context never ended: its partition was not revoked mid-effect, and the test proves nothing")
	}
	if !passed["b"][handoverSlowID] {
		t.Fatalf("instance b never passed the slow record on (it passed %d records): the partition did not move to it, and the test proves nothing", len(passed["b"]))
	}
	for p := range 2 {
		for i := range perPartition {
			id := fmt.Sprintf("id-%d-%d", p, i)
			if p == 1 && i == 0 {
				id = handoverSlowID
			}
			if n := e.applied[id]; n != 1 {
				t.Errorf("effect of %s applied %d times (started %d times), want once", id, n, e.starts[id])
			}
		}
	}
}
