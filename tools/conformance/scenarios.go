package conformance

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
	"github.com/eosflow/eosflow/internal/runcfg"
	"github.com/eosflow/eosflow/processor"
	"github.com/eosflow/eosflow/state"
	"github.com/eosflow/eosflow/state/pebble"
	"github.com/eosflow/eosflow/tools/kafkatest"
	"github.com/eosflow/eosflow/tools/verdict"
	"github.com/eosflow/eosflow/topology"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// All runs every scenario as a subtest, each on a broker from newEnv.
func All(t *testing.T, newEnv func(testing.TB) *kafkatest.Env) {
	for _, s := range []struct {
		name string
		fn   func(*testing.T, *kafkatest.Env)
	}{
		{"ExactlyOnceAcrossRestart", ExactlyOnceAcrossRestart},
		{"FailAbortsBatchInvisibly", FailAbortsBatchInvisibly},
		{"DeadLetterCommitsWithOffsets", DeadLetterCommitsWithOffsets},
		{"RebalanceTwoInstances", func(t *testing.T, env *kafkatest.Env) { Rebalance(t, env, 2) }},
		{"RebalanceThreeInstances", func(t *testing.T, env *kafkatest.Env) { Rebalance(t, env, 3) }},
		{"ZombieIsFenced", ZombieIsFenced},
		{"GuaranteesHappyPath", GuaranteesHappyPath},
		{"AtMostOnceNeverRepeats", AtMostOnceNeverRepeats},
		{"TopologyCodecsEndToEnd", TopologyCodecsEndToEnd},
		{"SlowTransformCommitsInSmallBatches", SlowTransformCommitsInSmallBatches},
		{"OversizedOutputGoesThroughPolicy", OversizedOutputGoesThroughPolicy},
		{"StatefulCountAcrossRestartMemory", func(t *testing.T, env *kafkatest.Env) { StatefulCountAcrossRestart(t, env, state.Memory()) }},
		{"StatefulCountAcrossRestartPebble", func(t *testing.T, env *kafkatest.Env) { StatefulCountAcrossRestart(t, env, pebble.New()) }},
		{"StatefulRebalanceThreeInstances", func(t *testing.T, env *kafkatest.Env) { StatefulRebalance(t, env, 3) }},
		{"GroupByCountsExactlyOnce", GroupByCountsExactlyOnce},
		{"StreamTableJoinExactlyOnce", func(t *testing.T, env *kafkatest.Env) { StreamTableJoinExactlyOnce(t, env, state.Memory()) }},
		{"StreamJoinExactlyOnce", func(t *testing.T, env *kafkatest.Env) { StreamJoinExactlyOnce(t, env, state.Memory()) }},
		{"OuterJoinExactlyOnce", func(t *testing.T, env *kafkatest.Env) { OuterJoinExactlyOnce(t, env, pebble.New()) }},
		{"TableJoinDeletesExactlyOnce", func(t *testing.T, env *kafkatest.Env) {
			TableJoinDeletesExactlyOnce(t, env, state.Memory(), InnerTableJoin)
		}},
		{"LeftTableJoinExactlyOnce", func(t *testing.T, env *kafkatest.Env) {
			TableJoinDeletesExactlyOnce(t, env, state.Memory(), LeftTableJoin)
		}},
		{"OuterTableJoinExactlyOnce", func(t *testing.T, env *kafkatest.Env) {
			TableJoinDeletesExactlyOnce(t, env, pebble.New(), OuterTableJoin)
		}},
		{"GlobalJoinExactlyOnce", func(t *testing.T, env *kafkatest.Env) { GlobalJoinExactlyOnce(t, env, state.Memory()) }},
		{"WindowedFinalResultsExactlyOnce", func(t *testing.T, env *kafkatest.Env) { WindowedFinalResultsExactlyOnce(t, env, pebble.New()) }},
		{"SessionWindowsExactlyOnce", func(t *testing.T, env *kafkatest.Env) { SessionWindowsExactlyOnce(t, env, pebble.New()) }},
		{"FullStateDirStopsAndRecovers", FullStateDirStopsAndRecovers},
		{"SessionUpdatesExactlyOnce", func(t *testing.T, env *kafkatest.Env) { SessionUpdatesExactlyOnce(t, env, pebble.New()) }},
		{"StreamTimeTimerExactlyOnce", StreamTimeTimerExactlyOnce},
		{"WallClockTimerFiresWithoutInput", WallClockTimerFiresWithoutInput},
		{"WallClockTimersStopOnRevoke", WallClockTimersStopOnRevoke},
		{"WallClockTimerWaitsForACommittedOffset", WallClockTimerWaitsForACommittedOffset},
	} {
		t.Run(s.name, func(t *testing.T) { s.fn(t, newEnv(t)) })
	}
}

