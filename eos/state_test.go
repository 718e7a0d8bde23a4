package eos_test

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/eosflow/eosflow/internal/store"

	"github.com/eosflow/eosflow/codec"
	"github.com/eosflow/eosflow/config"
	"github.com/eosflow/eosflow/eos"
	"github.com/eosflow/eosflow/processor"
	"github.com/eosflow/eosflow/state"
	"github.com/eosflow/eosflow/state/pebble"
	"github.com/eosflow/eosflow/tools/conformance"
	"github.com/eosflow/eosflow/tools/kafkatest"
	"github.com/eosflow/eosflow/tools/verdict"
	"github.com/eosflow/eosflow/topology"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Counting per key stays exactly-once across aborted transactions (the
// state of an aborted batch is dropped and restored) and a restart (the
// next runner restores its stores from the changelog), for both engines,
// and with the records re-keyed through a repartition topic (GroupBy),
// whose writes commit in the same transactions.
func TestStatefulCountExactlyOnce(t *testing.T) {
	for _, tc := range []struct {
		name    string
		engine  state.Engine
		grouped bool
	}{{"memory", state.Memory(), false}, {"pebble", pebble.New(), false}, {"groupby-memory", state.Memory(), true}} {
		t.Run(tc.name, func(t *testing.T) {
			env := kafkatest.Fake(t)
			env.CreateTopics(t, 3, "in", "out")
			const n = 3000
			top, seed, reads := conformance.CountTopology, conformance.SeedRange, uint64(n/2)
			if tc.grouped {
				// Every record is read twice: from the input, then from
				// the repartition topic.
				top, seed, reads = conformance.GroupedCountTopology, conformance.SeedValues, n
			}
			seed(t, env, "in", 0, n/2)
			h := env.Fake.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.EndTxn}, Err: kerr.UnknownServerError, Count: 3})
			cfg := env.Config("app", "a", config.ExactlyOnce)
			cfg.MaxBatchRecords = 200
			cfg.StateDir = t.TempDir()
			x := conformance.Start(t, cfg, top("in", "out", tc.engine))
			x.WaitCommitted(t, reads, 60*time.Second)
			x.Stop()
			if err := x.Wait(t, 30*time.Second); err != nil {
				t.Fatal(err)
			}
			first := x.R.Stats()
			seed(t, env, "in", n/2, n)
			y := conformance.Start(t, cfg, top("in", "out", tc.engine))
			y.WaitCommitted(t, reads, 60*time.Second)
			if h.Hits() == 0 {
				t.Fatal("no transaction was failed")
			}
			s := y.R.Stats()
			t.Logf("first run %+v; second run %+v", first, s)
			switch tc.engine.String() {
			case "memory":
				if s.Restored == 0 {
					t.Fatal("the second run restored nothing, yet its memory stores started empty")
				}
			case "pebble":
				if s.Restored != 0 {
					t.Fatalf("the second run restored %d records: pebble should resume from its applied offset, which a clean stop left at the changelog's end", s.Restored)
				}
			}
			conformance.CheckCounts(t, env, "out", topology.ChangelogTopic("app", "counts"), n)
			cfgs, err := kadm.NewClient(env.Client(t)).DescribeTopicConfigs(context.Background(), topology.ChangelogTopic("app", "counts"))
			if err != nil {
				t.Fatal(err)
			}
			if rc, err := cfgs.On(topology.ChangelogTopic("app", "counts"), nil); err != nil || !compacted(rc) {
				t.Fatalf("the changelog the runtime made is not compacted: %v %v", rc, err)
			}
		})
	}
}

func compacted(rc kadm.ResourceConfig) bool {
	for _, c := range rc.Configs {
		if c.Key == "cleanup.policy" && c.Value != nil && strings.Contains(*c.Value, "compact") {
			return true
		}
	}
	return false
}

// State needs its changelog committed with its input offsets, which
// at-most-once does not do: New refuses the combination.
func TestStateRefusesAtMostOnce(t *testing.T) {
	cfg := config.Default()
	cfg.Brokers, cfg.AppID, cfg.Guarantee = []string{"127.0.0.1:9092"}, "app", config.AtMostOnce
	if _, err := eos.New(cfg, conformance.CountTopology("in", "out", state.Memory())); err == nil || !strings.Contains(err.Error(), "exactly-once") {
		t.Fatalf("New: %v, want a refusal naming exactly-once", err)
	}
}

