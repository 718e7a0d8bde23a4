package eos

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/eosflow/eosflow/internal/store"

	"github.com/eosflow/eosflow/codec"
	"github.com/eosflow/eosflow/config"
	"github.com/eosflow/eosflow/internal/graph"
	"github.com/eosflow/eosflow/state"
	"github.com/eosflow/eosflow/state/pebble"
	"github.com/eosflow/eosflow/topology"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"
)

// A restore whose end was read between an aborted transaction's records
// and its abort marker (Kafka writes markers after it answers EndTxn, so
// a restore right after an abort can see that end) finishes as soon as
// the marker arrives: the client drops the aborted records, and the first
// record it delivers is already past the end. The changelog here holds a
// committed record (0), its marker (1), an aborted record (2) and its
// marker (3); the end is 3.
func TestRestoreEndsAfterAbortedRecords(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "changelog"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.TransactionalID("writer"), kgo.DefaultProduceTopic("changelog"))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx := context.Background()
	for _, commit := range []bool{true, false} {
		if err := cl.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		if err := cl.ProduceSync(ctx, &kgo.Record{Key: []byte("k"), Value: []byte(map[bool]string{true: "committed", false: "aborted"}[commit])}).FirstErr(); err != nil {
			t.Fatal(err)
		}
		if err := cl.EndTransaction(ctx, kgo.TransactionEndTry(commit)); err != nil {
			t.Fatal(err)
		}
	}

	cfg := config.Default()
	cfg.Brokers, cfg.AppID = c.ListenAddrs(), "app"
	top := topology.New()
	topology.To(topology.Source(top, "in", codec.Bytes()), "out", codec.Bytes())
	r, err := New(cfg, top)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		from int64 // the first offset to read
	}{
		{"committed records before the aborted ones", 0},
		{"only aborted records before the end", 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			task := state.Task{Topic: "in", Partition: 0}
			s, err := store.Open(state.Memory(), t.TempDir(), "s", task)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			if tc.from > 0 {
				// Applied already, as by an earlier restore.
				if err := s.Restore([]state.Write{{Key: []byte("k"), Value: []byte("committed")}}, tc.from-1); err != nil {
					t.Fatal(err)
				}
			}
			tg := &restoreTarget{store: s, task: task, end: 3, pos: tc.from}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			begin := time.Now()
			err = r.changelogs.read(ctx, map[string]map[int32]kgo.Offset{"changelog": {0: kgo.NewOffset().At(tc.from)}},
				map[string]map[int32]*restoreTarget{"changelog": {0: tg}}, 1)
			if err != nil {
				t.Fatal(err)
			}
			if !tg.done || ctx.Err() != nil {
				t.Fatalf("the restore did not finish in %s (position %d, end %d): it waits for a record below the end that the client dropped",
					time.Since(begin).Round(time.Millisecond), tg.pos, tg.end)
			}
			if v, _, _ := s.Get([]byte("k")); string(v) != "committed" {
				t.Fatalf("restored value %q, want the committed one", v)
			}
		})
	}
}

// A store that applied every batch End reported committed, one of which
// (b) ended aborted in its changelog while a later one (c) committed, is
// rebuilt at open from what the changelog holds: a and c's writes, not
// b's. Checking only the last applied record (c) let b's write stay.
func TestRestoreRebuildsAStoreHoldingAnAbortedBatch(t *testing.T) {
	changelog := topology.ChangelogTopic("app", "s")
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, changelog))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.TransactionalID("writer"), kgo.DefaultProduceTopic(changelog))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	dir, task := t.TempDir(), state.Task{Topic: "in", Partition: 0}
	s, err := store.Open(pebble.New(), dir, "s", task)
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"a", "b", "c"} {
		if err := cl.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		res := cl.ProduceSync(ctx, &kgo.Record{Key: []byte(key), Value: []byte(key)})
		if err := res.FirstErr(); err != nil {
			t.Fatal(err)
		}
		if err := cl.EndTransaction(ctx, kgo.TransactionEndTry(key != "b")); err != nil {
			t.Fatal(err)
		}
		// Applied on End's word, as the runtime does; b's End said
		// committed too, but its markers were lost and it ended aborted.
		if err := s.Put([]byte(key), []byte(key)); err != nil {
			t.Fatal(err)
		}
		if err := s.Commit(res[0].Record.Offset); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	cfg := config.Default()
	cfg.Brokers, cfg.AppID = c.ListenAddrs(), "app"
	top := topology.New()
	topology.To(topology.Source(top, "in", codec.Bytes()), "out", codec.Bytes())
	r, err := New(cfg, top)
	if err != nil {
		t.Fatal(err)
	}
	if r.admin, err = kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...)); err != nil {
		t.Fatal(err)
	}
	defer r.admin.Close()
	r.state = newTaskStores([]graph.Store{{Name: "s", Engine: pebble.New(), Source: "in"}}, nil, dir, "app", zap.NewNop())
	defer r.state.closeAll()
	r.changelogs = newChangelogReader(r)
	if err := r.changelogs.restore(ctx, []state.Task{task}); err != nil {
		t.Fatal(err)
	}
	if got := r.counts.wipes.Load(); got != 1 {
		t.Fatalf("%d stores wiped, want the one holding aborted batch b", got)
	}
	var got []string
	for e, err := range r.state.open[task]["s"].Range(nil, nil) {
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, string(e.Key)+"="+string(e.Value))
	}
	if !slices.Equal(got, []string{"a=a", "c=c"}) {
		t.Fatalf("store holds %q after restore, want [a=a c=c]: the committed changelog's writes only", got)
	}
}