// topics creates uniquely named topics with partitions each.
func topics(t *testing.T, env *kafkatest.Env, partitions int32, prefixes ...string) []string {
	t.Helper()
	names := make([]string, len(prefixes))
	for i, p := range prefixes {
		names[i] = env.Name(p)
	}
	env.CreateTopics(t, partitions, names...)
	return names
}

// seededPair creates uniquely named input and output topics with
// partitions each and seeds n records into the input, the start of most
// scenarios.
func seededPair(t *testing.T, env *kafkatest.Env, partitions int32, n int) (in, out string) {
	t.Helper()
	tp := topics(t, env, partitions, "in", "out")
	Seed(t, env, tp[0], n)
	return tp[0], tp[1]
}

// slow makes every batch take a little longer, so that joins, leaves and
// fencing land while work is in flight.
var slow = eos.BeforeCommit(func(context.Context, eos.BatchInfo) error {
	time.Sleep(5 * time.Millisecond)
	return nil
})

// ExactlyOnceAcrossRestart: a graceful stop mid-stream, then a new runner
// with the same instance id finishes; output and committed offsets are
// exact.
func ExactlyOnceAcrossRestart(t *testing.T, env *kafkatest.Env) {
	const n = 6000
	in, out := seededPair(t, env, 3, n)
	app := env.Name("app")
	cfg := env.Config(app, "a", config.ExactlyOnce)
	cfg.MaxBatchRecords = 500

	first := Start(t, cfg, Upper(in, out, nil), slow)
	Until(t, 60*time.Second, "a third of the input", func() bool { return first.R.Stats().RecordsIn >= n/3 })
	first.Stop()
	if err := first.Wait(t, 30*time.Second); err != nil {
		t.Fatalf("cancelled Run should return nil, got %v", err)
	}
	done := first.R.Stats().RecordsIn

	second := Start(t, cfg, Upper(in, out, nil))
	Until(t, 60*time.Second, "the rest of the input", func() bool { return second.R.Stats().RecordsIn >= n-done })
	v := ExactlyOnce(t, env, out, n)
	if got := done + second.R.Stats().RecordsIn; got != n {
		t.Fatalf("committed input records across both runs = %d, want %d", got, n)
	}
	for _, r := range Drain(t, env, out, n)[:10] {
		if !bytes.HasPrefix(r.Value, []byte("ID=")) {
			t.Fatalf("output not transformed: %q", r.Value)
		}
	}
	adm := kadm.NewClient(env.Client(t))
	ctx := context.Background()
	offs, err := adm.FetchOffsets(ctx, app)
	if err != nil {
		t.Fatal(err)
	}
	ends, err := adm.ListEndOffsets(ctx, in)
	if err != nil {
		t.Fatal(err)
	}
	ends.Each(func(e kadm.ListedOffset) {
		if o, ok := offs.Lookup(in, e.Partition); !ok || o.At != e.Offset {
			t.Errorf("partition %d committed %v, end %d", e.Partition, o.At, e.Offset)
		}
	})
	t.Logf("verdict: %v", v)
}

