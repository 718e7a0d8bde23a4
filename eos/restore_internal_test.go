package eos

import (
	"context"
	"testing"
	"time"

	"github.com/eosflow/eosflow/codec"
	"github.com/eosflow/eosflow/config"
	"github.com/eosflow/eosflow/state"
	"github.com/eosflow/eosflow/topology"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
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
	top := topology.New("restore")
	topology.To(topology.Source(top, "in", "in", codec.Bytes()), "out", "out", codec.Bytes())
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
			s, err := state.Open(state.Memory(), t.TempDir(), "s", task)
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
			err = r.readChangelogs(ctx, map[string]map[int32]kgo.Offset{"changelog": {0: kgo.NewOffset().At(tc.from)}},
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