// A record that a Process node fails on after writing to its store, and
// that its policy dead-letters, leaves nothing in the store: its writes are
// undone while the rest of its batch commits.
func TestStateOfDeadLetteredRecordIsUndone(t *testing.T) {
	env := kafkatest.Fake(t)
	env.CreateTopics(t, 1, "in", "out", "dlq")
	const n = 200
	conformance.Seed(t, env, "in", n)
	top := topology.New()
	top.AddStore("seen", state.Memory())
	src := topology.Source(top, "in", codec.Bytes())
	kept := topology.Process(src, "remember", func(ctx processor.Context[[]byte], r processor.Record[[]byte]) error {
		st, err := ctx.Store("seen")
		if err != nil {
			return err
		}
		id, _ := verdict.ID(r.Value)
		if err := st.Put([]byte(fmt.Sprint(id)), r.Value); err != nil {
			return err
		}
		if id%10 == 0 {
			return errors.New("fails after writing")
		}
		ctx.Emit(r)
		return nil
	}, topology.UseStores("seen"))
	topology.To(kept, "out", codec.Bytes())
	top.OnError("remember", topology.DeadLetter("dlq"))
	x := conformance.Start(t, env.Config("app", "a", config.ExactlyOnce), top)
	x.WaitCommitted(t, n, 60*time.Second)
	stored := map[string]bool{}
	for _, r := range conformance.Drain(t, env, topology.ChangelogTopic("app", "seen"), n-n/10) {
		stored[string(r.Key)] = true
	}
	for id := 0; id < n; id++ {
		if got, want := stored[fmt.Sprint(id)], id%10 != 0; got != want {
			t.Fatalf("record %d in the store: %v, want %v", id, got, want)
		}
	}
}

// A changelog whose partition count differs from its store's input stops
// Run before anything is consumed, naming both counts.
func TestChangelogPartitionMismatch(t *testing.T) {
	env := kafkatest.Fake(t)
	env.CreateTopics(t, 3, "in", "out")
	env.CreateTopics(t, 2, topology.ChangelogTopic("app", "counts"))
	r, err := eos.New(env.Config("app", "a", config.ExactlyOnce), conformance.CountTopology("in", "out", state.Memory()))
	if err != nil {
		t.Fatal(err)
	}
	err = r.Run(context.Background())
	if err == nil || !strings.Contains(err.Error(), "2 partitions") || !strings.Contains(err.Error(), "has 3") {
		t.Fatalf("Run: %v, want the partition mismatch named", err)
	}
}

// A commit that landed although its answer was lost: the runtime cannot
// know whether the batch's state committed, so it drops the overlay and
// restores the task from the changelog, which says it did. Counts go on
// from there, neither lost nor doubled.
func TestStateAfterUnknownCommitOutcome(t *testing.T) {
	env := kafkatest.Fake(t)
	env.CreateTopics(t, 3, "in", "out")
	const n = 3000
	conformance.Seed(t, env, "in", n)
	applied := loseFirstCommitAnswer(t, env)
	cfg := env.Config("app", "a", config.ExactlyOnce)
	cfg.MaxBatchRecords = 500
	x := conformance.Start(t, cfg, conformance.CountTopology("in", "out", state.Memory()))
	x.WaitCommitted(t, n, 60*time.Second)
	if !applied.Load() {
		t.Fatal("the forwarded commit never applied; the test proves nothing")
	}
	conformance.CheckCounts(t, env, "out", topology.ChangelogTopic("app", "counts"), n)
}

// An existing changelog whose records expire (cleanup.policy=delete) would
// lose the state with them: Run refuses it, naming the fix.
func TestChangelogMustBeCompacted(t *testing.T) {
	env := kafkatest.Fake(t)
	env.CreateTopics(t, 3, "in", "out")
	del := "delete"
	env.CreateTopicsWith(t, 3, map[string]*string{"cleanup.policy": &del}, topology.ChangelogTopic("app", "counts"))
	r, err := eos.New(env.Config("app", "a", config.ExactlyOnce), conformance.CountTopology("in", "out", state.Memory()))
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Run(context.Background()); err == nil || !strings.Contains(err.Error(), "cleanup.policy=delete") || !strings.Contains(err.Error(), "compact") {
		t.Fatalf("Run: %v, want the changelog's policy named with the fix", err)
	}
}

// A changelog record the broker refuses cannot go to any error policy (it
// is state, not an output): Run stops, naming the changelog and the limit
// to raise, instead of redoing the batch until recovery_timeout.
func TestRefusedChangelogRecordStopsRun(t *testing.T) {
	env := kafkatest.Fake(t)
	env.CreateTopics(t, 1, "in", "out")
	conformance.Seed(t, env, "in", 10)
	changelog := topology.ChangelogTopic("app", "counts")
	h := env.Fake.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Topic: changelog, Err: kerr.MessageTooLarge, Count: -1})
	x := conformance.Start(t, env.Config("app", "a", config.ExactlyOnce), conformance.CountTopology("in", "out", state.Memory()))
	err := x.Wait(t, 30*time.Second)
	if h.Hits() == 0 {
		t.Fatal("the fault never hit")
	}
	if err == nil || !strings.Contains(err.Error(), changelog) || !strings.Contains(err.Error(), "max.message.bytes") {
		t.Fatalf("Run: %v, want an error naming the changelog and max.message.bytes", err)
	}
}

// Final window results stay exactly once when commits fail: an aborted
// batch's emissions, window removals and stream time are undone together,
// and the redone batch emits them once.
func TestWindowedFinalResultsUnderFailedCommits(t *testing.T) {
	env := kafkatest.Fake(t)
	h := env.Fake.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.EndTxn}, Err: kerr.UnknownServerError, Count: 4})
	conformance.WindowedFinalResultsExactlyOnce(t, env, state.Memory())
	if h.Hits() == 0 {
		t.Fatal("no commit was failed")
	}
}

