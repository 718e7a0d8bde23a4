package eos_test

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/eosflow/eosflow/codec"
	"github.com/eosflow/eosflow/config"
	"github.com/eosflow/eosflow/eos"
	"github.com/eosflow/eosflow/processor"
	"github.com/eosflow/eosflow/tools/conformance"
	"github.com/eosflow/eosflow/tools/kafkatest"
	"github.com/eosflow/eosflow/tools/verdict"
	"github.com/eosflow/eosflow/topology"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// User code blocked on a call gets its context cancelled on shutdown: Run
// returns promptly, and the record it was on is neither dead-lettered nor
// counted. Under exactly-once the records before it in the batch commit
// and it is redone by the next run; under at-most-once (whose offsets
// commit before processing) it alone is lost, and the rest of its fetch is
// still processed.
func TestUserContextEndsOnShutdown(t *testing.T) {
	for _, g := range []config.Guarantee{config.ExactlyOnce, config.AtMostOnce} {
		t.Run(string(g), func(t *testing.T) {
			env := kafkatest.Fake(t)
			env.CreateTopics(t, 1, "in", "out", "dlq")
			const n, stuck = 20, 7
			conformance.Seed(t, env, "in", n)
			blocked := make(chan struct{})
			var sawCancel atomic.Bool
			build := func(block bool) *topology.Topology {
				top := topology.New(topology.DefaultErrorPolicy(topology.DeadLetter("dlq")))
				src := topology.Source(top, "in", codec.Bytes())
				up := topology.MapValues(src, "call-out", func(ctx context.Context, v []byte) ([]byte, error) {
					if id, _ := verdict.ID(v); block && id == stuck {
						close(blocked)
						<-ctx.Done() // a call that waits for its context
						sawCancel.Store(errors.Is(ctx.Err(), context.Canceled))
						return nil, ctx.Err()
					}
					return bytes.ToUpper(v), nil
				})
				topology.To(up, "out", codec.Bytes())
				return top
			}
			cfg := env.Config("app", "a", g)
			cfg.CommitInterval = 8 * time.Second // the records before the stuck one share its batch
			x := conformance.Start(t, cfg, build(true))
			select {
			case <-blocked:
			case <-time.After(60 * time.Second):
				t.Fatal("the stuck record was never reached")
			}
			begin := time.Now()
			x.Stop()
			if err := x.Wait(t, 30*time.Second); err != nil {
				t.Fatalf("Run after shutdown: %v", err)
			}
			if !sawCancel.Load() {
				t.Fatal("user code's context was not cancelled on shutdown")
			}
			if d := time.Since(begin); d > 15*time.Second {
				t.Fatalf("shutdown took %s with user code waiting on its context", d)
			}
			s := x.R.Stats()
			if s.DeadLettered != 0 || s.Committed == 0 {
				t.Fatalf("stats %+v: want a commit and nothing dead-lettered", s)
			}
			switch g {
			case config.ExactlyOnce:
				if s.RecordsIn != stuck {
					t.Fatalf("stats %+v: want the %d records before the stuck one committed", s, stuck)
				}
				y := conformance.Start(t, cfg, build(false))
				y.WaitCommitted(t, n-stuck, 60*time.Second)
				conformance.ExactlyOnce(t, env, "out", n)
			case config.AtMostOnce:
				if s.RecordsIn != n-1 {
					t.Fatalf("stats %+v: want every record but the stuck one processed", s)
				}
				v := verdict.Judge(n, conformance.Drain(t, env, "out", n-1))
				if v.Missing != 1 || v.Duplicates != 0 {
					t.Fatalf("out: %v, want only the stuck record missing", v)
				}
			}
		})
	}
}

// Stats count outcomes of committed batches only: a batch that aborts and
// is redone counts its dead letters once, as many as the dead-letter topic
// holds for read_committed readers.
func TestStatsCountCommittedOutcomesOnly(t *testing.T) {
	env := kafkatest.Fake(t)
	env.CreateTopics(t, 1, "in", "out", "dlq")
	const n = 300
	conformance.Seed(t, env, "in", n)
	h := env.Fake.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.EndTxn}, Err: kerr.UnknownServerError, Count: 2})
	top := conformance.Upper("in", "out", func(id int) bool { return id%3 == 0 })
	top.OnError("upper", topology.DeadLetter("dlq"))
	cfg := env.Config("app", "a", config.ExactlyOnce)
	cfg.MaxBatchRecords = 50
	x := conformance.Start(t, cfg, top)
	x.WaitCommitted(t, n, 60*time.Second)
	if h.Hits() == 0 {
		t.Fatal("fault never hit: no batch aborted")
	}
	dead := conformance.Drain(t, env, "dlq", n/3)
	s := x.R.Stats()
	if s.Aborted == 0 || s.DeadLettered != uint64(len(dead)) || len(dead) != n/3 || s.RecordsIn != n {
		t.Fatalf("stats %+v, dead-letter topic holds %d: want DeadLettered = %d with aborts not counted", s, len(dead), n/3)
	}
}

