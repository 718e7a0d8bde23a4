package eos_test

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/eosflow/eosflow/codec"
	"github.com/eosflow/eosflow/config"
	"github.com/eosflow/eosflow/eos"
	"github.com/eosflow/eosflow/internal/conformance"
	"github.com/eosflow/eosflow/internal/kafkatest"
	"github.com/eosflow/eosflow/internal/verdict"
	"github.com/eosflow/eosflow/processor"
	"github.com/eosflow/eosflow/state"
	"github.com/eosflow/eosflow/topology"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// countTopology counts the records of each key of in, writing each new
// count to out.
func countTopology(in, out string, e state.Engine) *topology.Topology {
	top := topology.New("count")
	src := topology.Source(top, "in", in, codec.Bytes())
	counts := topology.Count(topology.GroupByKey(src, "by-key"), "counts", e)
	topology.ToTable(counts, "out", out, codec.JSON[int64]())
	return top
}

// checkCounts fails t unless, for every key, the counts in out are 1, 2,
// … n_k in order (no lost update, no double count), and the changelog's
// last value per key is n_k.
func checkCounts(t *testing.T, env *kafkatest.Env, out, changelog string, n, keys int) {
	t.Helper()
	want := map[string]int64{}
	for i := 0; i < n; i++ {
		want[string(verdict.Key(i, keys))]++
	}
	seen := map[string]int64{}
	for _, r := range conformance.Drain(t, env, out, n) {
		var c int64
		if err := json.Unmarshal(r.Value, &c); err != nil {
			t.Fatalf("output %q: %v", r.Value, err)
		}
		if k := string(r.Key); c != seen[k]+1 {
			t.Fatalf("key %s: count %d after %d: a lost or doubled update", k, c, seen[k])
		}
		seen[string(r.Key)] = c
	}
	last := map[string]int64{}
	for _, r := range conformance.Drain(t, env, changelog, len(want)) {
		if len(r.Value) == 8 {
			last[string(r.Key)] = int64(binary.BigEndian.Uint64(r.Value))
		}
	}
	for k, n := range want {
		if seen[k] != n || last[k] != n {
			t.Fatalf("key %s: output reached %d, changelog %d, want %d", k, seen[k], last[k], n)
		}
	}
}

