package eos_test

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/eosflow/eosflow/codec"
	"github.com/eosflow/eosflow/config"
	"github.com/eosflow/eosflow/dedup"
	"github.com/eosflow/eosflow/dedup/pgdedup"
	"github.com/eosflow/eosflow/dedup/redisdedup"
	"github.com/eosflow/eosflow/eos"
	"github.com/eosflow/eosflow/tools/conformance"
	"github.com/eosflow/eosflow/tools/kafkatest"
	"github.com/eosflow/eosflow/topology"
)

// effectKind is how the slow effect of the handover test behaves.
type effectKind int

const (
	// landsFirst applies at once, then takes a while to answer, and
	// returns its context's error if that ended meanwhile: a call that
	// took effect and is cancelled before its answer.
	landsFirst effectKind = iota
	// waitsForCancel waits for its context to end and applies nothing:
	// a call that honours cancellation before it takes effect.
	waitsForCancel
	// carriesOn waits for its context to end and applies anyway: a call
	// already sent.
	carriesOn
)

func (k effectKind) String() string {
	return [...]string{"EffectLandsThenAnswersLate", "EffectStopsWithContext", "EffectCarriesOn"}[k]
}

// handoverEffect is a slow side effect. Its first run of the slow id
// starts before instance b joins and so takes the partition away
// mid-effect; how it ends is its kind's.
type handoverEffect struct {
	kind       effectKind
	mu         sync.Mutex
	starts     map[string]int
	applied    map[string]int
	revoked    bool          // the first run saw the revoke (its context end, or its wait logged)
	started    chan struct{} // closed when the first run of the slow id starts
	revoking   chan struct{} // closed when instance a logs that its revoke waits
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
		return e.slow(ctx)
	}
	e.apply(id)
	return nil
}

func (e *handoverEffect) apply(id string) {
	e.mu.Lock()
	e.applied[id]++
	e.mu.Unlock()
}

// slow is the first run of the slow id.
func (e *handoverEffect) slow(ctx context.Context) error {
	close(e.started)
	if e.kind == landsFirst {
		e.apply(handoverSlowID)
		select {
		case <-e.revoking:
		case <-ctx.Done():
		case <-time.After(time.Minute):
			return fmt.Errorf("no revoke within a minute")
		}
		e.mu.Lock()
		e.revoked = true
		e.mu.Unlock()
		// The answer comes a while after the revoke began; a context
		// cancelled by then makes the call report a failure.
		select {
		case <-time.After(300 * time.Millisecond):
		case <-ctx.Done():
		}
		return ctx.Err()
	}
	select {
	case <-ctx.Done():
	case <-time.After(time.Minute):
		return fmt.Errorf("the slow effect's context did not end within a minute: no revoke")
	}
	e.mu.Lock()
	e.revoked = true
	e.mu.Unlock()
	// A new owner given the partition before this returns would take
	// the record now.
	select {
	case <-e.again:
	case <-e.handedOver:
	case <-time.After(500 * time.Millisecond):
	}
	if e.kind == waitsForCancel {
		return ctx.Err()
	}
	e.apply(handoverSlowID)
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
// And the revoke cancels the context only half way to rebalance_timeout:
// an effect that took effect and answers a little later reports success,
// and is marked. Before, a revoke cancelled it at once, the effect
// reported the cancellation, and the new owner applied it again.
func TestDedupEffectOnceAcrossHandover(t *testing.T) {
	t.Parallel()
	for _, mode := range []struct {
		name string
		opt  topology.DedupOption
	}{{"MarkBefore", topology.MarkBefore()}, {"MarkAfter", topology.MarkAfter()}} {
		for _, kind := range []effectKind{landsFirst, waitsForCancel, carriesOn} {
			name := mode.name + "/" + kind.String()
			t.Run(name+"/memory", func(t *testing.T) {
				store, err := dedup.NewMemory()
				if err != nil {
					t.Fatal(err)
				}
				testHandover(t, store, mode.opt, kind)
			})
			t.Run(name+"/redis", func(t *testing.T) {
				url := os.Getenv("EOS_REDIS_URL")
				if url == "" {
					t.Skip("EOS_REDIS_URL is not set: run integration/redis/redis.sh start and export EOS_REDIS_URL=$(integration/redis/redis.sh url)")
				}
				store, err := redisdedup.New(url, redisdedup.Prefix(fmt.Sprintf("eosflow:handover-test:%d:", time.Now().UnixNano())))
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { store.Close() })
				testHandover(t, store, mode.opt, kind)
			})
			t.Run(name+"/redis-sorted-set", func(t *testing.T) {
				url := os.Getenv("EOS_REDIS_URL")
				if url == "" {
					t.Skip("EOS_REDIS_URL is not set: run integration/redis/redis.sh start and export EOS_REDIS_URL=$(integration/redis/redis.sh url)")
				}
				key := fmt.Sprintf("eosflow:handover-test:%d", time.Now().UnixNano())
				store, err := redisdedup.NewSortedSet(url, key)
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
				testHandover(t, store, mode.opt, kind)
			})
			t.Run(name+"/postgres", func(t *testing.T) {
				url := os.Getenv("EOS_POSTGRES_URL")
				if url == "" {
					t.Skip("EOS_POSTGRES_URL is not set: run integration/postgres/pg.sh start and export EOS_POSTGRES_URL=$(integration/postgres/pg.sh url)")
				}
				store, err := pgdedup.New(t.Context(), url, pgdedup.Table(fmt.Sprintf("eosflow_handover_%d", time.Now().UnixNano())))
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { store.Close() })
				testHandover(t, store, mode.opt, kind)
			})
		}
	}
}

func testHandover(t *testing.T, store dedup.Store, mode topology.DedupOption, kind effectKind) {
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
	e := &handoverEffect{kind: kind, starts: map[string]int{}, applied: map[string]int{},
		started: make(chan struct{}), revoking: make(chan struct{}), again: make(chan struct{}), handedOver: make(chan struct{})}
	var mu sync.Mutex
	passed := map[string]map[string]bool{} // instance → ids it passed on
	build := func(instance string) *topology.Topology {
		top := topology.New()
		in := topology.Source(top, "in", codec.String())
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
		topology.To(seen, "out", codec.String())
		return top
	}
	var revokeOnce sync.Once
	revokeLog := zap.New(zapcore.NewCore(zapcore.NewJSONEncoder(zap.NewProductionEncoderConfig()), zapcore.AddSync(io.Discard), zap.InfoLevel), zap.Hooks(func(en zapcore.Entry) error {
		if strings.Contains(en.Message, "revoke: waiting for user code") {
			revokeOnce.Do(func() { close(e.revoking) })
		}
		return nil
	}))
	start := func(instance string) {
		cfg := env.Config("handover", instance, config.ExactlyOnce)
		// The revoke cancels the slow effect's context after half of it;
		// heartbeats every 300 ms tell instance a of the rebalance well
		// within it.
		cfg.RebalanceTimeout = 5 * time.Second
		opts := []eos.Option{eos.ClientOpts(kgo.Balancers(kgo.RangeBalancer()), kgo.HeartbeatInterval(300*time.Millisecond))}
		if instance == "a" {
			opts = append(opts, eos.Logger(revokeLog))
		}
		conformance.Start(t, cfg, build(instance), opts...)
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
		t.Fatal("the slow effect never saw its partition revoked mid-effect (no context end, no revoke waiting for it), and the test proves nothing")
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
