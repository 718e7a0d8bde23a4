package eos

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/eosflow/eosflow/internal/graph"
	"github.com/eosflow/eosflow/state"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"
)

// The records of co-partitioned topics that make one task are processed
// in timestamp order, each partition's order kept; other partitions as
// fetched.
func TestCoPartitionedRecordsInTimestampOrder(t *testing.T) {
	rec := func(topic string, p int32, off int64, sec int) *kgo.Record {
		return &kgo.Record{Topic: topic, Partition: p, Offset: off, Timestamp: time.Unix(int64(sec), 0)}
	}
	fs := kgo.Fetches{{Topics: []kgo.FetchTopic{
		{Topic: "orders", Partitions: []kgo.FetchPartition{
			{Partition: 0, Records: []*kgo.Record{rec("orders", 0, 0, 1), rec("orders", 0, 1, 5), rec("orders", 0, 2, 3)}},
			{Partition: 1, Records: []*kgo.Record{rec("orders", 1, 0, 9)}},
		}},
		{Topic: "payments", Partitions: []kgo.FetchPartition{
			{Partition: 0, Records: []*kgo.Record{rec("payments", 0, 0, 2), rec("payments", 0, 1, 4)}},
		}},
		{Topic: "other", Partitions: []kgo.FetchPartition{
			{Partition: 0, Records: []*kgo.Record{rec("other", 0, 0, 100), rec("other", 0, 1, 0)}},
		}},
	}}}
	specs := []graph.Store{{Name: "s", Engine: state.Memory(), Source: "orders"}}
	l := &streamLoop{state: newTaskStores(specs, map[string]string{"orders": "orders", "payments": "orders"}, t.TempDir(), "app", zap.NewNop())}
	var got []string
	l.inOrder(fs, nil, func(rec *kgo.Record) {
		got = append(got, fmt.Sprintf("%s/%d@%d", rec.Topic, rec.Partition, rec.Timestamp.Unix()))
	})
	// other/0 is not grouped: as fetched. Task orders/0 merges orders/0
	// and payments/0 by time, but orders/0's 5 s stays before its 3 s: a
	// partition's own order never changes. orders/1 is another task.
	want := []string{"other/0@100", "other/0@0", "orders/0@1", "payments/0@2", "payments/0@4", "orders/0@5", "orders/0@3", "orders/1@9"}
	if !slices.Equal(got, want) {
		t.Fatalf("order %v, want %v", got, want)
	}
}
