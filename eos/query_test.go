package eos_test

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
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
	"github.com/eosflow/eosflow/topology"
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
		seen   []string
	)
	check := eos.BeforeCommit(func(_ context.Context, b eos.BatchInfo) error {
		r := runner.Load()
		committed := int64(r.Stats().RecordsIn)
		got, found, err := queryCount(t, r, "k")
		if err != nil || found != (committed > 0) || got != committed {
			t.Errorf("batch of %d records about to end, %d committed before: query answered %d (found %v, %v)", b.Records, committed, got, found, err)
		}
		seen = append(seen, fmt.Sprintf("%d+%d", got, b.Records))
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
// does not declare, says so.
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
	_, _, err = queryCount(t, r, "k1")
	var qe *eos.QueryError
	if !errors.Is(err, eos.ErrStopped) || !errors.As(err, &qe) || qe.Store != "counts" {
		t.Fatalf("before Run: %v, want a *QueryError for ErrStopped", err)
	}
	q, _ := r.Query("counts")
	for _, err := range q.Range(context.Background(), nil, nil) {
		if !errors.Is(err, eos.ErrStopped) {
			t.Fatalf("Range before Run: %v, want ErrStopped", err)
		}
	}
}

// answers tallies what queries answered during a run.
type answers struct {
	mu      sync.Mutex
	values  map[string][]int64 // per key, every value answered, per querier in order
	absent  int
	status  map[string]int // per sentinel
	unknown []error
}

func (a *answers) note(key string, v int64, found bool, err error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	switch {
	case err == nil && found:
		a.values[key] = append(a.values[key], v)
	case err == nil:
		a.absent++
	case errors.Is(err, eos.ErrNotOwner):
		a.status["not owner"]++
	case errors.Is(err, eos.ErrRestoring):
		a.status["restoring"]++
	case errors.Is(err, eos.ErrStopped):
		a.status["stopped"]++
	default:
		a.unknown = append(a.unknown, err)
	}
}

// queryAll queries every key of r over and over until stop closes, into
// a per-querier tally, and fails if a key's count ever goes down (or a
// counted key reads absent).
func queryAll(t *testing.T, r *eos.Runner, keys []string, stop <-chan struct{}, into *answers) func() {
	q, err := r.Query("counts")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		last := map[string]int64{}
		for {
			time.Sleep(time.Millisecond) // leave the pipeline some CPU
			for _, k := range keys {
				select {
				case <-stop:
					return
				default:
				}
				v, found, err := eos.GetAs(context.Background(), q, []byte(k), codec.Int64())
				into.note(k, v, found, err)
				if err == nil { // absent reads as 0: a key once counted never is
					if v < last[k] {
						t.Errorf("key %s: count went down from %d to %d (found %v)", k, last[k], v, found)
					}
					last[k] = v
				}
			}
		}
	}()
	return func() { <-done }
}

// Two instances count while one joins and then leaves, and a goroutine
// per instance queries every key all along. Every value answered is one
// the committed output also shows (1 to the key's final count), never
// decreasing per instance; the other answers say the partition is not
// owned there, restoring, or the instance stopped. Both kinds occur, and
// in the end every key reads its final count.
func TestQueryDuringRebalance(t *testing.T) {
	for _, e := range []state.Engine{state.Memory(), pebble.New()} {
		t.Run(e.String(), func(t *testing.T) { queryDuringRebalance(t, e) })
	}
}

