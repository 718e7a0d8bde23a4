package eos

import (
	"context"
	"fmt"
	"time"

	"github.com/eosflow/eosflow/config"
	"github.com/eosflow/eosflow/internal/runcfg"
	"github.com/twmb/franz-go/pkg/kgo"
)

// contract is what ending a batch on a commit target promises. The loop
// follows the contract, not the guarantee: each target states its own
// rules here, and contractOf is the one place that maps a guarantee to
// them (newSession picks the matching session).
type contract struct {
	// atomic: a batch's outputs, changelogs and input offsets commit
	// together or not at all, in a transaction open at most txnTimeout
	// (a Kafka transaction). A rebalance dooms the transaction, so
	// revokes since the last end are tracked, a rewind must not land on
	// a new assignment, and an abort is checked against the broker's
	// committed offsets. The offsets mirror is written with the batch.
	atomic     bool
	txnTimeout time.Duration
	// idempotent: the session loads a producer id before its first
	// batch, which fences a zombie of this instance.
	idempotent bool
	// writesThrough: outputs are visible once written, before their
	// input offsets commit, so a redo writes them again, and a batch
	// stopped by a failing record commits what came before it.
	writesThrough bool
	// committedAtPoll: input offsets commit as records are polled, before
	// they are processed (at-most-once); a record cannot be left for a
	// later batch, and ending a batch commits no offsets.
	committedAtPoll bool
}

// contractOf is the contract of the commit target that gives g.
func contractOf(cfg config.Config) contract {
	switch cfg.Guarantee {
	case config.ExactlyOnce:
		return contract{atomic: true, txnTimeout: cfg.TransactionTimeout, idempotent: true}
	case config.Idempotent:
		return contract{idempotent: true, writesThrough: true}
	case config.AtMostOnce:
		return contract{committedAtPoll: true}
	}
	return contract{writesThrough: true}
}

// cuttable reports whether records may be left for the next batch.
func (c contract) cuttable() bool { return !c.committedAtPoll }

// pastTimeout reports whether a batch begun at start has outlived its
// transaction.
func (c contract) pastTimeout(start time.Time) bool {
	return c.atomic && time.Since(start) >= c.txnTimeout
}

// producerIDs loads a session's producer id, bounded so that an
// unreachable coordinator becomes a logged rebuild rather than a silent
// wait.
type producerIDs struct {
	cfg   config.Config
	bound time.Duration
}

func (p producerIDs) load(ctx context.Context, cl *kgo.Client) (int64, int16, error) {
	pctx, cancel := context.WithTimeout(ctx, p.bound)
	defer cancel()
	id, epoch, err := cl.ProducerID(pctx)
	switch {
	case err == nil:
		return id, epoch, nil
	case ctx.Err() != nil:
		return 0, 0, nil // shutting down: the loop returns at once
	case isFenced(err):
		return 0, 0, err
	}
	if rs := rejectedSetting(p.cfg, err); rs != nil {
		return 0, 0, rs
	}
	if isFatal(err) {
		return 0, 0, err
	}
	return 0, 0, &rebuildError{fmt.Errorf("waiting for a producer id from the transaction coordinator of %q at %v: %w", runcfg.TransactionalID(p.cfg), p.cfg.Brokers, err)}
}
