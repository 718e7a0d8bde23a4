package eos_test

import (
	"context"
	"testing"
	"time"

	"github.com/eosflow/eosflow/codec"
	"github.com/eosflow/eosflow/config"
	"github.com/eosflow/eosflow/internal/conformance"
	"github.com/eosflow/eosflow/internal/kafkatest"
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
	top := topology.New("app")
	src := topology.Source(top, "in", "in", codec.Bytes())
	up := topology.MapValues(src, "spin", func(_ context.Context, v []byte) ([]byte, error) {
		// 200 µs of work, a tenth of the interval every 10 records.
		for end := time.Now().Add(200 * time.Microsecond); time.Now().Before(end); {
		}
		return v, nil
	})
	topology.To(up, "out", "out", codec.Bytes())
	x := conformance.Start(t, cfg, top)
	x.WaitCommitted(t, n, 120*time.Second)
	st := x.R.Stats()
	conformance.ExactlyOnce(t, env, "out", n)
	// n records at 200 µs are 300 ms of work, 15 intervals or more.
	if st.Committed < 10 {
		t.Fatalf("%d batches for %d records of 200 µs at a 20 ms interval; want batches cut near the interval", st.Committed, n)
	}
	if st.Rewinds*3 > st.Committed { // every batch but a few rewound before polls were sized
		t.Fatalf("%d of %d batches rewound: polls should shrink so that the interval ends between them", st.Rewinds, st.Committed)
	}
	t.Logf("%d batches, %d rewinds, %d aborted", st.Committed, st.Rewinds, st.Aborted)
}
