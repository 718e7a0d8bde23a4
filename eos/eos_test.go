package eos_test

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/eosflow/eosflow/codec"
	"github.com/eosflow/eosflow/config"
	"github.com/eosflow/eosflow/eos"
	"github.com/eosflow/eosflow/internal/kafkatest"
	"github.com/eosflow/eosflow/internal/verdict"
	"github.com/eosflow/eosflow/processor"
	"github.com/eosflow/eosflow/topology"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

func TestExactlyOnceAcrossRestart(t *testing.T) {
	env := kafkatest.Fake(t)
	env.CreateTopics(t, 3, "in", "out")
	const n = 6000
	seed(t, env, "in", n)
	cfg := env.Config("app", "a", config.ExactlyOnce)
	cfg.MaxBatchRecords = 500

	first := start(t, cfg, upper("in", "out", nil))
	until(t, 30*time.Second, "a third of the input", func() bool { return first.r.Stats().RecordsIn >= n/3 })
	first.stop()
	if err := first.wait(t, 20*time.Second); err != nil {
		t.Fatalf("cancelled Run should return nil, got %v", err)
	}
	done := first.r.Stats().RecordsIn

	second := start(t, cfg, upper("in", "out", nil))
	until(t, 30*time.Second, "the rest of the input", func() bool { return second.r.Stats().RecordsIn >= n-done })
	v := exactlyOnce(t, env, "out", n)
	if got := done + second.r.Stats().RecordsIn; got != n {
		t.Fatalf("committed input records across both runs = %d, want %d", got, n)
	}
	for _, r := range drain(t, env, "out", n)[:10] {
		if !bytes.HasPrefix(r.Value, []byte("ID=")) {
			t.Fatalf("output not transformed: %q", r.Value)
		}
	}
	// The group's committed offsets reach the end of every input partition.
	adm := kadm.NewClient(env.Client(t))
	ctx := context.Background()
	offs, err := adm.FetchOffsets(ctx, "app")
	if err != nil {
		t.Fatal(err)
	}
	ends, err := adm.ListEndOffsets(ctx, "in")
	if err != nil {
		t.Fatal(err)
	}
	ends.Each(func(e kadm.ListedOffset) {
		if o, ok := offs.Lookup("in", e.Partition); !ok || o.At != e.Offset {
			t.Errorf("partition %d committed %v, end %d", e.Partition, o.At, e.Offset)
		}
	})
	t.Logf("verdict: %v", v)
}

