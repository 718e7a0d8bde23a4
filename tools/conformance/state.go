package conformance

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/eosflow/eosflow/codec"
	"github.com/eosflow/eosflow/config"
	"github.com/eosflow/eosflow/eos"
	"github.com/eosflow/eosflow/state"
	"github.com/eosflow/eosflow/tools/kafkatest"
	"github.com/eosflow/eosflow/tools/verdict"
	"github.com/eosflow/eosflow/topology"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// SeedKeys is how many distinct keys Seed and SeedRange spread records over.
const SeedKeys = 97

// CountTopology counts the records of each key of in (a store called
// "counts" in engine e), writing each new count to out as JSON.
func CountTopology(in, out string, e state.Engine) *topology.Topology {
	top := topology.New()
	src := topology.Source(top, in, codec.Bytes(), topology.Named("in"))
	counts := topology.Count(topology.GroupByKey(src, "by-key"), "counts", e)
	topology.ToTable(counts, out, codec.JSON[int64](), topology.Named("out"))
	return top
}

// SeedRange writes records from..to-1 to topic, keyed as Seed keys them.
func SeedRange(t *testing.T, env *kafkatest.Env, topic string, from, to int) {
	t.Helper()
	cl := env.Client(t)
	for i := from; i < to; i++ {
		cl.Produce(context.Background(), &kgo.Record{Topic: topic, Key: verdict.Key(i, SeedKeys), Value: verdict.Value(i, 40)}, nil)
	}
	if err := cl.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// CheckCounts fails t unless, for every key of records 0..n-1, the counts
// in out are 1, 2, … n_k in order (no lost update, no double count), and
// the changelog's last value per key is n_k.
func CheckCounts(t *testing.T, env *kafkatest.Env, out, changelog string, n int) {
	t.Helper()
	want := map[string]int64{}
	for i := 0; i < n; i++ {
		want[string(verdict.Key(i, SeedKeys))]++
	}
	seen := map[string]int64{}
	for _, r := range Drain(t, env, out, n) {
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
	for _, r := range Drain(t, env, changelog, len(want)) {
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

// StatefulCountAcrossRestart counts per key with engine, stops the
// pipeline half way and starts a new one: the new one restores its store
// (memory: from the changelog; pebble: from its own offset) and every key
// counts 1, 2, … n_k exactly once.
func StatefulCountAcrossRestart(t *testing.T, env *kafkatest.Env, engine state.Engine) {
	const n = 2000
	in, out := seededPair(t, env, 3, n/2)
	app := env.Name("count")
	cfg := env.Config(app, "a", config.ExactlyOnce)
	cfg.MaxBatchRecords = 300
	cfg.StateDir = t.TempDir()
	x := Start(t, cfg, CountTopology(in, out, engine))
	x.WaitCommitted(t, n/2, 90*time.Second)
	// The first start made the changelog: the runtime waits until the
	// new topic answers rather than failing a restore on it and
	// rebuilding its clients.
	if s := x.R.Stats(); s.Rebuilds != 0 {
		t.Errorf("%d client rebuilds on the first start, which created the changelog; want 0", s.Rebuilds)
	}
	x.Stop()
	if err := x.Wait(t, 60*time.Second); err != nil {
		t.Fatal(err)
	}
	SeedRange(t, env, in, n/2, n)
	y := Start(t, cfg, CountTopology(in, out, engine))
	y.WaitCommitted(t, n/2, 90*time.Second)
	t.Logf("%s: restored %d changelog records on restart", engine, y.R.Stats().Restored)
	CheckCounts(t, env, out, topology.ChangelogTopic(app, "counts"), n)
}

// GroupedCountTopology counts the records of in by their values, whatever
// their keys: GroupBy sends them through the repartition topic of its node
// "by-value", and the store "counts" (engine e) has that topic's
// partitions as its tasks. Each new count goes to out as JSON, keyed by
// the value.
func GroupedCountTopology(in, out string, e state.Engine) *topology.Topology {
	top := topology.New()
	src := topology.Source(top, in, codec.Bytes(), topology.Named("in"))
	g := topology.GroupBy(src, "by-value", func(_ context.Context, _, v []byte) ([]byte, error) { return v, nil },
		topology.Repartition(codec.Bytes()))
	topology.ToTable(topology.Count(g, "counts", e), out, codec.JSON[int64](), topology.Named("out"))
	return top
}

// SeedValues writes records from..to-1 to topic, each under a key of its
// own (so they spread over every partition) with the value that Seed
// would give record i as its key: CheckCounts then applies to a count by
// value.
func SeedValues(t *testing.T, env *kafkatest.Env, topic string, from, to int) {
	t.Helper()
	cl := env.Client(t)
	for i := from; i < to; i++ {
		cl.Produce(context.Background(), &kgo.Record{Topic: topic, Key: []byte(fmt.Sprintf("r%d", i)), Value: verdict.Key(i, SeedKeys)}, nil)
	}
	if err := cl.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// GroupByCountsExactlyOnce counts records by a key taken from their
// values, through a repartition topic, while a second instance joins and
// takes tasks of both sub-topologies: every key must count 1, 2, … n_k
// exactly once. The runtime must have made the repartition topic as a
// delete-policy topic with the input's partition count, and purged the
// records the group had committed past.
func GroupByCountsExactlyOnce(t *testing.T, env *kafkatest.Env) {
	const n = 2000
	names := topics(t, env, 3, "in", "out")
	in, out := names[0], names[1]
	SeedValues(t, env, in, 0, n/2)
	app := env.Name("grouped")
	cfg := env.Config(app, "a", config.ExactlyOnce)
	cfg.MaxBatchRecords = 200
	f := newFleet(t, env, cfg, func() *topology.Topology { return GroupedCountTopology(in, out, state.Memory()) }, eos.PurgeInterval(100*time.Millisecond))
	for i, instance := range []string{"a", "b"} {
		f.start(instance)
		if i > 0 {
			SeedValues(t, env, in, n/2, n)
		}
		// Each record is read twice: from the input, then re-keyed
		// from the repartition topic.
		Until(t, 120*time.Second, fmt.Sprintf("%d records counted", (i+1)*n/2), func() bool { return f.recordsIn() >= uint64((i+1)*n) })
	}
	CheckCounts(t, env, out, topology.ChangelogTopic(app, "counts"), n)

	rep := topology.RepartitionTopic(app, "by-value")
	adm := kadm.NewClient(env.Client(t))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	details, err := adm.ListTopics(ctx, rep)
	if err != nil || details[rep].Err != nil || len(details[rep].Partitions) != 3 {
		t.Fatalf("repartition topic %s: %+v %v; want 3 partitions, as its input", rep, details[rep], err)
	}
	cfgs, err := adm.DescribeTopicConfigs(ctx, rep)
	if err != nil {
		t.Fatal(err)
	}
	rc, err := cfgs.On(rep, nil)
	if err != nil {
		t.Fatal(err)
	}
	seen := 0
	for _, c := range rc.Configs {
		switch {
		case c.Key == "cleanup.policy" && (c.Value == nil || *c.Value != "delete"),
			c.Key == "retention.ms" && (c.Value == nil || *c.Value != "-1"):
			t.Fatalf("repartition topic %s has %s=%v, want cleanup.policy=delete and retention.ms=-1", rep, c.Key, c.Value)
		case c.Key == "cleanup.policy", c.Key == "retention.ms":
			seen++
		}
	}
	if seen != 2 {
		t.Fatalf("repartition topic %s: cleanup.policy and retention.ms not described", rep)
	}
	// A commit after the purge interval deletes what the group consumed.
	Until(t, 60*time.Second, "the repartition topic purged", func() bool {
		starts, err := adm.ListStartOffsets(ctx, rep)
		if err != nil {
			return false
		}
		var purged int64
		starts.Each(func(o kadm.ListedOffset) { purged += o.Offset })
		return purged > 0
	})
}

// StatefulRebalance starts instances one after another while counting:
// each newcomer takes tasks, and their state, from the others.
func StatefulRebalance(t *testing.T, env *kafkatest.Env, instances int) {
	n := 1000 * instances
	in, out := seededPair(t, env, 6, n/instances)
	app := env.Name("count")
	cfg := env.Config(app, "a", config.ExactlyOnce)
	cfg.MaxBatchRecords = 200
	f := newFleet(t, env, cfg, func() *topology.Topology { return CountTopology(in, out, state.Memory()) })
	for i := 0; i < instances; i++ {
		f.start(fmt.Sprintf("i%d", i))
		if i > 0 {
			SeedRange(t, env, in, i*n/instances, (i+1)*n/instances)
		}
		Until(t, 120*time.Second, fmt.Sprintf("%d records counted", (i+1)*n/instances), func() bool {
			return f.recordsIn() >= uint64((i+1)*n/instances)
		})
	}
	var restored uint64
	for _, x := range f.runs[1:] {
		restored += x.R.Stats().Restored
	}
	if restored == 0 {
		t.Fatal("the instances that joined restored nothing: no task moved with its state")
	}
	CheckCounts(t, env, out, topology.ChangelogTopic(app, "counts"), n)
}