func queryDuringRebalance(t *testing.T, e state.Engine) {
	env := kafkatest.Fake(t)
	env.CreateTopics(t, 6, "in", "out")
	const keys = 24
	var names []string
	for i := range keys {
		names = append(names, string(verdict.Key(i, keys)))
	}
	cfg := env.Config("app", "a", config.ExactlyOnce)
	cfg.MaxBatchRecords = 50
	cfg.StateDir = t.TempDir()
	top := func() *topology.Topology { return conformance.CountTopology("in", "out", e) }
	a := conformance.Start(t, cfg, top())
	conformance.WaitAssigned(t, env, "app", "a")

	produced := map[string]int64{}
	stopProducing, producing := make(chan struct{}), make(chan struct{})
	cl := env.Client(t)
	go func() {
		defer close(producing)
		for i := 0; ; i++ {
			select {
			case <-stopProducing:
				return
			case <-time.After(5 * time.Millisecond):
			}
			k := verdict.Key(i, keys)
			if err := cl.ProduceSync(context.Background(), &kgo.Record{Topic: "in", Key: k, Value: []byte("v")}).FirstErr(); err != nil {
				t.Error(err)
				return
			}
			produced[string(k)]++
		}
	}()

	tally := &answers{values: map[string][]int64{}, status: map[string]int{}}
	stopQueries := make(chan struct{})
	waitA := queryAll(t, a.R, names, stopQueries, tally)
	a.WaitCommitted(t, 200, 60*time.Second)

	bcfg := cfg
	bcfg.InstanceID, bcfg.StateDir = "b", t.TempDir()
	b := conformance.Start(t, bcfg, top())
	waitB := queryAll(t, b.R, names, stopQueries, tally)
	conformance.WaitAssigned(t, env, "app", "b")
	b.WaitCommitted(t, 200, 60*time.Second)
	b.Stop()
	if err := b.Wait(t, 60*time.Second); err != nil {
		t.Fatal(err)
	}
	base := a.R.Stats().RecordsIn
	a.WaitCommitted(t, base+200, 60*time.Second)
	close(stopProducing)
	<-producing
	var total int64
	for _, c := range produced {
		total += c
	}
	a.WaitCommitted(t, uint64(total)-b.R.Stats().RecordsIn, 60*time.Second)
	for _, k := range names {
		conformance.Until(t, 30*time.Second, "key "+k+" reads its final count", func() bool {
			v, _, err := queryCount(t, a.R, k)
			return err == nil && v == produced[k]
		})
	}
	close(stopQueries)
	waitA()
	waitB()

	checkAnswers(t, env, tally, produced, int(total))
}

// checkAnswers fails t unless the committed output shows, per key, the
// counts 1 to its final count in order, every value answered is among
// them, and both values and statuses were answered.
func checkAnswers(t *testing.T, env *kafkatest.Env, tally *answers, produced map[string]int64, total int) {
	t.Helper()
	out := map[string]int64{}
	for _, r := range conformance.Drain(t, env, "out", total) {
		var c int64
		if err := json.Unmarshal(r.Value, &c); err != nil {
			t.Fatal(err)
		}
		if k := string(r.Key); c != out[k]+1 {
			t.Fatalf("key %s: output %d after %d", k, c, out[k])
		}
		out[string(r.Key)] = c
	}
	last := map[string]int64{}
	for _, r := range conformance.Drain(t, env, topology.ChangelogTopic("app", "counts"), len(produced)) {
		last[string(r.Key)] = int64(binary.BigEndian.Uint64(r.Value))
	}
	values := 0
	for k, vs := range tally.values {
		for _, v := range vs {
			if v < 1 || v > out[k] || v > produced[k] {
				t.Fatalf("key %s: a query answered %d, which no committed output had (final %d, produced %d)", k, v, out[k], produced[k])
			}
		}
		values += len(vs)
		if out[k] != produced[k] || last[k] != produced[k] {
			t.Fatalf("key %s: output %d, changelog %d, produced %d", k, out[k], last[k], produced[k])
		}
	}
	t.Logf("answers: %d values, %d absent, statuses %v", values, tally.absent, tally.status)
	if len(tally.unknown) > 0 {
		t.Fatalf("queries failed other than with a status: %v", tally.unknown)
	}
	if values == 0 || tally.status["not owner"] == 0 || tally.status["stopped"] == 0 {
		t.Fatalf("want values, not-owner and stopped answers: %d values, statuses %v", values, tally.status)
	}
}

// With workers > 1 a query reads each key from the worker that owns its
// partition, and Range and Prefix read every worker's partitions: every
// key reads its count, and the ranges hold each key once.
func TestQueryWorkers(t *testing.T) {
	env := kafkatest.Fake(t)
	env.CreateTopics(t, 6, "in", "out")
	const n = 2000
	conformance.SeedRange(t, env, "in", 0, n)
	cfg := env.Config("app", "pod", config.ExactlyOnce)
	cfg.Workers = 2
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
		if err != nil || !loc.Owned {
			t.Fatalf("key %s: %+v %v, want owned by a worker", k, loc, err)
		}
		workers[loc.Worker] = true
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
}