func TestFailAbortsBatchInvisibly(t *testing.T) {
	env := kafkatest.Fake(t)
	env.CreateTopics(t, 1, "in", "out")
	seed(t, env, "in", 100)
	cfg := env.Config("app", "a", config.ExactlyOnce)
	cfg.CommitInterval = 2 * time.Second // all 100 records in one batch

	// Give the outputs before the failure time to reach the broker, so
	// that only the abort can be what hides them.
	x := start(t, cfg, upper("in", "out", func(id int) bool {
		if id == 50 {
			time.Sleep(500 * time.Millisecond)
		}
		return id == 50
	}))
	err := x.wait(t, 30*time.Second)
	var re *processor.RecordError
	var ne *topology.NodeError
	if !errors.As(err, &re) || re.Offset != 50 || !errors.As(err, &ne) || ne.Node != "upper" {
		t.Fatalf("want the failing record and node named, got %v", err)
	}
	if s := x.r.Stats(); s.Aborted != 1 || s.Committed != 0 {
		t.Fatalf("stats %+v, want one aborted batch", s)
	}
	if got := drain(t, env, "out", 0); len(got) != 0 {
		t.Fatalf("read_committed saw %d records of an aborted batch", len(got))
	}
	// The aborted records were written: only the abort hides them.
	uncommitted := env.Client(t, kgo.ConsumeTopics("out"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if fs := uncommitted.PollFetches(ctx); fs.NumRecords() == 0 {
		t.Fatalf("read_uncommitted saw nothing: the batch was never produced, so the test proves nothing")
	}

	fixed := start(t, cfg, upper("in", "out", nil))
	until(t, 30*time.Second, "all records", func() bool { return fixed.r.Stats().RecordsIn >= 100 })
	exactlyOnce(t, env, "out", 100)
}

func TestDeadLetterCommitsWithOffsets(t *testing.T) {
	env := kafkatest.Fake(t)
	env.CreateTopics(t, 2, "in", "out", "dlq")
	const n = 1000
	seed(t, env, "in", n)
	// The first commit fails, so the dead letters of that batch must vanish
	// with it and come back exactly once.
	fault := env.Fake.Fault(kfakeFault("EndTxn"))
	top := upper("in", "out", func(id int) bool { return id%10 == 0 })
	top.OnError("upper", topology.DeadLetter("dlq"))
	x := start(t, env.Config("app", "a", config.ExactlyOnce), top)
	until(t, 30*time.Second, "all records", func() bool { return x.r.Stats().RecordsIn >= n })

	out := drain(t, env, "out", n*9/10)
	dlq := drain(t, env, "dlq", n/10)
	v := verdict.Judge(n, append(out, dlq...))
	if !v.OK() || len(dlq) != n/10 {
		t.Fatalf("outputs plus dead letters must be the input once each: %v (dlq %d)", v, len(dlq))
	}
	for _, r := range dlq {
		id, _ := verdict.ID(r.Value)
		if id%10 != 0 || !hasHeader(r, processor.HeaderNode, "upper") || !hasHeader(r, processor.HeaderSourceTopic, "in") {
			t.Fatalf("dead letter %q lacks the original value or error headers: %v", r.Value, r.Headers)
		}
	}
	if fault.Hits() == 0 || x.r.Stats().Aborted == 0 {
		t.Fatalf("the injected EndTxn failure never happened (hits %d, stats %+v)", fault.Hits(), x.r.Stats())
	}
}

func hasHeader(r *kgo.Record, k, v string) bool {
	for _, h := range r.Headers {
		if h.Key == k && string(h.Value) == v {
			return true
		}
	}
	return false
}

func TestRebalanceTwoInstances(t *testing.T) {
	env := kafkatest.Fake(t)
	env.CreateTopics(t, 6, "in", "out")
	const n = 20000
	seed(t, env, "in", n)
	slow := eos.BeforeCommit(func(context.Context, eos.BatchInfo) error { time.Sleep(5 * time.Millisecond); return nil })
	cfg := env.Config("app", "a", config.ExactlyOnce)
	cfg.MaxBatchRecords = 200
	a := start(t, cfg, upper("in", "out", nil), slow)
	until(t, 30*time.Second, "a to make progress", func() bool { return a.r.Stats().RecordsIn >= 2000 })
	cfg.InstanceID = "b"
	b := start(t, cfg, upper("in", "out", nil), slow)
	until(t, 60*time.Second, "b to join and commit", func() bool { return b.r.Stats().RecordsIn >= 2000 })
	a.stop() // a leaves mid-stream: a second rebalance
	if err := a.wait(t, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	until(t, 60*time.Second, "all records", func() bool { return a.r.Stats().RecordsIn+b.r.Stats().RecordsIn >= n })
	exactlyOnce(t, env, "out", n)
	if got := a.r.Stats().RecordsIn + b.r.Stats().RecordsIn; got != n {
		t.Fatalf("committed input records %d, want %d", got, n)
	}
}

func TestZombieIsFenced(t *testing.T) {
	env := kafkatest.Fake(t)
	env.CreateTopics(t, 3, "in", "out")
	const n = 20000
	seed(t, env, "in", n)
	slow := eos.BeforeCommit(func(context.Context, eos.BatchInfo) error { time.Sleep(5 * time.Millisecond); return nil })
	cfg := env.Config("app", "same", config.ExactlyOnce)
	cfg.MaxBatchRecords = 200
	zombie := start(t, cfg, upper("in", "out", nil), slow)
	until(t, 30*time.Second, "progress", func() bool { return zombie.r.Stats().RecordsIn >= 1000 })
	successor := start(t, cfg, upper("in", "out", nil), slow)
	err := zombie.wait(t, 60*time.Second)
	var fe *eos.FencedError
	if !errors.As(err, &fe) || !errors.Is(err, eos.ErrFenced) || fe.TransactionalID != "app-same" {
		t.Fatalf("zombie should stop with a FencedError naming app-same, got %v", err)
	}
	if !strings.Contains(err.Error(), "app-same") {
		t.Fatalf("message does not name the transactional.id: %v", err)
	}
	until(t, 60*time.Second, "the successor to finish", func() bool {
		return zombie.r.Stats().RecordsIn+successor.r.Stats().RecordsIn >= n
	})
	exactlyOnce(t, env, "out", n)
}

func TestBadInputFailsFast(t *testing.T) {
	t.Run("unreachable broker", func(t *testing.T) {
		cfg := config.Default()
		cfg.Brokers, cfg.AppID, cfg.ConnectTimeout = []string{"127.0.0.1:1"}, "app", 2*time.Second
		r, err := eos.New(cfg, upper("in", "out", nil))
		if err != nil {
			t.Fatal(err)
		}
		begin := time.Now()
		err = r.Run(context.Background())
		if !errors.Is(err, eos.ErrUnreachable) || !strings.Contains(err.Error(), "127.0.0.1:1") {
			t.Fatalf("want ErrUnreachable naming the address, got %v", err)
		}
		if d := time.Since(begin); d > 10*time.Second {
			t.Fatalf("took %s to notice", d)
		}
	})
	t.Run("missing topics", func(t *testing.T) {
		env := kafkatest.Fake(t)
		env.CreateTopics(t, 1, "in")
		r, err := eos.New(env.Config("app", "a", config.ExactlyOnce), upper("in", "nope", nil))
		if err != nil {
			t.Fatal(err)
		}
		err = r.Run(context.Background())
		var me *eos.MissingTopicsError
		if !errors.As(err, &me) || len(me.Topics) != 1 || me.Topics[0] != "nope" {
			t.Fatalf("want MissingTopicsError{nope}, got %v", err)
		}
	})
	t.Run("invalid config", func(t *testing.T) {
		_, err := eos.New(config.Default(), upper("in", "out", nil))
		if !errors.Is(err, config.ErrInvalid) || !strings.Contains(err.Error(), "brokers") {
			t.Fatalf("want a config error naming brokers, got %v", err)
		}
	})
	t.Run("invalid topology", func(t *testing.T) {
		cfg := config.Default()
		cfg.Brokers, cfg.AppID = []string{"127.0.0.1:9092"}, "app"
		_, err := eos.New(cfg, topology.New("empty"))
		if !errors.Is(err, topology.ErrInvalid) {
			t.Fatalf("want a topology error, got %v", err)
		}
	})
}

func TestCloseIsIdempotentAndBounded(t *testing.T) {
	env := kafkatest.Fake(t)
	env.CreateTopics(t, 1, "in", "out")
	r, err := eos.New(env.Config("app", "a", config.ExactlyOnce), upper("in", "out", nil))
	if err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 1)
	go func() { errc <- r.Run(context.Background()) }()
	time.Sleep(200 * time.Millisecond)
	begin := time.Now()
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-errc; err != nil {
		t.Fatalf("Run after Close: %v", err)
	}
	if d := time.Since(begin); d > 15*time.Second {
		t.Fatalf("Close took %s", d)
	}
	if err := r.Run(context.Background()); !errors.Is(err, eos.ErrClosed) {
		t.Fatalf("Run on a closed runner: %v", err)
	}
}

func TestTopologyCodecsEndToEnd(t *testing.T) {
	type order struct {
		ID    int `json:"id"`
		Total int `json:"total"`
	}
	env := kafkatest.Fake(t)
	env.CreateTopics(t, 1, "orders", "big", "small")
	cl := env.Client(t)
	for i := 0; i < 10; i++ {
		b, _ := codec.JSON[order]().Encode(order{ID: i, Total: i * 30})
		if err := cl.ProduceSync(context.Background(), &kgo.Record{Topic: "orders", Value: b}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	top := topology.New("orders")
	in := topology.Source(top, "orders", "orders", codec.JSON[order]())
	parts := topology.Branch(in, "size",
		func(_ []byte, o order) bool { return o.Total >= 100 },
		func([]byte, order) bool { return true })
	topology.To(parts[0], "to-big", "big", codec.JSON[order]())
	topology.ToTopicFunc(parts[1], "to-small", func(topology.Record[order]) string { return "small" }, codec.JSON[order]())
	x := start(t, env.Config("orders", "a", config.ExactlyOnce), top)
	until(t, 30*time.Second, "10 records", func() bool { return x.r.Stats().RecordsIn >= 10 })
	if big, small := drain(t, env, "big", 6), drain(t, env, "small", 4); len(big) != 6 || len(small) != 4 {
		t.Fatalf("big %d small %d, want 6 and 4", len(big), len(small))
	}
}
