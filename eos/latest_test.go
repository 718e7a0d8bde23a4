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
	"github.com/eosflow/eosflow/processor"
	"github.com/eosflow/eosflow/state"
	"github.com/eosflow/eosflow/tools/conformance"
	"github.com/eosflow/eosflow/tools/kafkatest"
	"github.com/eosflow/eosflow/tools/verdict"
	"github.com/eosflow/eosflow/topology"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// latestCount counts per key with LatestPerCommit; check, a Process node
// after the count with error policy p, runs fail on every update it gets
// (all of them at the end of their batch) and passes the rest to out.
func latestCount(in, out string, p topology.ErrorPolicy, fail func(r processor.Record[int64]) error) *topology.Topology {
	top := topology.New()
	src := topology.Source(top, in, codec.Bytes(), topology.Named("in"))
	counts := topology.Count(topology.GroupByKey(src, "by-key"), "counts", state.Memory(), topology.LatestPerCommit())
	checked := topology.Process(topology.ToStream(counts, "updates"), "check", func(ctx processor.Context[int64], r processor.Record[int64]) error {
		if err := fail(r); err != nil {
			return err
		}
		ctx.Emit(r)
		return nil
	})
	topology.To(checked, out, codec.JSON[int64](), topology.Named("out"))
	top.OnError("check", p)
	return top
}

// checkLatestCounts fails t unless, in out (read_committed), each key's
// counts strictly increase and end at n_k, the key's records among 0..n-1,
// except for the keys in unemitted, which must not appear at all; and the
// changelog's last value is n_k for every key. It returns how many outputs
// there were.
func checkLatestCounts(t *testing.T, env *kafkatest.Env, out, changelog string, n int, unemitted map[string]bool) int {
	t.Helper()
	want := map[string]int64{}
	for i := 0; i < n; i++ {
		want[string(verdict.Key(i, conformance.SeedKeys))]++
	}
	seen := map[string]int64{}
	recs := conformance.Drain(t, env, out, len(want)-len(unemitted))
	for _, r := range recs {
		var c int64
		if err := json.Unmarshal(r.Value, &c); err != nil {
			t.Fatalf("output %q: %v", r.Value, err)
		}
		k := string(r.Key)
		if unemitted[k] {
			t.Fatalf("key %s was emitted (count %d), but every update of it was skipped", k, c)
		}
		if c <= seen[k] {
			t.Fatalf("key %s: count %d after %d: an update from an aborted batch, or a doubled one", k, c, seen[k])
		}
		seen[k] = c
	}
	last := map[string]int64{}
	for _, r := range conformance.Drain(t, env, changelog, len(want)) {
		if len(r.Value) == 8 {
			last[string(r.Key)] = int64(binary.BigEndian.Uint64(r.Value))
		}
	}
	for k, n := range want {
		if last[k] != n {
			t.Fatalf("key %s: changelog %d, want %d", k, last[k], n)
		}
		if !unemitted[k] && seen[k] != n {
			t.Fatalf("key %s: output reached %d, want %d", k, seen[k], n)
		}
	}
	return len(recs)
}

// Counting with LatestPerCommit under exactly-once, over many batches,
// through aborted transactions (EndTxn failures after the held-back updates
// were produced in them) and a batch aborted by a Fail at the end of the
// batch (which stops Run; a new Runner redoes it): read_committed readers
// see each key's counts strictly increase to the exact total, with under
// half as many outputs as inputs.
func TestLatestPerCommitExactlyOnce(t *testing.T) {
	env := kafkatest.Fake(t)
	env.CreateTopics(t, 3, "in", "out")
	const n = 3000
	conformance.Seed(t, env, "in", n)
	h := env.Fake.Fault(kfake.Fault{Keys: []kmsg.Key{kmsg.EndTxn}, Err: kerr.UnknownServerError, Count: 2})
	var updates atomic.Int64
	var failed atomic.Bool
	failOnce := func(processor.Record[int64]) error {
		if updates.Add(1) == 150 && failed.CompareAndSwap(false, true) {
			return errors.New("injected failure at the end of the batch")
		}
		return nil
	}
	cfg := env.Config("app", "a", config.ExactlyOnce)
	cfg.MaxBatchRecords = 200
	x := conformance.Start(t, cfg, latestCount("in", "out", topology.Fail(), failOnce))
	err := x.Wait(t, 60*time.Second)
	var re *processor.RecordError
	if !failed.Load() || !errors.As(err, &re) || !strings.Contains(err.Error(), "injected failure at the end of the batch") {
		t.Fatalf("Run: %v (failure injected: %v), want the held-back update's failure naming its input record", err, failed.Load())
	}
	first := x.R.Stats()
	if first.RecordsIn >= n {
		t.Fatalf("the first run committed all %d records, so the failed batch was committed", first.RecordsIn)
	}
	y := conformance.Start(t, cfg, latestCount("in", "out", topology.Fail(), func(processor.Record[int64]) error { return nil }))
	y.WaitCommitted(t, n-first.RecordsIn, 60*time.Second)
	if h.Hits() == 0 {
		t.Fatal("no transaction was failed by the EndTxn fault")
	}
	outs := checkLatestCounts(t, env, "out", topology.ChangelogTopic("app", "counts"), n, nil)
	second := y.R.Stats()
	t.Logf("%d inputs, %d outputs; first run %+v; second run %+v", n, outs, first, second)
	if outs >= n/2 || first.RecordsOut+second.RecordsOut != uint64(outs) {
		t.Fatalf("%d outputs for %d inputs (runs counted %d + %d), want under half as many, each counted once", outs, n, first.RecordsOut, second.RecordsOut)
	}
}