// An existing repartition topic that could delete records not yet
// aggregated — compacted, or with time retention while purging is on —
// stops Run naming the fix; with purging off, retention is the user's.
func TestRepartitionTopicConfigsChecked(t *testing.T) {
	s := func(v string) *string { return &v }
	for _, tc := range []struct {
		name    string
		configs map[string]*string
		opts    []eos.Option
		want    string // "" means Run starts
	}{
		{"compacted", map[string]*string{"cleanup.policy": s("compact")}, nil, "cleanup.policy=compact"},
		{"time retention", map[string]*string{"retention.ms": s("86400000")}, nil, "retention.ms=86400000"},
		{"time retention, purging off", map[string]*string{"retention.ms": s("86400000")}, []eos.Option{eos.PurgeInterval(-1)}, ""},
		{"as the runtime makes it", map[string]*string{"retention.ms": s("-1")}, nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := kafkatest.Fake(t)
			env.CreateTopics(t, 3, "in", "out")
			env.CreateTopicsWith(t, 3, tc.configs, topology.RepartitionTopic("app", "by-value"))
			r, err := eos.New(env.Config("app", "a", config.ExactlyOnce), conformance.GroupedCountTopology("in", "out", state.Memory()), tc.opts...)
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
			defer cancel()
			err = r.Run(ctx)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("Run: %v, want it to run", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "kafka-configs.sh")):
				t.Fatalf("Run: %v, want %q named with the fix", err, tc.want)
			}
		})
	}
}

// RepartitionPartitions sizes the repartition topic the runtime creates,
// and the aggregation's changelog follows it, not the input.
func TestRepartitionPartitionsSizeTheTopics(t *testing.T) {
	env := kafkatest.Fake(t)
	env.CreateTopics(t, 3, "in", "out")
	top := topology.New()
	src := topology.Source(top, "in", codec.Bytes())
	g := topology.GroupBy(src, "by-value", func(_ context.Context, _, v []byte) ([]byte, error) { return v, nil },
		topology.Repartition(codec.Bytes()), topology.RepartitionPartitions(5))
	topology.ToTable(topology.Count(g, "counts", state.Memory()), "out", codec.JSON[int64]())
	conformance.SeedValues(t, env, "in", 0, 300)
	x := conformance.Start(t, env.Config("app", "a", config.ExactlyOnce), top)
	x.WaitCommitted(t, 600, 60*time.Second)
	details, err := kadm.NewClient(env.Client(t)).ListTopics(context.Background(), topology.RepartitionTopic("app", "by-value"), topology.ChangelogTopic("app", "counts"))
	if err != nil {
		t.Fatal(err)
	}
	for topic, d := range details {
		if len(d.Partitions) != 5 {
			t.Errorf("%s has %d partitions, want 5", topic, len(d.Partitions))
		}
	}
	conformance.CheckCounts(t, env, "out", topology.ChangelogTopic("app", "counts"), 300)
}

// Topics that share state must have as many partitions: Run refuses them
// at start, naming each count.
func TestCoPartitionedTopicsMustMatch(t *testing.T) {
	env := kafkatest.Fake(t)
	env.CreateTopics(t, 3, "clicks", "out")
	env.CreateTopics(t, 2, "profiles")
	r, err := eos.New(env.Config("app", "a", config.ExactlyOnce), conformance.JoinTopology("clicks", "profiles", "out", state.Memory()))
	if err != nil {
		t.Fatal(err)
	}
	err = r.Run(context.Background())
	if err == nil || !strings.Contains(err.Error(), "co-partitioned") || !strings.Contains(err.Error(), "clicks: 3, profiles: 2") {
		t.Fatalf("Run: %v, want the partition counts named", err)
	}
}

// A stream-table join stays exactly once when commits fail, with the
// table in pebble.
func TestStreamTableJoinUnderFailedCommits(t *testing.T) {
	env := kafkatest.Fake(t)
	h := env.Fake.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.EndTxn}, Err: kerr.UnknownServerError, Count: 4})
	conformance.StreamTableJoinExactlyOnce(t, env, pebble.New())
	if h.Hits() == 0 {
		t.Fatal("no commit was failed")
	}
}

// A stream-stream join stays exactly once when commits fail, with both
// sides' waiting records in pebble.
func TestStreamJoinUnderFailedCommits(t *testing.T) {
	env := kafkatest.Fake(t)
	h := env.Fake.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.EndTxn}, Err: kerr.UnknownServerError, Count: 4})
	conformance.StreamJoinExactlyOnce(t, env, pebble.New())
	if h.Hits() == 0 {
		t.Fatal("no commit was failed")
	}
}

