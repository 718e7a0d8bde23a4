package eos

import (
	"time"

	"github.com/eosflow/eosflow/config"
)

// waits are the bounds the runtime derives from the configuration, fixed
// when the Runner is made.
type waits struct {
	// hardCut is when a batch stops taking records it already polled:
	// hardCut commit intervals, but no later than halfway from the
	// interval to transaction_timeout, so that a batch never outlives its
	// transaction for processing what it polled.
	hardCut time.Duration
	// stall is how long the runtime waits for a batch to start while
	// input is waiting before it calls the pipeline stalled: long enough
	// for a hanging transaction to time out and be cleaned up
	// (transaction_timeout plus the broker's 10 s abort sweep), for a dead
	// member to leave (session_timeout) and for a rebalance to finish
	// (rebalance_timeout).
	stall time.Duration
	// idleCheck is how long one poll waits before the loop looks at how
	// long it has been idle.
	idleCheck time.Duration
	// end bounds the end of a batch, which may wait for a produce flush
	// and the commit round trips, so a wedged broker becomes a rebuild,
	// not a hang.
	end time.Duration
}

func newWaits(cfg config.Config) waits {
	ci, tt := cfg.CommitInterval, cfg.TransactionTimeout
	stall := max(tt+10*time.Second, cfg.SessionTimeout, cfg.RebalanceTimeout) + 10*time.Second
	return waits{hardCut: max(min(hardCut*ci, ci+(tt-ci)/2), ci), stall: stall, idleCheck: min(5*time.Second, stall), end: tt + 10*time.Second}
}
