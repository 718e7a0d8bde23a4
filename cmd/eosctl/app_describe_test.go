package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eosflow/eosflow/config"
	"github.com/eosflow/eosflow/state/pebble"
	"github.com/eosflow/eosflow/tools/conformance"
	"github.com/eosflow/eosflow/tools/kafkatest"
)

// describeApp runs `app describe` with JSON output and decodes it.
func describeApp(t *testing.T, args ...string) appDescribeJSON {
	t.Helper()
	out, errOut, code := runCLI(t, nil, append([]string{"-o", "json", "app", "describe"}, args...)...)
	if code != exitOK {
		t.Fatalf("exit %d: %s\n%s", code, errOut, out)
	}
	var got appDescribeJSON
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, out)
	}
	return got
}

// endOffsets reads topic's high watermarks with a client of the test's own.
func endOffsets(t *testing.T, adm *kadm.Client, topic string) map[int32]int64 {
	t.Helper()
	ends, err := adm.ListEndOffsets(context.Background(), topic)
	if err != nil {
		t.Fatal(err)
	}
	out := map[int32]int64{}
	ends.Each(func(o kadm.ListedOffset) { out[o.Partition] = o.Offset })
	return out
}

// A real counting pipeline with pebble stores: while it runs, describe
// shows its changelog and offsets mirror, its member and tasks, its
// committed input and its stores in use; once it stopped, the stores are
// restored, and behind once the changelog gains records they have not
// applied.
func TestAppDescribeStatefulPipeline(t *testing.T) {
	env := kafkatest.Fake(t)
	env.CreateTopics(t, 2, "in", "out")
	const n = 300
	conformance.Seed(t, env, "in", n)
	cfg := env.Config("orders", "worker-0", config.ExactlyOnce)
	cfg.StateDir = t.TempDir()
	x := conformance.Start(t, cfg, conformance.CountTopology("in", "out", pebble.New()))
	x.WaitCommitted(t, n, 60*time.Second)

	file := filepath.Join(t.TempDir(), "pipeline.yaml")
	body := fmt.Sprintf("brokers: [%q]\napp_id: orders\ninstance_id: worker-0\nstate_dir: %q\n", env.Brokers[0], cfg.StateDir)
	if err := os.WriteFile(file, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	adm := env.Admin(t)
	const changelog = "orders-counts-changelog"

	got := describeApp(t, "--config", file)
	if len(got.InternalTopics) != 2 {
		t.Fatalf("internal topics: %+v", got.InternalTopics)
	}
	if m := got.InternalTopics[1]; m.Topic != "orders-eos-offsets" || m.Kind != kindOffsets || m.Name != "" || m.Partitions != 2 ||
		!strings.Contains(m.CleanupPolicy, "compact") || len(m.Problems) != 0 || len(m.EndOffsets) != 2 {
		t.Errorf("offsets mirror: %+v", m)
	}
	cl := got.InternalTopics[0]
	if cl.Topic != changelog || cl.Kind != kindChangelog || cl.Name != "counts" || cl.Partitions != 2 || cl.ReplicationFactor != 1 ||
		!strings.Contains(cl.CleanupPolicy, "compact") || cl.MinInsyncReplicas == "" || len(cl.Problems) != 0 {
		t.Errorf("changelog: %+v", cl)
	}
	ends := endOffsets(t, adm, changelog)
	for _, e := range cl.EndOffsets {
		if e.EndOffset <= 0 || e.EndOffset != ends[e.Partition] || e.Leader < 0 {
			t.Errorf("changelog partition %d: %+v, want end offset %d > 0", e.Partition, e, ends[e.Partition])
		}
	}
	if len(cl.EndOffsets) != 2 {
		t.Errorf("changelog end offsets: %+v", cl.EndOffsets)
	}
	grp := got.Group
	if grp.Group != "orders" || grp.State != "Stable" || len(grp.Members) != 1 {
		t.Fatalf("group: %+v", grp)
	}
	if m := grp.Members[0]; m.InstanceID != "worker-0" || fmt.Sprint(m.Tasks) != "map[in:[0 1]]" || m.ClientID == "" {
		t.Errorf("member: %+v", m)
	}
	var committed int64
	for _, r := range grp.Inputs {
		if r.Topic != "in" || r.LagLSO != 0 {
			t.Errorf("input: %+v, want a caught-up partition of in", r)
		}
		committed += r.Committed
	}
	if len(grp.Inputs) != 2 || committed < n {
		t.Errorf("inputs commit %d records in %d partitions, want %d in 2: %+v", committed, len(grp.Inputs), n, grp.Inputs)
	}
	if len(got.Stores) != 2 {
		t.Fatalf("stores: %+v", got.Stores)
	}
	for _, s := range got.Stores {
		if s.Restore != restoreInUse || s.Instance != "worker-0" || s.Store != "counts" || s.Changelog != changelog {
			t.Errorf("store of a running instance: %+v", s)
		}
	}

	x.Stop()
	if err := x.Wait(t, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	// A commit of another instance that this one never applied.
	prod := env.Client(t, kgo.TransactionalID("orders:worker-1"), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err := prod.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		prod.Produce(context.Background(), &kgo.Record{Topic: changelog, Partition: 1, Key: fmt.Appendf(nil, "k%d", i), Value: []byte("1")}, nil)
	}
	if err := prod.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := prod.EndTransaction(context.Background(), kgo.TryCommit); err != nil {
		t.Fatal(err)
	}

	got = describeApp(t, "orders", "--brokers", env.Brokers[0], "--state-dir", cfg.StateDir)
	ends = endOffsets(t, adm, changelog)
	want := map[int32]struct {
		restore string
		records int64
	}{0: {restoreDone, 0}, 1: {restoreBehind, 3}}
	for _, s := range got.Stores {
		w := want[s.Partition]
		if s.Topic != "in" || s.Restore != w.restore || s.BehindRecords != w.records || s.ChangelogEnd != ends[s.Partition] ||
			s.Applied < 0 || s.Applied >= s.ChangelogEnd || s.Dir != filepath.Join(cfg.StateDir, "orders", "worker-0", fmt.Sprintf("in-%d", s.Partition), "counts") {
			t.Errorf("stopped store of in-%d: %+v, want %s behind by %d record(s)", s.Partition, s, w.restore, w.records)
		}
	}
	if len(got.Stores) != 2 {
		t.Fatalf("stores: %+v", got.Stores)
	}

	out, errOut, code := runCLI(t, nil, "--brokers", env.Brokers[0], "app", "describe", "orders", "--state-dir", cfg.StateDir)
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	text := squeeze(out)
	for _, want := range []string{
		"Internal topics of app orders:\nTOPIC KIND PARTITIONS RF CLEANUP.POLICY MIN.ISR PROBLEMS\norders-counts-changelog changelog 2 1 compact",
		"\norders-eos-offsets offsets 2 1 compact",
		fmt.Sprintf("orders-counts-changelog 0 0 %d - -", ends[0]),
		fmt.Sprintf("orders-counts-changelog 1 0 %d - -", ends[1]),
		"Group orders:",
		"Inputs: lag 0 to the last stable offset",
		"State stores under " + filepath.Join(cfg.StateDir, "orders") + ":",
		"worker-0 counts in-0 ",
		" restored ",
		"worker-0 counts in-1 ",
		" behind by 3 record(s) ",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
}

// Repartition topics are inputs: their lag shows next to their end
// offsets. Topics of an app whose id extends this one's are not its own.
func TestAppDescribeRepartitionLag(t *testing.T) {
	_, addr := newCluster(t)
	adm := newAdmin(t, addr)
	ctx := context.Background()
	del, compact := "delete", "compact"
	for topic, policy := range map[string]*string{
		"shop-by-region-repartition": &del,
		"shop-totals-changelog":      &compact,
		"shop-eu-totals-changelog":   &compact, // app shop-eu's
		"shop-eu-eos-offsets":        &compact, // app shop-eu's
		"shop-notes":                 nil,      // not internal
	} {
		if _, err := adm.CreateTopic(ctx, 2, 1, map[string]*string{"cleanup.policy": policy}, topic); err != nil {
			t.Fatal(err)
		}
	}
	cl := newClient(t, addr, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	for range 5 {
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "shop-by-region-repartition", Partition: 0, Value: []byte("x")}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	var os kadm.Offsets
	os.AddOffset("shop-by-region-repartition", 0, 2, -1)
	if err := adm.CommitAllOffsets(ctx, "shop", os); err != nil {
		t.Fatal(err)
	}
	var eu kadm.Offsets
	eu.AddOffset("shop-notes", 0, 0, -1)
	if err := adm.CommitAllOffsets(ctx, "shop-eu", eu); err != nil {
		t.Fatal(err)
	}

	got := describeApp(t, "--brokers", addr, "shop", "--state-dir", t.TempDir())
	var names []string
	for _, it := range got.InternalTopics {
		names = append(names, it.Topic+":"+it.Kind+":"+it.Name+":"+it.CleanupPolicy)
	}
	if strings.Join(names, " ") != "shop-by-region-repartition:repartition:by-region:delete shop-totals-changelog:changelog:totals:compact" {
		t.Errorf("internal topics: %v", names)
	}
	if len(got.Group.Inputs) != 2 {
		t.Fatalf("inputs: %+v", got.Group.Inputs)
	}
	if r := got.Group.Inputs[0]; r.Topic != "shop-by-region-repartition" || r.Partition != 0 || r.Committed != 2 || r.HighWatermark != 5 || r.LagHWM != 3 {
		t.Errorf("repartition partition 0: %+v", r)
	}
	if r := got.Group.Inputs[1]; r.Partition != 1 || r.Committed != -1 || r.LagHWM != 0 {
		t.Errorf("repartition partition 1, never committed: %+v", r)
	}
	if len(got.Stores) != 0 || got.Group.State != "Empty" && got.Group.State != "Dead" || len(got.Group.Members) != 0 {
		t.Errorf("no members and no stores expected: %+v", got)
	}

	out, _, _ := runCLI(t, nil, "--brokers", addr, "app", "describe", "shop", "--state-dir", t.TempDir())
	if !strings.Contains(squeeze(out), "shop-by-region-repartition 0 0 5 2 3") {
		t.Errorf("table does not show the repartition lag:\n%s", out)
	}
}

// A changelog or offsets mirror that is not compacted, or a repartition
// topic that is, is flagged.
func TestInternalTopicProblems(t *testing.T) {
	for _, tc := range []struct {
		t    internalTopicJSON
		want string
	}{
		{internalTopicJSON{Kind: kindChangelog, CleanupPolicy: "compact"}, ""},
		{internalTopicJSON{Kind: kindChangelog, CleanupPolicy: "compact,delete"}, ""},
		{internalTopicJSON{Kind: kindChangelog, CleanupPolicy: "delete"}, "not compacted"},
		{internalTopicJSON{Kind: kindRepartition, CleanupPolicy: "delete"}, ""},
		{internalTopicJSON{Kind: kindRepartition, CleanupPolicy: "compact"}, "compacted: records of one key"},
		{internalTopicJSON{Kind: kindRepartition, CleanupPolicy: "delete", EndOffsets: []partitionEndJSON{{Partition: 3, Leader: -1}}}, "partition 3 has no leader"},
		{internalTopicJSON{Kind: kindOffsets, CleanupPolicy: "compact"}, ""},
		{internalTopicJSON{Kind: kindOffsets, CleanupPolicy: "delete"}, "not compacted: the offsets it mirrors expire"},
	} {
		got := strings.Join(internalTopicProblems(tc.t), "; ")
		if tc.want == "" && got != "" || !strings.Contains(got, tc.want) {
			t.Errorf("%+v: got %q, want %q", tc.t, got, tc.want)
		}
	}
}

func TestAppDescribeUnknownApp(t *testing.T) {
	_, addr := newCluster(t)
	_, errOut, code := runCLI(t, nil, "--brokers", addr, "app", "describe", "nobody")
	if code != exitFailure || !strings.Contains(errOut, `app "nobody" has no consumer group`) || !strings.Contains(errOut, "no consumer groups at all") {
		t.Errorf("exit %d, stderr %s", code, errOut)
	}
	var os kadm.Offsets
	os.AddOffset("orders", 0, 0, -1)
	adm := newAdmin(t, addr)
	if _, err := adm.CreateTopic(context.Background(), 1, 1, nil, "orders"); err != nil {
		t.Fatal(err)
	}
	if err := adm.CommitAllOffsets(context.Background(), "orders", os); err != nil {
		t.Fatal(err)
	}
	_, errOut, code = runCLI(t, nil, "--brokers", addr, "app", "describe", "order")
	if code != exitFailure || !strings.Contains(errOut, `app "order" has no consumer group`) || !strings.Contains(errOut, `groups on the cluster (an app's group is its app_id): "orders"`) {
		t.Errorf("exit %d, stderr %s", code, errOut)
	}
}

func TestAppDescribeUsage(t *testing.T) {
	for _, args := range [][]string{
		{},         // no app
		{"a", "b"}, // two apps
		{"my app"}, // not an app_id
		{"orders", "--state-dir", ""},
	} {
		_, errOut, code := runCLI(t, nil, append([]string{"--brokers", "127.0.0.1:1", "app", "describe"}, args...)...)
		if code != exitUsage {
			t.Errorf("%q: exit %d, want %d; stderr %s", args, code, exitUsage, errOut)
		}
	}
}

// An exactly-once app that committed all of a transactional input trails
// each partition's LSO by the commit marker after its last record: describe
// shows lag 0 there, and the HWM lag apart, also under an open transaction.
// Records it has not read yet count, with their markers.
func TestAppDescribeCaughtUpOnTransactionalInput(t *testing.T) {
	env := kafkatest.Fake(t)
	env.CreateTopics(t, 2, "in", "out")
	addr := env.Brokers[0]
	produceTxn(t, addr, "in", "upstream", map[int32]int{0: 10, 1: 10}, true) // in-0 and in-1: 0-9, marker 10
	x := conformance.Start(t, env.Config("orders", "worker-0", config.ExactlyOnce), conformance.Upper("in", "out", nil))
	x.WaitCommitted(t, 20, 60*time.Second)
	state := t.TempDir()

	got := describeApp(t, "orders", "--brokers", addr, "--state-dir", state)
	for _, r := range got.Group.Inputs {
		if r.Topic != "in" || r.Committed != 10 || r.LastStableOffset != 11 || r.HighWatermark != 11 || r.LagLSO != 0 || r.LagHWM != 1 {
			t.Errorf("caught-up input: %+v, want committed 10, LSO and HWM 11, lag 0 (HWM lag 1)", r)
		}
	}
	if g := got.Group; len(g.Inputs) != 2 || g.TotalLSO != 0 || g.TotalHWM != 2 {
		t.Errorf("inputs: lag %d, HWM lag %d, want 0 and 2: %+v", g.TotalLSO, g.TotalHWM, g.Inputs)
	}
	out, errOut, code := runCLI(t, nil, "--brokers", addr, "app", "describe", "orders", "--state-dir", state)
	if code != exitOK || !strings.Contains(out, "Inputs: lag 0 to the last stable offset, 2 to the high watermark") {
		t.Errorf("exit %d, stderr %s, table:\n%s", code, errOut, out)
	}

	x.Stop()
	if err := x.Wait(t, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	openTxn(t, addr, "in", "other")                                  // in-0: 11, open
	produceTxn(t, addr, "in", "upstream", map[int32]int{1: 3}, true) // in-1: 11-13, marker 14
	got = describeApp(t, "orders", "--brokers", addr, "--state-dir", state)
	if len(got.Group.Inputs) != 2 {
		t.Fatalf("inputs: %+v", got.Group.Inputs)
	}
	if r := got.Group.Inputs[0]; r.LastStableOffset != 11 || r.HighWatermark != 12 || r.LagLSO != 0 || r.LagHWM != 2 || !r.OpenTransaction {
		t.Errorf("in-0, caught up under an open transaction: %+v", r)
	}
	if r := got.Group.Inputs[1]; r.LastStableOffset != 15 || r.LagLSO != 5 || r.LagHWM != 5 {
		t.Errorf("in-1, 3 records behind: %+v, want lag 5 (3 records, 2 markers)", r)
	}
}