// Every assigned task's stores catch up before a batch begins, all at
// once, so no batch is cut short at its first record to restore one: such
// a batch commits an empty transaction, which franz-go ends only after
// 500ms when it carried no offsets, and a task found one batch after
// another would cost a batch each.
func TestAssignedTasksRestoreBeforeTheBatch(t *testing.T) {
	for _, tc := range []struct {
		name   string
		engine state.Engine
	}{{"memory", state.Memory()}, {"pebble", pebble.New()}} {
		t.Run(tc.name, func(t *testing.T) {
			env := kafkatest.Fake(t)
			env.CreateTopics(t, 6, "in", "out")
			const n = 3000
			conformance.SeedRange(t, env, "in", 0, n)
			cfg := env.Config("app", "a", config.ExactlyOnce)
			cfg.StateDir = t.TempDir()
			var (
				mu    sync.Mutex
				sizes []int
			)
			x := conformance.Start(t, cfg, conformance.CountTopology("in", "out", tc.engine),
				eos.BeforeCommit(func(_ context.Context, b eos.BatchInfo) error {
					mu.Lock()
					sizes = append(sizes, b.Records)
					mu.Unlock()
					return nil
				}))
			x.WaitCommitted(t, n, 60*time.Second)
			mu.Lock()
			defer mu.Unlock()
			for i, records := range sizes {
				if records == 0 {
					t.Fatalf("batch %d of %v committed no input record: it was cut short to restore a task", i, sizes)
				}
			}
			conformance.CheckCounts(t, env, "out", topology.ChangelogTopic("app", "counts"), n)
		})
	}
}

// A repartition topic co-partitioned with a table (a re-keyed stream sent
// Through before a join) is created with the table's partition count, not
// the upstream input's.
func TestRepartitionBeforeJoinTakesTheTablesPartitions(t *testing.T) {
	env := kafkatest.Fake(t)
	env.CreateTopics(t, 3, "clicks", "out")
	env.CreateTopics(t, 5, "profiles")
	top := topology.New()
	clicks := topology.Map(topology.Source(top, "clicks", codec.String()), "by-user",
		func(_ context.Context, _ []byte, v string) ([]byte, string, error) { return []byte(v), v, nil })
	clicks = topology.Through(clicks, "users", topology.Repartition(codec.String()))
	profiles := topology.TableFrom(top, "profiles", codec.String(), state.Memory())
	topology.To(topology.Join(clicks, profiles, "j", func(_ context.Context, _ []byte, c, p string) (string, error) { return c + p, nil }),
		"out", codec.String())
	x := conformance.Start(t, env.Config("app", "a", config.ExactlyOnce), top)
	rep := topology.RepartitionTopic("app", "users")
	conformance.Until(t, 30*time.Second, "the repartition topic made", func() bool {
		details, err := kadm.NewClient(env.Client(t)).ListTopics(context.Background(), rep)
		return err == nil && details[rep].Err == nil && len(details[rep].Partitions) > 0
	})
	details, err := kadm.NewClient(env.Client(t)).ListTopics(context.Background(), rep)
	if err != nil || len(details[rep].Partitions) != 5 {
		t.Fatalf("%s: %d partitions (%v), want 5 as profiles", rep, len(details[rep].Partitions), err)
	}
	x.Stop()
	if err := x.Wait(t, 30*time.Second); err != nil {
		t.Fatal(err)
	}
}

// plantKey writes key into the pebble store "counts" of task in/0 that
// instance keeps under stateDir, as if the store held a key whose delete
// the changelog no longer has; it returns the store's offset before.
func plantKey(t *testing.T, stateDir, instance, key string) int64 {
	t.Helper()
	s, err := store.Open(pebble.New(), filepath.Join(stateDir, "app", instance), "counts", state.Task{Topic: "in", Partition: 0})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	off := s.Offset()
	if off == state.NoOffset {
		t.Fatal("the store applied nothing")
	}
	if err := s.Put([]byte(key), []byte("ghost")); err != nil {
		t.Fatal(err)
	}
	if err := s.Commit(off + 1); err != nil {
		t.Fatal(err)
	}
	return off
}

// hasKey reports whether instance's pebble store "counts" of in/0 holds key.
func hasKey(t *testing.T, stateDir, instance, key string) bool {
	t.Helper()
	s, err := store.Open(pebble.New(), filepath.Join(stateDir, "app", instance), "counts", state.Task{Topic: "in", Partition: 0})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	_, ok, err := s.Get([]byte(key))
	if err != nil {
		t.Fatal(err)
	}
	return ok
}

