package eos_test

import (
	"context"
	"testing"
	"time"

	"github.com/eosflow/eosflow/codec"
	"github.com/eosflow/eosflow/config"
	"github.com/eosflow/eosflow/tools/conformance"
	"github.com/eosflow/eosflow/tools/kafkatest"
	"github.com/eosflow/eosflow/topology"
)

// A transform that takes a good share of the commit interval per poll
// must not end its batches with records left over: each leftover is
// rewound and fetched again while the worker waits. Polls shrink to a
// fraction of the interval's worth and the records of the last poll are
// processed, so rewinds stay rare.
func TestSlowTransformRarelyRewinds(t *testing.T) {
	env := kafkatest.Fake(t)
	env.CreateTopics(t, 3, "in", "out")
	const n = 1500
	conformance.Seed(t, env, "in", n)
	cfg := env.Config("app", "a", config.ExactlyOnce)
	cfg.CommitInterval = 20 * time.Millisecond
	x := conformance.Start(t, cfg, spinning(200*time.Microsecond)) // a tenth of the interval every 10 records
	x.WaitCommitted(t, n, 120*time.Second)
	st := x.R.Stats()
	conformance.ExactlyOnce(t, env, "out", n)
	// n records at 200 µs are 300 ms of work, 15 intervals or more.
	if st.Committed < 10 {
		t.Fatalf("%d batches for %d records of 200 µs at a 20 ms interval; want batches cut near the interval", st.Committed, n)
	}
	if st.Rewinds < 1 {
		t.Fatal("no rewind counted: the first batch polls every buffered record and cannot process them within twice the interval")
	}
	if st.Rewinds*3 > st.Committed { // every batch but a few rewound before polls were sized
		t.Fatalf("%d of %d batches rewound: polls should shrink so that the interval ends between them", st.Rewinds, st.Committed)
	}
	t.Logf("%d batches, %d rewinds, %d aborted", st.Committed, st.Rewinds, st.Aborted)
}

// A batch processes what it polled past its commit interval, but never
// into its transaction timeout: with the timeout close to the interval a
// large first poll of slow records is cut halfway between them, and no
// batch is aborted as too slow.
func TestProcessingPolledRecordsStopsBeforeTheTransactionTimeout(t *testing.T) {
	env := kafkatest.Fake(t)
	env.CreateTopics(t, 2, "in", "out")
	const n = 1200
	conformance.Seed(t, env, "in", n)
	cfg := env.Config("app", "a", config.ExactlyOnce)
	cfg.CommitInterval = 600 * time.Millisecond
	cfg.TransactionTimeout = time.Second // twice the interval would be past it
	x := conformance.Start(t, cfg, spinning(2*time.Millisecond))
	x.WaitCommitted(t, n, 120*time.Second)
	st := x.R.Stats()
	conformance.ExactlyOnce(t, env, "out", n)
	if st.Aborted != 0 || st.Rebuilds != 0 {
		t.Fatalf("%d batches aborted, %d rebuilds: a batch ran into its transaction timeout", st.Aborted, st.Rebuilds)
	}
	t.Logf("%d batches, %d rewinds", st.Committed, st.Rewinds)
}

// spinning copies "in" to "out", keeping the CPU busy for d per record.
func spinning(d time.Duration) *topology.Topology {
	top := topology.New()
	src := topology.Source(top, "in", codec.Bytes())
	up := topology.MapValues(src, "spin", func(_ context.Context, v []byte) ([]byte, error) {
		for end := time.Now().Add(d); time.Now().Before(end); {
		}
		return v, nil
	})
	topology.To(up, "out", codec.Bytes())
	return top
}
