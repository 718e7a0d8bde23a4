package eos

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/eosflow/eosflow/tools/kafkatest"
	"github.com/twmb/franz-go/pkg/kgo"
)

// A transaction on a global topic that comes in several fetches is
// applied whole, once its marker came, never in part: each fetch's
// released writes hold all of its records or none.
func TestGlobalTableAppliesTransactionsWhole(t *testing.T) {
	env := kafkatest.Fake(t)
	env.CreateTopics(t, 1, "products")
	ctx := context.Background()
	if err := env.Client(t).ProduceSync(ctx, &kgo.Record{Topic: "products", Key: []byte("p00"), Value: []byte("v1")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	const size = 5
	w := env.Client(t, kgo.TransactionalID("products-writer"))
	if err := w.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	for i := range size { // one batch per record
		if err := w.ProduceSync(ctx, &kgo.Record{Topic: "products", Key: fmt.Appendf(nil, "t%d", i), Value: []byte("v2")}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	cl := env.Client(t, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{"products": {0: kgo.NewOffset().AtStart()}}),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.KeepControlRecords(), kgo.FetchMaxBytes(1), kgo.FetchMaxPartitionBytes(1))
	table := &globalTable{held: map[int32]*txnHold{}}
	g := &globalTables{byTopic: map[string]*globalTable{"products": table}, lag: newGlobalLag(map[string]map[int32]int64{"products": {0: 0}}, time.Now())}
	var fetchesWithTxn, released int
	next := int64(0)
	for deadline := time.Now().Add(10 * time.Second); next < size+2 && time.Now().Before(deadline); {
		pctx, cancel := context.WithTimeout(ctx, time.Second)
		fs := cl.PollFetches(pctx)
		cancel()
		carried := false
		fs.EachRecord(func(r *kgo.Record) { carried = carried || r.Attrs.IsTransactional() && !r.Attrs.IsControl() })
		if carried {
			fetchesWithTxn++
		}
		for _, f := range g.fetched(fs) {
			txn := 0
			for _, w := range f.writes {
				if w.Key[0] == 't' {
					txn++
				}
			}
			if txn != 0 && txn != size {
				t.Fatalf("a fetch released %d of the transaction's %d records: it would be applied in part", txn, size)
			}
			released += txn
			next = f.next
		}
	}
	if fetchesWithTxn < 2 {
		t.Fatalf("the transaction came in %d fetches, want it split across several", fetchesWithTxn)
	}
	if released != size || next != size+2 {
		t.Fatalf("released %d transactional records up to offset %d, want %d up to %d (its marker)", released, next, size, size+2)
	}
}