// runCounts runs the pebble count of in as instance on stateDir until it
// has committed n records, and stops it.
func runCounts(t *testing.T, env *kafkatest.Env, instance, stateDir string, n uint64) eos.Stats {
	t.Helper()
	cfg := env.Config("app", instance, config.ExactlyOnce)
	cfg.MaxBatchRecords = 100
	cfg.StateDir = stateDir
	x := conformance.Start(t, cfg, conformance.CountTopology("in", "out", pebble.New()))
	x.WaitCommitted(t, n, 60*time.Second)
	x.Stop()
	if err := x.Wait(t, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	return x.R.Stats()
}

// A pebble store that last applied longer ago than its changelog's
// delete.retention.ms, while another instance wrote the changelog, may
// hold keys whose deletes compaction has removed since: it is wiped and
// restored in full (the planted key, standing for such a delete, is gone).
// A store with nothing new to read is not wiped, however old.
func TestStaleStoreIsWipedAndRestoredInFull(t *testing.T) {
	t.Parallel()
	env := kafkatest.Fake(t)
	env.CreateTopics(t, 1, "in", "out")
	compact, retention := "compact", "300"
	changelog := topology.ChangelogTopic("app", "counts")
	env.CreateTopicsWith(t, 1, map[string]*string{"cleanup.policy": &compact, "delete.retention.ms": &retention}, changelog)
	dirA, dirB := t.TempDir(), t.TempDir()
	const n = 600
	conformance.SeedRange(t, env, "in", 0, n/2)
	runCounts(t, env, "a", dirA, n/2)
	plantKey(t, dirA, "a", "ghost")
	conformance.SeedRange(t, env, "in", n/2, n)
	runCounts(t, env, "b", dirB, n/2)
	time.Sleep(time.Second) // a's store is now older than delete.retention.ms
	full := uint64(len(conformance.Drain(t, env, changelog, 1)))
	conformance.SeedRange(t, env, "in", n, n+100)
	s := runCounts(t, env, "a", dirA, 100)
	if s.Restored != full {
		t.Fatalf("instance a restored %d changelog records, want all %d: its stale store was not wiped", s.Restored, full)
	}
	if hasKey(t, dirA, "a", "ghost") {
		t.Fatal("the planted key survived: the stale store was caught up, not wiped")
	}
	conformance.CheckCounts(t, env, "out", changelog, n+100)

	time.Sleep(time.Second)
	conformance.SeedRange(t, env, "in", n+100, n+101)
	if s := runCounts(t, env, "a", dirA, 1); s.Restored != 0 {
		t.Fatalf("an idle store with nothing new to read restored %d records: it was wiped needlessly", s.Restored)
	}
}

// A pebble store whose changelog partition now starts after the offset it
// needs next (records were deleted) is wiped and restored from the
// partition's start, instead of stopping Run.
func TestStoreBehindChangelogStartIsWiped(t *testing.T) {
	t.Parallel()
	env := kafkatest.Fake(t)
	env.CreateTopics(t, 1, "in", "out")
	changelog := topology.ChangelogTopic("app", "counts")
	dirA, dirB := t.TempDir(), t.TempDir()
	const n = 600
	conformance.SeedRange(t, env, "in", 0, n/2)
	runCounts(t, env, "a", dirA, n/2)
	off := plantKey(t, dirA, "a", "ghost")
	conformance.SeedRange(t, env, "in", n/2, n)
	runCounts(t, env, "b", dirB, n/2)
	adm := kadm.NewClient(env.Client(t))
	ends, err := adm.ListEndOffsets(context.Background(), changelog)
	if err != nil {
		t.Fatal(err)
	}
	end, _ := ends.Lookup(changelog, 0)
	to := off + (end.Offset-off)/2
	del := kadm.Offsets{}
	del.Add(kadm.Offset{Topic: changelog, Partition: 0, At: to})
	if resp, err := adm.DeleteRecords(context.Background(), del); err != nil || resp.Error() != nil {
		t.Fatalf("deleting changelog records up to %d: %v %v", to, err, resp.Error())
	}
	left := uint64(len(conformance.Drain(t, env, changelog, 1)))
	conformance.SeedRange(t, env, "in", n, n+100)
	s := runCounts(t, env, "a", dirA, 100)
	if s.Restored != left {
		t.Fatalf("instance a restored %d changelog records, want the %d left after offset %d", s.Restored, left, to)
	}
	if hasKey(t, dirA, "a", "ghost") {
		t.Fatal("the planted key survived: the store was not wiped")
	}
}

// countedHalf counts n/2 input records with instance "a" of app "app"
// (one partition, pebble) and returns the broker, the store's changelog
// and how many records it holds.
func countedHalf(t *testing.T, n int) (*kafkatest.Env, string, uint64) {
	t.Helper()
	env := kafkatest.Fake(t)
	env.CreateTopics(t, 1, "in", "out")
	changelog := topology.ChangelogTopic("app", "counts")
	conformance.SeedRange(t, env, "in", 0, n/2)
	runCounts(t, env, "a", t.TempDir(), uint64(n/2))
	return env, changelog, uint64(len(conformance.Drain(t, env, changelog, 1)))
}

// A broker that answers a restore's fetch with OFFSET_OUT_OF_RANGE, as a
// leader that was paused or cut off does for offsets its successor wrote,
// proves nothing about the changelog: the restore starts over on a new
// client with the bounds read afresh, and the counts go on exactly once.
// Run used to stop, advising to delete the task's directory.
func TestRestoreOutlivesAnOffsetOutOfRange(t *testing.T) {
	t.Parallel()
	env := kafkatest.Fake(t)
	env.CreateTopics(t, 1, "in", "out")
	changelog := topology.ChangelogTopic("app", "counts")
	const n = 400
	conformance.SeedRange(t, env, "in", 0, n/2)
	runCounts(t, env, "a", t.TempDir(), n/2)
	conformance.SeedRange(t, env, "in", n/2, n)
	h := env.Fake.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Fetch}, Topic: changelog, Err: kerr.OffsetOutOfRange, Count: 2})
	s := runCounts(t, env, "b", t.TempDir(), n/2) // a new instance restores the changelog in full
	if got := h.Hits(); got != 2 {
		t.Fatalf("the changelog's fetches failed %d times, want 2: the test proves nothing", got)
	}
	if s.Rebuilds == 0 || s.Restored == 0 {
		t.Fatalf("%d rebuilds, %d records restored: want the restore to start over and finish", s.Rebuilds, s.Restored)
	}
	conformance.CheckCounts(t, env, "out", changelog, n)
}

