package main

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// openTxn begins a transaction as txnID, produces one record to partition
// 0 of topic and flushes it, but never ends the transaction: the partition
// then has an open transaction, as a crashed producer leaves behind.
func openTxn(t *testing.T, addr, topic, txnID string) *kgo.Client {
	t.Helper()
	cl := newClient(t, addr,
		kgo.TransactionalID(txnID),
		kgo.TransactionTimeout(time.Minute),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
	)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := cl.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Partition: 0, Value: []byte("in-flight")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	if err := cl.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	return cl
}

// produceCommitted writes n records to partition 0 of topic in committed
// transactions, so the log has data before and after an open transaction.
func produceCommitted(t *testing.T, addr, topic, txnID string, n int) {
	t.Helper()
	cl := newClient(t, addr, kgo.TransactionalID(txnID), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for range n {
		if err := cl.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Partition: 0, Value: []byte("done")}).FirstErr(); err != nil {
			t.Fatal(err)
		}
		if err := cl.EndTransaction(ctx, kgo.TryCommit); err != nil {
			t.Fatal(err)
		}
	}
	cl.Close()
}

// forgetTransactions makes the coordinator answer every ListTransactions
// with nothing: the coordinator has lost track of the open transaction,
// which is how a transaction hangs (KIP-664).
func forgetTransactions(c *kfake.Cluster) {
	c.ControlKey(int16(kmsg.ListTransactions), func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		return req.ResponseKind(), nil, true
	})
}