// Counting per key stays exactly-once across aborted transactions (the
// state of an aborted batch is dropped and restored) and a restart (the
// next runner restores its stores from the changelog), for both engines.
func TestStatefulCountExactlyOnce(t *testing.T) {
	for _, tc := range []struct {
		name   string
		engine state.Engine
	}{{"memory", state.Memory()}, {"pebble", state.Pebble()}} {
		t.Run(tc.name, func(t *testing.T) {
			env := kafkatest.Fake(t)
			env.CreateTopics(t, 3, "in", "out")
			const n, keys = 3000, 97 // conformance.Seed's keys
			conformance.Seed(t, env, "in", n/2)
			h := env.Fake.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.EndTxn}, Err: kerr.UnknownServerError, Count: 3})
			cfg := env.Config("app", "a", config.ExactlyOnce)
			cfg.MaxBatchRecords = 200
			cfg.StateDir = t.TempDir()
			x := conformance.Start(t, cfg, countTopology("in", "out", tc.engine))
			x.WaitCommitted(t, n/2, 60*time.Second)
			x.Stop()
			if err := x.Wait(t, 30*time.Second); err != nil {
				t.Fatal(err)
			}
			first := x.R.Stats()
			seedFrom(t, env, "in", n/2, n)
			y := conformance.Start(t, cfg, countTopology("in", "out", tc.engine))
			y.WaitCommitted(t, n/2, 60*time.Second)
			if h.Hits() == 0 {
				t.Fatal("no transaction was failed")
			}
			s := y.R.Stats()
			t.Logf("first run %+v; second run %+v", first, s)
			switch tc.name {
			case "memory":
				if s.Restored == 0 {
					t.Fatal("the second run restored nothing, yet its memory stores started empty")
				}
			case "pebble":
				if s.Restored != 0 {
					t.Fatalf("the second run restored %d records: pebble should resume from its applied offset, which a clean stop left at the changelog's end", s.Restored)
				}
			}
			checkCounts(t, env, "out", topology.ChangelogTopic("app", "counts"), n, keys)
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
	if _, err := eos.New(cfg, countTopology("in", "out", state.Memory())); err == nil || !strings.Contains(err.Error(), "exactly-once") {
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
	top := topology.New("remember")
	top.AddStore("seen", state.Memory())
	src := topology.Source(top, "in", "in", codec.Bytes())
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
	topology.To(kept, "out", "out", codec.Bytes())
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
	r, err := eos.New(env.Config("app", "a", config.ExactlyOnce), countTopology("in", "out", state.Memory()))
	if err != nil {
		t.Fatal(err)
	}
	err = r.Run(context.Background())
	if err == nil || !strings.Contains(err.Error(), "2 partitions") || !strings.Contains(err.Error(), "has 3") {
		t.Fatalf("Run: %v, want the partition mismatch named", err)
	}
}

// seedFrom writes records from..to-1 to topic, keyed as conformance.Seed
// keys them.
func seedFrom(t *testing.T, env *kafkatest.Env, topic string, from, to int) {
	t.Helper()
	cl := env.Client(t)
	for i := from; i < to; i++ {
		cl.Produce(context.Background(), &kgo.Record{Topic: topic, Key: verdict.Key(i, 97), Value: verdict.Value(i, 40)}, nil)
	}
	if err := cl.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// A commit that landed although its answer was lost: the runtime cannot
// know whether the batch's state committed, so it drops the overlay and
// restores the task from the changelog, which says it did. Counts go on
// from there, neither lost nor doubled.
func TestStateAfterUnknownCommitOutcome(t *testing.T) {
	env := kafkatest.Fake(t)
	env.CreateTopics(t, 3, "in", "out")
	const n, keys = 3000, 97
	conformance.Seed(t, env, "in", n)
	var fired, applied atomic.Bool
	fwd := env.Client(t)
	env.Fake.ControlKey(int16(kmsg.EndTxn), func(req kmsg.Request) (kmsg.Response, error, bool) {
		end := req.(*kmsg.EndTxnRequest)
		if !end.Commit || fired.Load() {
			return nil, nil, false
		}
		fired.Store(true)
		done := make(chan struct{})
		go func() {
			defer close(done)
			resp, err := end.RequestWith(context.Background(), fwd)
			applied.Store(err == nil && resp.ErrorCode == 0)
		}()
		env.Fake.SleepControl(func() { <-done })
		return nil, errors.New("connection dropped after the commit applied"), true
	})
	cfg := env.Config("app", "a", config.ExactlyOnce)
	cfg.MaxBatchRecords = 500
	x := conformance.Start(t, cfg, countTopology("in", "out", state.Memory()))
	x.WaitCommitted(t, n, 60*time.Second)
	if !applied.Load() {
		t.Fatal("the forwarded commit never applied; the test proves nothing")
	}
	checkCounts(t, env, "out", topology.ChangelogTopic("app", "counts"), n, keys)
}

// Tasks move with their state when instances join: the joining instance
// restores what the others committed, and every key still counts 1, 2, …
// n_k across the moves.
func TestStateMovesWithRebalances(t *testing.T) {
	env := kafkatest.Fake(t)
	env.CreateTopics(t, 6, "in", "out")
	const n, keys = 6000, 97
	conformance.Seed(t, env, "in", n/3)
	cfg := env.Config("app", "a", config.ExactlyOnce)
	cfg.MaxBatchRecords = 200
	cfg.StateDir = t.TempDir()
	var runs []*conformance.Run
	total := func() (in uint64) {
		for _, x := range runs {
			in += x.R.Stats().RecordsIn
		}
		return in
	}
	for i, id := range []string{"a", "b", "c"} {
		c := cfg
		c.InstanceID = id
		c.StateDir = fmt.Sprintf("%s/%s", cfg.StateDir, id)
		x := conformance.Start(t, c, countTopology("in", "out", state.Memory()))
		runs = append(runs, x)
		waitAssigned(t, env, "app", id)
		if i > 0 {
			seedFrom(t, env, "in", i*n/3, (i+1)*n/3)
		}
		// The newcomer took partitions whose counts the others made.
		deadline := time.Now().Add(90 * time.Second)
		for x.R.Stats().RecordsIn == 0 || total() < uint64((i+1)*n/3) {
			if time.Now().After(deadline) {
				for j, y := range runs {
					t.Logf("instance %d: %+v", j, y.R.Stats())
				}
				t.Fatalf("timed out waiting for %s counting, %d records in all", id, (i+1)*n/3)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	var restored uint64
	for _, x := range runs[1:] {
		restored += x.R.Stats().Restored
	}
	if restored == 0 {
		t.Fatal("the instances that joined restored nothing: no task moved with its state")
	}
	t.Logf("the joining instances restored %d changelog records", restored)
	checkCounts(t, env, "out", topology.ChangelogTopic("app", "counts"), n, keys)
}

// waitAssigned waits until the group gives instance some partitions, so
// that records seeded next reach it.
func waitAssigned(t *testing.T, env *kafkatest.Env, group, instance string) {
	t.Helper()
	adm := kadm.NewClient(env.Client(t))
	conformance.Until(t, 60*time.Second, instance+" assigned partitions", func() bool {
		described, err := adm.DescribeGroups(context.Background(), group)
		if err != nil {
			return false
		}
		for _, m := range described[group].Members {
			if m.InstanceID != nil && *m.InstanceID == instance {
				if ca, ok := m.Assigned.AsConsumer(); ok && len(ca.Topics) > 0 {
					return true
				}
			}
		}
		return false
	})
}