// An OFFSET_OUT_OF_RANGE after part of the changelog was applied: the
// restore starts over from the store's own position, written with its
// data, so nothing is applied twice (Restored equals the changelog's
// records) or skipped (the counts are exact).
func TestRestoreResumesAfterAnOffsetOutOfRangeMidRead(t *testing.T) {
	t.Parallel()
	const n = 400
	env, changelog, records := countedHalf(t, n)
	conformance.SeedRange(t, env, "in", n/2, n)
	midRead := func(req kmsg.Request) bool {
		// The restore reads read_committed; a look for a transaction's
		// outcome reads the changelog too, read_uncommitted.
		f := req.(*kmsg.FetchRequest)
		if f.IsolationLevel != 1 {
			return false
		}
		for _, tp := range f.Topics {
			for _, p := range tp.Partitions {
				if p.FetchOffset > 0 {
					return true
				}
			}
		}
		return false
	}
	h := env.Fake.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.Fetch}, Topic: changelog, Err: kerr.OffsetOutOfRange, When: midRead})
	cfg := env.Config("app", "b", config.ExactlyOnce)
	cfg.MaxBatchRecords, cfg.StateDir = 100, t.TempDir()
	small := eos.ClientOpts(kgo.FetchMaxBytes(1), kgo.FetchMaxPartitionBytes(1)) // a record batch per fetch
	x := conformance.Start(t, cfg, conformance.CountTopology("in", "out", pebble.New()), small)
	x.WaitCommitted(t, n/2, 60*time.Second)
	x.Stop()
	if err := x.Wait(t, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	s := x.R.Stats()
	if got := h.Hits(); got != 1 {
		t.Fatalf("the changelog's fetches failed %d times mid-read, want 1: the test proves nothing", got)
	}
	if s.Rebuilds == 0 || s.Restored != records {
		t.Fatalf("%d rebuilds, %d records restored: want a rebuild, and each of the changelog's %d records applied once", s.Rebuilds, s.Restored, records)
	}
	conformance.CheckCounts(t, env, "out", changelog, n)
}

// A changelog made moments ago can be listed before its partitions answer
// offset requests (on Apache Kafka, UNKNOWN_TOPIC_OR_PARTITION for a
// while after CreateTopics): the restore waits for them instead of
// failing into client rebuilds, which cost the first start seconds.
func TestRestoreWaitsForANewChangelog(t *testing.T) {
	env := kafkatest.Fake(t)
	env.CreateTopics(t, 3, "in", "out")
	const n = 300
	conformance.SeedRange(t, env, "in", 0, n)
	h := env.Fake.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.ListOffsets}, Topic: topology.ChangelogTopic("app", "counts"),
		Err: kerr.UnknownTopicOrPartition, Count: 5})
	cfg := env.Config("app", "a", config.ExactlyOnce)
	x := conformance.Start(t, cfg, conformance.CountTopology("in", "out", state.Memory()))
	x.WaitCommitted(t, n, 60*time.Second)
	if got := h.Hits(); got != 5 {
		t.Fatalf("the changelog's offsets failed %d times, want 5: the test proves nothing", got)
	}
	if s := x.R.Stats(); s.Rebuilds != 0 {
		t.Fatalf("%d client rebuilds while the new changelog did not answer; want the restore to wait for it", s.Rebuilds)
	}
	conformance.CheckCounts(t, env, "out", topology.ChangelogTopic("app", "counts"), n)
}

