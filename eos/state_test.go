package eos_test

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
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
		})
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