// Without transactions (idempotent, at-least-once) the held-back updates
// go out before the batch's offsets commit: every key reaches its exact
// count, with fewer outputs than inputs.
func TestLatestPerCommitPlainSessions(t *testing.T) {
	for _, g := range []config.Guarantee{config.Idempotent, config.AtLeastOnce} {
		t.Run(string(g), func(t *testing.T) {
			env := kafkatest.Fake(t)
			env.CreateTopics(t, 3, "in", "out")
			const n = 2000
			conformance.Seed(t, env, "in", n)
			cfg := env.Config("app", "a", g)
			cfg.MaxBatchRecords = 500
			x := conformance.Start(t, cfg, latestCount("in", "out", topology.Fail(), func(processor.Record[int64]) error { return nil }))
			x.WaitCommitted(t, n, 60*time.Second)
			if outs := checkLatestCounts(t, env, "out", topology.ChangelogTopic("app", "counts"), n, nil); outs >= n {
				t.Fatalf("%d outputs for %d inputs", outs, n)
			}
		})
	}
}

// A node after the aggregation that skips a held-back update drops that
// update only: its key is never emitted, yet the store (its changelog)
// holds the key's exact count, and the other keys go out.
func TestLatestPerCommitSkipKeepsState(t *testing.T) {
	env := kafkatest.Fake(t)
	env.CreateTopics(t, 1, "in", "out")
	const n = 400
	conformance.Seed(t, env, "in", n)
	skipped := string(verdict.Key(5, conformance.SeedKeys))
	x := conformance.Start(t, env.Config("app", "a", config.ExactlyOnce), latestCount("in", "out", topology.Skip(), func(r processor.Record[int64]) error {
		if string(r.Key) == skipped {
			return errors.New("refused")
		}
		return nil
	}))
	x.WaitCommitted(t, n, 60*time.Second)
	checkLatestCounts(t, env, "out", topology.ChangelogTopic("app", "counts"), n, map[string]bool{skipped: true})
	if s := x.R.Stats(); s.Skipped == 0 {
		t.Fatalf("stats %+v: no update was counted as skipped", s)
	}
}

// Instances joining one after another while counting with
// LatestPerCommit: batches whose partitions are revoked after their
// held-back updates were produced abort (every batch waits a little before
// it ends, so that revokes land there), tasks move with their state, and
// the counts stay exact.
func TestLatestPerCommitRebalance(t *testing.T) {
	env := kafkatest.Fake(t)
	env.CreateTopics(t, 6, "in", "out")
	const instances, per = 3, 1000
	conformance.Seed(t, env, "in", per)
	cfg := env.Config("app", "a", config.ExactlyOnce)
	cfg.MaxBatchRecords = 200
	slow := eos.BeforeCommit(func(context.Context, eos.BatchInfo) error {
		time.Sleep(5 * time.Millisecond)
		return nil
	})
	var runs []*conformance.Run
	total := func() (in uint64) {
		for _, x := range runs {
			in += x.R.Stats().RecordsIn
		}
		return in
	}
	for i := 0; i < instances; i++ {
		c := cfg
		c.InstanceID = fmt.Sprintf("i%d", i)
		c.StateDir = t.TempDir()
		runs = append(runs, conformance.Start(t, c, latestCount("in", "out", topology.Fail(), func(processor.Record[int64]) error { return nil }), slow))
		conformance.WaitAssigned(t, env, "app", c.InstanceID)
		if i > 0 {
			conformance.SeedRange(t, env, "in", i*per, (i+1)*per)
		}
		conformance.Until(t, 120*time.Second, fmt.Sprintf("%d records counted", (i+1)*per), func() bool {
			return total() >= uint64((i+1)*per)
		})
	}
	var restored uint64
	for _, x := range runs[1:] {
		restored += x.R.Stats().Restored
	}
	if restored == 0 {
		t.Fatal("the instances that joined restored nothing: no task moved with its state")
	}
	outs := checkLatestCounts(t, env, "out", topology.ChangelogTopic("app", "counts"), instances*per, nil)
	for i, x := range runs {
		t.Logf("instance %d: %+v", i, x.R.Stats())
	}
	t.Logf("%d inputs, %d outputs", instances*per, outs)
}