// abortChangelogWrite writes value for key to partition 0 of changelog in
// a transaction that aborts, and returns the record's offset: a batch
// that EndTxn reported committed but that ended aborted, because a
// restarting broker skipped its commit markers and a later marker of the
// same producer aborted the partition's open records.
func abortChangelogWrite(t *testing.T, env *kafkatest.Env, changelog string, key, value []byte) int64 {
	t.Helper()
	cl := env.Client(t, kgo.TransactionalID("lost-commit"), kgo.DefaultProduceTopic(changelog), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	ctx := context.Background()
	if err := cl.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	res := cl.ProduceSync(ctx, &kgo.Record{Key: key, Value: value, Partition: 0})
	if err := res.FirstErr(); err != nil {
		t.Fatal(err)
	}
	if err := cl.EndTransaction(ctx, kgo.TryAbort); err != nil {
		t.Fatal(err)
	}
	return res[0].Record.Offset
}

// A store must never be ahead of its changelog. A pebble store that
// applied a batch whose changelog records ended aborted (a commit whose
// markers the broker lost) is caught when its last applied record does
// not read back as committed: it is wiped and restored in full, and the
// counts go on from what the changelog holds. Without that check the
// restore started after the aborted record and the key's count jumped.
func TestStoreAheadOfItsChangelogIsWiped(t *testing.T) {
	env := kafkatest.Fake(t)
	env.CreateTopics(t, 1, "in", "out")
	changelog := topology.ChangelogTopic("app", "counts")
	dir := t.TempDir()
	const n = 400
	conformance.SeedRange(t, env, "in", 0, n/2)
	if s := runCounts(t, env, "a", dir, n/2); s.StoresWiped != 0 {
		t.Fatalf("a first run wiped %d stores", s.StoresWiped)
	}
	key := verdict.Key(0, conformance.SeedKeys)
	phantom := binary.BigEndian.AppendUint64(nil, 1000)
	lost := abortChangelogWrite(t, env, changelog, key, phantom)

	s, err := store.Open(pebble.New(), filepath.Join(dir, "app", "a"), "counts", state.Task{Topic: "in", Partition: 0})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Put(key, phantom); err != nil {
		t.Fatal(err)
	}
	if err := s.Commit(lost); err != nil { // applied as if committed
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	conformance.SeedRange(t, env, "in", n/2, n)
	st := runCounts(t, env, "a", dir, n/2)
	if st.StoresWiped != 1 {
		t.Fatalf("%d stores wiped, want the one whose last applied record (offset %d) was aborted", st.StoresWiped, lost)
	}
	conformance.CheckCounts(t, env, "out", changelog, n)
	conformance.SeedRange(t, env, "in", n, n+1)
	if st := runCounts(t, env, "a", dir, 1); st.StoresWiped != 0 {
		t.Fatalf("a store whose last applied record committed was wiped (%d)", st.StoresWiped)
	}
	conformance.CheckCounts(t, env, "out", changelog, n+1)
}

// The chain behind a pebble store that kept a count its changelog lost:
// batch N's EndTxn answers committed but no marker is written (a
// restarting broker skipped them), the repair of the hanging transaction
// aborts N on its output and changelog partitions, and the next batch
// commits, N's input offsets with it. The embedded broker ends N aborted
// while End reports a commit; the next batch commits past N's input. At
// the next start the store, which
// applied N on End's word, reads back every batch it applied since it was
// last checked, finds N's record missing, and is rebuilt from the
// changelog: the store equals the changelog's fold, and the next count of
// N's key follows the last committed one. Checking only the last applied
// record kept N's count, and the key's next count skipped one.
func TestStoreDropsABatchWhoseMarkersWereLost(t *testing.T) {
	env := kafkatest.Fake(t)
	env.CreateTopics(t, 1, "in", "out")
	changelog := topology.ChangelogTopic("app", "counts")
	cfg := env.Config("app", "a", config.ExactlyOnce)
	cfg.StateDir = t.TempDir()
	const n = 100
	conformance.SeedRange(t, env, "in", 0, n)
	x := conformance.Start(t, cfg, conformance.CountTopology("in", "out", pebble.New()))
	x.WaitCommitted(t, n, 60*time.Second)

	// Batch N: its EndTxn reaches the broker as an abort, which ends the
	// transaction on the output and changelog partitions and answers
	// success, so the runtime takes N as committed.
	var fired atomic.Int32
	env.Fake.ControlKey(int16(kmsg.EndTxn), func(req kmsg.Request) (kmsg.Response, error, bool) {
		if end := req.(*kmsg.EndTxnRequest); end.Commit {
			end.Commit = false
			fired.Add(1)
			env.Fake.DropControl() // this one request only
		}
		return nil, nil, false
	})
	produceKey(t, env, "in", "lost")
	x.WaitCommitted(t, n+1, 60*time.Second)
	if got := fired.Load(); got != 1 {
		t.Fatalf("batch N's commit was turned into an abort %d times, want 1: the test proves nothing", got)
	}
	if _, ok := checkCountsFollow(t, env, changelog)["lost"]; ok {
		t.Fatal("batch N's changelog record is committed: the fault did not abort it")
	}
	produceKey(t, env, "in", "next")
	x.WaitCommitted(t, n+2, 60*time.Second)
	x.Stop()
	if err := x.Wait(t, 30*time.Second); err != nil {
		t.Fatal(err)
	}

	produceKey(t, env, "in", "lost")
	y := conformance.Start(t, cfg, conformance.CountTopology("in", "out", pebble.New()))
	y.WaitCommitted(t, 1, 60*time.Second)
	y.Stop()
	if err := y.Wait(t, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	t.Logf("first run %+v; second run %+v", x.R.Stats(), y.R.Stats())
	fold := checkCountsFollow(t, env, changelog)
	s, err := store.Open(pebble.New(), filepath.Join(cfg.StateDir, "app", "a"), "counts", state.Task{Topic: "in", Partition: 0})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	held := map[string]string{}
	for e, err := range s.Range(nil, nil) {
		if err != nil {
			t.Fatal(err)
		}
		held[string(e.Key)] = string(e.Value)
	}
	if !maps.Equal(held, fold) {
		t.Fatalf("the store holds %d keys (lost: %x), the committed changelog's fold %d (lost: %x)", len(held), held["lost"], len(fold), fold["lost"])
	}
	if s := y.R.Stats(); s.StoresWiped != 1 {
		t.Fatalf("%d stores wiped at restart, want the one that applied aborted batch N", s.StoresWiped)
	}
}

// produceKey writes one record with key to partition 0 of topic.
func produceKey(t *testing.T, env *kafkatest.Env, topic, key string) {
	t.Helper()
	rec := &kgo.Record{Topic: topic, Key: []byte(key), Value: []byte(key)}
	if err := env.Client(t).ProduceSync(context.Background(), rec).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

// checkCountsFollow fails t unless every key's counts in out run 1, 2, …
// with none skipped or repeated, and the changelog's last value of each
// key is its last count; it returns the changelog's fold.
func checkCountsFollow(t *testing.T, env *kafkatest.Env, changelog string) map[string]string {
	t.Helper()
	seen := map[string]int64{}
	for _, r := range conformance.Drain(t, env, "out", 1) {
		var c int64
		if err := json.Unmarshal(r.Value, &c); err != nil {
			t.Fatalf("output %q: %v", r.Value, err)
		}
		if k := string(r.Key); c != seen[k]+1 {
			t.Fatalf("key %s: count %d after %d: a lost or doubled update", k, c, seen[k])
		}
		seen[string(r.Key)] = c
	}
	fold := map[string]string{}
	for _, r := range conformance.Drain(t, env, changelog, 1) {
		if r.Value == nil {
			delete(fold, string(r.Key))
			continue
		}
		fold[string(r.Key)] = string(r.Value)
	}
	for k, c := range seen {
		if v := fold[k]; len(v) != 8 || int64(binary.BigEndian.Uint64([]byte(v))) != c {
			t.Fatalf("key %s: output reached %d, changelog holds %x", k, c, v)
		}
	}
	return fold
}

// A development broker that restarts loses its log, changelogs included,
// while a pebble store keeps what it applied: its changelog now ends
// before the store's offset. The store is a cache of the changelog, so it
// is wiped and restored (from nothing) with a warning, instead of
// stopping Run; the counts start again from the new input.
func TestStoreAheadOfALostChangelogIsRebuilt(t *testing.T) {
	dir := t.TempDir()
	const n = 300
	before := kafkatest.Fake(t)
	before.CreateTopics(t, 1, "in", "out")
	conformance.SeedRange(t, before, "in", 0, n)
	if s := runCounts(t, before, "a", dir, n); s.StoresWiped != 0 {
		t.Fatalf("a first run wiped %d stores", s.StoresWiped)
	}
	after := kafkatest.Fake(t) // the restarted broker: an empty log
	after.CreateTopics(t, 1, "in", "out")
	conformance.SeedRange(t, after, "in", 0, n/2)
	s := runCounts(t, after, "a", dir, n/2)
	if s.StoresWiped != 1 {
		t.Fatalf("%d stores wiped, want the one whose changelog ends before its offset", s.StoresWiped)
	}
	conformance.CheckCounts(t, after, "out", topology.ChangelogTopic("app", "counts"), n/2)
}

// A changelog deleted and made again while the group kept its offsets
// lost the state, and the store is its last copy: past recovery_timeout
// of reading the end again (a stale leader can answer with an old one),
// Run stops with an error naming both and what deleting the store costs,
// and wipes nothing.
func TestStoreAheadOfARecreatedChangelogStopsRun(t *testing.T) {
	env := kafkatest.Fake(t)
	env.CreateTopics(t, 1, "in", "out")
	changelog := topology.ChangelogTopic("app", "counts")
	dir := t.TempDir()
	const n = 300
	conformance.SeedRange(t, env, "in", 0, n)
	runCounts(t, env, "a", dir, n)
	adm := kadm.NewClient(env.Client(t))
	if _, err := adm.DeleteTopics(context.Background(), changelog); err != nil {
		t.Fatal(err)
	}
	conformance.SeedRange(t, env, "in", n, n+10) // the runtime makes the changelog again
	cfg := env.Config("app", "a", config.ExactlyOnce)
	cfg.StateDir = dir
	cfg.RecoveryTimeout = 5 * time.Second
	x := conformance.Start(t, cfg, conformance.CountTopology("in", "out", pebble.New()))
	err := x.Wait(t, 60*time.Second)
	if err == nil || !strings.Contains(err.Error(), "last copy of that state") || !strings.Contains(err.Error(), "recovery_timeout 5s") {
		t.Fatalf("Run returned %v; want it stopped on the store ahead of its recreated changelog, past recovery_timeout", err)
	}
	if s := x.R.Stats(); s.StoresWiped != 0 || s.Rebuilds == 0 {
		t.Fatalf("%d stores wiped, %d rebuilds: want the end read again, and the last copy of the state kept", s.StoresWiped, s.Rebuilds)
	}
}
