package eos

import (
	"testing"
	"time"

	"github.com/eosflow/eosflow/config"
)

// Each guarantee maps to exactly one kind of commit: a transaction, a
// commit after outputs written through, or a commit at poll; only the
// transaction is bounded by transaction_timeout, and only exactly-once and
// idempotent load a producer id.
func TestContractOfEachGuarantee(t *testing.T) {
	cfg := config.Default()
	cfg.TransactionTimeout = 7 * time.Second
	want := map[config.Guarantee]contract{
		config.ExactlyOnce: {atomic: true, txnTimeout: 7 * time.Second, idempotent: true},
		config.Idempotent:  {idempotent: true, writesThrough: true},
		config.AtLeastOnce: {writesThrough: true},
		config.AtMostOnce:  {committedAtPoll: true},
	}
	for _, g := range config.Guarantees() {
		cfg.Guarantee = g
		c := contractOf(cfg)
		if c != want[g] {
			t.Errorf("%s: %+v, want %+v", g, c, want[g])
		}
		kinds := 0
		for _, k := range []bool{c.atomic, c.writesThrough, c.committedAtPoll} {
			if k {
				kinds++
			}
		}
		if kinds != 1 {
			t.Errorf("%s: %d kinds of commit, want one", g, kinds)
		}
		start := time.Now().Add(-8 * time.Second)
		if c.pastTimeout(start) != c.atomic || c.cuttable() == c.committedAtPoll {
			t.Errorf("%s: pastTimeout %v, cuttable %v", g, c.pastTimeout(start), c.cuttable())
		}
	}
}
