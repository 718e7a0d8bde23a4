package conformance

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/eosflow/eosflow/codec"
	"github.com/eosflow/eosflow/config"
	"github.com/eosflow/eosflow/state"
	"github.com/eosflow/eosflow/tools/kafkatest"
	"github.com/eosflow/eosflow/topology"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// JoinTopology joins clicks (keyed by user, the value a click id) with
// the table of profiles (keyed by user), writing "<click id> by
// <profile>" to out for each click whose user has a profile. The table
// lives in a store "profiles" of engine e.
func JoinTopology(clicks, profiles, out string, e state.Engine) *topology.Topology {
	top := topology.New()
	cs := topology.Source(top, clicks, codec.String(), topology.Named("clicks"))
	table := topology.TableFrom(top, profiles, codec.String(), e, topology.Named("profiles"))
	joined := topology.Join(cs, table, "enrich", func(_ context.Context, _ []byte, click, profile string) (string, error) {
		return click + " by " + profile, nil
	})
	topology.To(joined, out, codec.String(), topology.Named("out"))
	return top
}

// produceKeyed writes value(i) under key(i) for i in [from, to) to topic.
func produceKeyed(t *testing.T, env *kafkatest.Env, topic string, from, to int, key, value func(i int) string) {
	t.Helper()
	cl := env.Client(t)
	for i := from; i < to; i++ {
		cl.Produce(context.Background(), &kgo.Record{Topic: topic, Key: []byte(key(i)), Value: []byte(value(i))}, nil)
	}
	if err := cl.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// StreamTableJoinExactlyOnce joins clicks with profiles while the pipeline
// restarts, a second instance joins and the profiles change half way: each
// click must come out exactly once, joined with the profile version that
// was in place when it was produced. Profiles are loaded (committed)
// before the clicks that must see them are produced, so the expected
// output follows from the seed alone. Stores use engine e.
func StreamTableJoinExactlyOnce(t *testing.T, env *kafkatest.Env, e state.Engine) {
	const users, clicks, partitions = 50, 2000, 3
	names := topics(t, env, partitions, "clicks", "out")
	compact := "compact"
	profiles := env.Name("profiles")
	env.CreateTopicsWith(t, partitions, map[string]*string{"cleanup.policy": &compact}, profiles)
	in, out := names[0], names[1]
	app := env.Name("join")
	cfg := env.Config(app, "a", config.ExactlyOnce)
	cfg.MaxBatchRecords = 150
	user := func(i int) string { return fmt.Sprintf("u%02d", i%users) }
	version := func(v int) func(int) string {
		return func(i int) string { return fmt.Sprintf("%s-v%d", user(i), v) }
	}
	clickID := func(i int) string { return fmt.Sprintf("c%04d", i) }

	f := newFleet(t, env, cfg, func() *topology.Topology { return JoinTopology(in, profiles, out, e) })
	read := uint64(0)
	waitFor := func(what string, n int) {
		read += uint64(n)
		Until(t, 120*time.Second, what, func() bool { return f.recordsIn() >= read })
	}
	first := f.start("a")
	produceKeyed(t, env, profiles, 0, users, user, version(1))
	waitFor("profiles v1 loaded", users)
	produceKeyed(t, env, in, 0, clicks/2, user, clickID)
	waitFor("the first clicks joined", clicks/2)
	first.Stop()
	if err := first.Wait(t, 60*time.Second); err != nil {
		t.Fatal(err)
	}
	f.start("a")
	f.start("b")
	checkCoPartitioned(t, env, app, in, profiles)
	produceKeyed(t, env, profiles, 0, users, user, version(2))
	waitFor("profiles v2 loaded", users)
	produceKeyed(t, env, in, clicks/2, clicks, user, clickID)
	waitFor("every click joined", clicks/2)

	got := map[string]string{}
	for _, r := range Drain(t, env, out, clicks) {
		id, profile, ok := strings.Cut(string(r.Value), " by ")
		if !ok {
			t.Fatalf("output %q is not a joined click", r.Value)
		}
		if prev, dup := got[id]; dup {
			t.Fatalf("click %s joined twice: %q and %q", id, prev, profile)
		}
		got[id] = profile
	}
	var wrong []string
	for i := 0; i < clicks; i++ {
		v := 1
		if i >= clicks/2 {
			v = 2
		}
		if want := version(v)(i); got[clickID(i)] != want {
			wrong = append(wrong, fmt.Sprintf("%s: %q, want %q", clickID(i), got[clickID(i)], want))
		}
	}
	if len(wrong) > 0 {
		t.Fatalf("%d of %d clicks wrong (first ones: %v)", len(wrong), clicks, wrong[:min(5, len(wrong))])
	}
}

// checkCoPartitioned fails t unless every member of group owns the same
// partition numbers of topics a and b, once both are assigned.
func checkCoPartitioned(t *testing.T, env *kafkatest.Env, group, a, b string) {
	t.Helper()
	adm := kadm.NewClient(env.Client(t))
	var last string
	Until(t, 60*time.Second, "a stable assignment of both topics", func() bool {
		described, err := adm.DescribeGroups(context.Background(), group)
		if err != nil || described[group].State != "Stable" {
			return false
		}
		assigned := 0
		for _, m := range described[group].Members {
			ca, ok := m.Assigned.AsConsumer()
			if !ok {
				return false
			}
			parts := map[string][]int32{}
			for _, tp := range ca.Topics {
				parts[tp.Topic] = slices.Sorted(slices.Values(tp.Partitions))
				assigned += len(tp.Partitions)
			}
			if !slices.Equal(parts[a], parts[b]) {
				last = fmt.Sprintf("member %s owns %s %v but %s %v", m.MemberID, a, parts[a], b, parts[b])
				t.Fatalf("not co-partitioned: %s", last)
			}
		}
		return assigned > 0 && len(described[group].Members) > 1
	})
}