// A sink with a Partitioner writes each record to the partition it chose;
// a sink without one hashes keys as Kafka's Java producer does (murmur2).
func TestSinkPartitioner(t *testing.T) {
	env := kafkatest.Fake(t)
	env.CreateTopics(t, 1, "in")
	env.CreateTopics(t, 4, "chosen", "hashed")
	const n = 40
	cl := env.Client(t)
	for i := 0; i < n; i++ {
		v := []byte(string(rune('a' + i%26)))
		if err := cl.ProduceSync(context.Background(), &kgo.Record{Topic: "in", Key: []byte{byte(i)}, Value: v}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	top := topology.New()
	src := topology.Source(top, "in", codec.Bytes())
	topology.To(src, "chosen", codec.Bytes(), topology.Partitioner(func(r topology.Record[[]byte], partitions int32) int32 {
		return int32(r.Key[0]) % partitions
	}))
	topology.To(src, "hashed", codec.Bytes())
	x := conformance.Start(t, env.Config("app", "a", config.ExactlyOnce), top)
	x.WaitCommitted(t, n, 60*time.Second)
	hash := kgo.StickyKeyPartitioner(nil).ForTopic("hashed")
	for _, r := range conformance.Drain(t, env, "chosen", n) {
		if want := int32(r.Key[0]) % 4; r.Partition != want {
			t.Fatalf("key %d went to partition %d, its partitioner chose %d", r.Key[0], r.Partition, want)
		}
	}
	for _, r := range conformance.Drain(t, env, "hashed", n) {
		if want := int32(hash.Partition(&kgo.Record{Key: r.Key}, 4)); r.Partition != want {
			t.Fatalf("key %x went to partition %d, murmur2 says %d", r.Key, r.Partition, want)
		}
	}
}

// A custom processor's Init runs before its first record and Close when
// Run returns; an Init error stops Run before anything is consumed, naming
// the node.
func TestProcessWithLifecycle(t *testing.T) {
	env := kafkatest.Fake(t)
	env.CreateTopics(t, 1, "in", "out")
	const n = 10
	conformance.Seed(t, env, "in", n)
	lc := &lifecycle{}
	top := topology.New()
	src := topology.Source(top, "in", codec.Bytes())
	counted := topology.ProcessWith(src, "count", func() processor.Processor[[]byte, []byte] { return lc })
	topology.To(counted, "out", codec.Bytes())
	x := conformance.Start(t, env.Config("app", "a", config.ExactlyOnce), top)
	x.WaitCommitted(t, n, 60*time.Second)
	x.Stop()
	if err := x.Wait(t, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	if lc.inits.Load() != 1 || lc.closes.Load() != 1 || lc.seen.Load() < n {
		t.Fatalf("inits %d closes %d records %d; want 1, 1, at least %d", lc.inits.Load(), lc.closes.Load(), lc.seen.Load(), n)
	}
	conformance.ExactlyOnce(t, env, "out", n)

	failing := topology.New()
	src = topology.Source(failing, "in", codec.Bytes())
	topology.To(topology.ProcessWith(src, "broken", func() processor.Processor[[]byte, []byte] { return &lifecycle{initErr: errors.New("no database")} }),
		"out", codec.Bytes())
	r, err := eos.New(env.Config("app2", "a", config.ExactlyOnce), failing)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Run(context.Background()); err == nil || !strings.Contains(err.Error(), `"broken"`) || !strings.Contains(err.Error(), "no database") {
		t.Fatalf("Run with a failing Init: %v; want an error naming the node and the cause", err)
	}
}

type lifecycle struct {
	inits, closes, seen atomic.Int64
	initErr             error
}

func (l *lifecycle) Init(ctx processor.InitContext) error {
	l.inits.Add(1)
	return l.initErr
}

func (l *lifecycle) Process(ctx processor.Context[[]byte], r processor.Record[[]byte]) error {
	l.seen.Add(1)
	r.Value = bytes.ToUpper(r.Value)
	ctx.Emit(r)
	return nil
}

func (l *lifecycle) Close() error {
	l.closes.Add(1)
	return nil
}

// A topic chosen per record that does not exist is the sink's error, named
// with the command that creates it, under the sink's policy: dead-lettered
// here, and under Fail it stops Run at once rather than looking like an
// outage.
func TestUnknownChosenTopicGoesToThePolicy(t *testing.T) {
	env := kafkatest.Fake(t)
	env.CreateTopics(t, 1, "in", "out", "dlq")
	const n = 100
	conformance.Seed(t, env, "in", n)
	build := func(policy topology.ErrorPolicy) *topology.Topology {
		top := topology.New()
		src := topology.Source(top, "in", codec.Bytes())
		topology.ToTopicFunc(src, "route", func(_ context.Context, r topology.Record[[]byte]) (string, error) {
			if id, _ := verdict.ID(r.Value); id%10 == 0 {
				return "nope", nil
			}
			return "out", nil
		}, codec.Bytes())
		top.OnError("route", policy)
		return top
	}
	x := conformance.Start(t, env.Config("app", "a", config.ExactlyOnce), build(topology.DeadLetter("dlq")))
	x.WaitCommitted(t, n, 60*time.Second)
	dead := conformance.Drain(t, env, "dlq", n/10)
	if len(dead) != n/10 || !conformance.HasHeaderContaining(dead[0], processor.HeaderError, `"nope"`) ||
		!conformance.HasHeaderContaining(dead[0], processor.HeaderError, "eosctl topic create nope") {
		t.Fatalf("want %d dead letters naming topic nope and how to create it, got %d", n/10, len(dead))
	}
	if v := verdict.Judge(n, conformance.Drain(t, env, "out", n-n/10)); v.Missing != n/10 || v.Duplicates != 0 {
		t.Fatalf("out: %v, want all but the %d dead letters once", v, n/10)
	}

	begin := time.Now()
	y := conformance.Start(t, env.Config("app2", "a", config.ExactlyOnce), build(topology.Fail()))
	err := y.Wait(t, 30*time.Second)
	if !errors.Is(err, processor.ErrUnknownTopic) || !strings.Contains(err.Error(), "nope") {
		t.Fatalf("Run under Fail: %v, want ErrUnknownTopic naming nope", err)
	}
	if d := time.Since(begin); d > 15*time.Second {
		t.Fatalf("took %s to stop", d)
	}
}