// FailAbortsBatchInvisibly: a record failing under the Fail policy aborts
// its batch; read_committed sees none of it though it was written.
func FailAbortsBatchInvisibly(t *testing.T, env *kafkatest.Env) {
	in, out := seededPair(t, env, 1, 100)
	cfg := env.Config(env.Name("app"), "a", config.ExactlyOnce)
	cfg.CommitInterval = 2 * time.Second // all 100 records in one batch

	// Give the outputs before the failure time to reach the broker, so
	// that only the abort can be what hides them.
	x := Start(t, cfg, Upper(in, out, func(id int) bool {
		if id == 50 {
			time.Sleep(500 * time.Millisecond)
		}
		return id == 50
	}))
	err := x.Wait(t, 60*time.Second)
	var re *processor.RecordError
	var ne *topology.NodeError
	if !errors.As(err, &re) || re.Offset != 50 || !errors.As(err, &ne) || ne.Node != "upper" {
		t.Fatalf("want the failing record and node named, got %v", err)
	}
	if s := x.R.Stats(); s.Aborted != 1 || s.Committed != 0 {
		t.Fatalf("stats %+v, want one aborted batch", s)
	}
	if got := Drain(t, env, out, 0); len(got) != 0 {
		t.Fatalf("read_committed saw %d records of an aborted batch", len(got))
	}
	uncommitted := env.Client(t, kgo.ConsumeTopics(out), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if fs := uncommitted.PollFetches(ctx); fs.NumRecords() == 0 {
		t.Fatalf("read_uncommitted saw nothing: the batch was never produced, so the test proves nothing")
	}

	fixed := Start(t, cfg, Upper(in, out, nil))
	Until(t, 60*time.Second, "all records", func() bool { return fixed.R.Stats().RecordsIn >= 100 })
	ExactlyOnce(t, env, out, 100)
}

// DeadLetterCommitsWithOffsets: dead letters and outputs together hold the
// input once each. On the embedded broker the first commit is failed too,
// so the dead letters of that batch must vanish with it and come back once.
func DeadLetterCommitsWithOffsets(t *testing.T, env *kafkatest.Env) {
	tp := topics(t, env, 2, "in", "out", "dlq")
	in, out, dlq := tp[0], tp[1], tp[2]
	const n = 1000
	Seed(t, env, in, n)
	var fault *kfake.FaultHandle
	if env.Fake != nil {
		fault = env.Fake.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.EndTxn}, Err: kerr.UnknownServerError})
	}
	top := Upper(in, out, func(id int) bool { return id%10 == 0 })
	top.OnError("upper", topology.DeadLetter(dlq))
	x := Start(t, env.Config(env.Name("app"), "a", config.ExactlyOnce), top)
	Until(t, 60*time.Second, "all records", func() bool { return x.R.Stats().RecordsIn >= n })

	outs := Drain(t, env, out, n*9/10)
	dead := Drain(t, env, dlq, n/10)
	v := verdict.Judge(n, append(outs, dead...))
	if !v.OK() || len(dead) != n/10 {
		t.Fatalf("outputs plus dead letters must be the input once each: %v (dlq %d)", v, len(dead))
	}
	for _, r := range dead {
		id, _ := verdict.ID(r.Value)
		if id%10 != 0 || !hasHeader(r, processor.HeaderNode, "upper") || !hasHeader(r, processor.HeaderSourceTopic, in) {
			t.Fatalf("dead letter %q lacks the original value or error headers: %v", r.Value, r.Headers)
		}
	}
	if fault != nil && (fault.Hits() == 0 || x.R.Stats().Aborted == 0) {
		t.Fatalf("the injected EndTxn failure never happened (hits %d, stats %+v)", fault.Hits(), x.R.Stats())
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

// Rebalance: k instances join one by one mid-stream, then the first leaves
// mid-stream; every input record commits exactly once across them.
func Rebalance(t *testing.T, env *kafkatest.Env, k int) {
	const n = 20000
	in, out := seededPair(t, env, 6, n)
	cfg := env.Config(env.Name("app"), "i0", config.ExactlyOnce)
	cfg.MaxBatchRecords = 200
	runs := []*Run{Start(t, cfg, Upper(in, out, nil), slow)}
	total := func() uint64 {
		var s uint64
		for _, r := range runs {
			s += r.R.Stats().RecordsIn
		}
		return s
	}
	for i := 1; i < k; i++ {
		Until(t, 60*time.Second, "progress before the next join", func() bool { return total() >= uint64(2000*i) })
		cfg.InstanceID = "i" + string(rune('0'+i))
		joined := Start(t, cfg, Upper(in, out, nil), slow)
		runs = append(runs, joined)
		Until(t, 60*time.Second, "the new instance to commit", func() bool { return joined.R.Stats().RecordsIn > 0 })
	}
	runs[0].Stop() // the first leaves mid-stream: one more rebalance
	if err := runs[0].Wait(t, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	Until(t, 120*time.Second, "all records", func() bool { return total() >= n })
	ExactlyOnce(t, env, out, n)
	if got := total(); got != n {
		t.Fatalf("committed input records %d, want %d", got, n)
	}
}

// ZombieIsFenced: a second process with the same instance id fences the
// first, which stops with a FencedError naming its transactional.id; the
// successor finishes exactly once.
func ZombieIsFenced(t *testing.T, env *kafkatest.Env) {
	const n = 20000
	in, out := seededPair(t, env, 3, n)
	app := env.Name("app")
	cfg := env.Config(app, "same", config.ExactlyOnce)
	cfg.MaxBatchRecords = 200
	zombie := Start(t, cfg, Upper(in, out, nil), slow)
	Until(t, 60*time.Second, "progress", func() bool { return zombie.R.Stats().RecordsIn >= 1000 })
	successor := Start(t, cfg, Upper(in, out, nil), slow)
	err := zombie.Wait(t, 90*time.Second)
	var fe *eos.FencedError
	if !errors.As(err, &fe) || !errors.Is(err, eos.ErrFenced) || fe.TransactionalID != runcfg.TransactionalID(cfg) {
		t.Fatalf("zombie should stop with a FencedError naming %s, got %v", runcfg.TransactionalID(cfg), err)
	}
	if !strings.Contains(err.Error(), runcfg.TransactionalID(cfg)) {
		t.Fatalf("message does not name the transactional.id: %v", err)
	}
	Until(t, 120*time.Second, "the successor to finish", func() bool {
		return zombie.R.Stats().RecordsIn+successor.R.Stats().RecordsIn >= n
	})
	ExactlyOnce(t, env, out, n)
}

// GuaranteesHappyPath: every guarantee delivers everything when nothing
// fails, and stops cleanly.
func GuaranteesHappyPath(t *testing.T, env *kafkatest.Env) {
	for _, g := range config.Guarantees() {
		t.Run(string(g), func(t *testing.T) {
			tp := topics(t, env, 3, "in", "out")
			const n = 2000
			Seed(t, env, tp[0], n)
			x := Start(t, env.Config(env.Name("app"), "a", g), Upper(tp[0], tp[1], nil))
			Until(t, 60*time.Second, "all records", func() bool { return x.R.Stats().RecordsIn >= n })
			ExactlyOnce(t, env, tp[1], n)
			x.Stop()
			if err := x.Wait(t, 30*time.Second); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// errStopBatch is the processing error AtMostOnceNeverRepeats stops a
// runner with mid-stream.
var errStopBatch = errors.New("conformance: injected batch failure")

// AtMostOnceNeverRepeats: at-most-once may lose records but never repeats
// one. On the embedded broker the offset commit that precedes processing
// fails a few times; on every broker a batch fails mid-stream, stopping
// its runner, and a successor with the same instance id finishes the
// input. The output must hold no record twice, and each failure may lose
// at most the one batch it hit.
func AtMostOnceNeverRepeats(t *testing.T, env *kafkatest.Env) {
	const n, batch, commitFaults = 6000, 200, 3
	in, out := seededPair(t, env, 3, n)
	app := env.Name("app")
	cfg := env.Config(app, "a", config.AtMostOnce)
	cfg.MaxBatchRecords = batch
	var fault *kfake.FaultHandle
	if env.Fake != nil {
		fault = env.Fake.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.OffsetCommit}, Group: app, Err: kerr.UnknownServerError, Count: commitFaults})
	}
	// Fail the batch that passes a third of the input, its outputs
	// already produced and its offsets already committed.
	var seen atomic.Int64
	first := Start(t, cfg, Upper(in, out, nil), eos.BeforeCommit(func(_ context.Context, b eos.BatchInfo) error {
		if seen.Add(int64(b.Records)) >= n/3 {
			return errStopBatch
		}
		return nil
	}))
	if err := first.Wait(t, 60*time.Second); !errors.Is(err, errStopBatch) {
		t.Fatalf("the first runner should stop on the injected batch failure, got %v", err)
	}
	second := Start(t, cfg, Upper(in, out, nil))
	adm := kadm.NewClient(env.Client(t))
	Until(t, 120*time.Second, "the group to consume every input record", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		return verdict.CaughtUp(ctx, adm, app, in)
	})
	second.Stop()
	if err := second.Wait(t, 30*time.Second); err != nil {
		t.Fatalf("cancelled Run should return nil, got %v", err)
	}
	faults := 1
	if fault != nil {
		if fault.Hits() == 0 {
			t.Fatal("the injected offset commit failure never happened: the test proves nothing")
		}
		faults += fault.Hits()
	}
	// Both runners are closed, so every fire-and-forget output was
	// flushed; read until at least what the failures cannot have lost.
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	recs, err := verdict.Drain(ctx, env.ClientOpts(t), out, n-faults*batch, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	v := verdict.Judge(n, recs)
	t.Logf("verdict: %v after %d faults; first runner %+v, second %+v", v, faults, first.R.Stats(), second.R.Stats())
	if v.Duplicates != 0 || v.Unknown != 0 {
		t.Fatalf("at-most-once repeated records: %v", v)
	}
	if v.Missing > faults*batch {
		t.Fatalf("lost %d records through %d faults: more than one batch of %d per fault", v.Missing, faults, batch)
	}
}

// TopologyCodecsEndToEnd: JSON values through Branch, To and ToTopicFunc.
func TopologyCodecsEndToEnd(t *testing.T, env *kafkatest.Env) {
	type order struct {
		ID    int `json:"id"`
		Total int `json:"total"`
	}
	tp := topics(t, env, 1, "orders", "big", "small")
	cl := env.Client(t)
	for i := 0; i < 10; i++ {
		b, _ := codec.JSON[order]().Encode(order{ID: i, Total: i * 30})
		if err := cl.ProduceSync(context.Background(), &kgo.Record{Topic: tp[0], Value: b}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	top := topology.New()
	src := topology.Source(top, tp[0], codec.JSON[order](), topology.Named("orders"))
	parts := topology.Branch(src, "size",
		func(_ []byte, o order) bool { return o.Total >= 100 },
		func([]byte, order) bool { return true })
	topology.To(parts[0], tp[1], codec.JSON[order](), topology.Named("to-big"))
	topology.ToTopicFunc(parts[1], "to-small", func(context.Context, topology.Record[order]) (string, error) { return tp[2], nil }, codec.JSON[order]())
	x := Start(t, env.Config(env.Name("orders"), "a", config.ExactlyOnce), top)
	Until(t, 60*time.Second, "10 records", func() bool { return x.R.Stats().RecordsIn >= 10 })
	if big, small := Drain(t, env, tp[1], 6), Drain(t, env, tp[2], 4); len(big) != 6 || len(small) != 4 {
		t.Fatalf("big %d small %d, want 6 and 4", len(big), len(small))
	}
}
