package main

import (
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/eosflow/eosflow/config"
)

// checkPipeline checks the pipeline settings against the brokers' limits:
// a transaction must be able to commit before it times out, the broker must
// accept its timeout, and the group must accept its session timeout.
func (e *doctorEnv) checkPipeline(fs *findings) {
	c := e.cfg
	label := "pipeline config"
	if !e.hasConfig {
		label = "default config" // no --config: defaults and EOS_* variables
	}
	if e.hasConfig {
		if err := c.Validate(); err != nil {
			for _, err := range splitJoined(err) {
				fs.fail(label, err.Error(), "fix the setting in the --config file (or its EOS_* variable)")
			}
		}
	}
	if c.Guarantee != config.ExactlyOnce {
		fs.ok(label, "guarantee %s uses no transactions", c.Guarantee)
	} else {
		e.checkTxnTimeout(fs, label)
	}

	minSession, maxSession := e.msConfig("group.min.session.timeout.ms", false), e.msConfig("group.max.session.timeout.ms", true)
	switch {
	case minSession > 0 && c.SessionTimeout < minSession:
		fs.fail(label, fmt.Sprintf("session_timeout %s is below the brokers' group.min.session.timeout.ms %s: joining the group fails with INVALID_SESSION_TIMEOUT", c.SessionTimeout, minSession),
			fmt.Sprintf("raise session_timeout to at least %s", minSession))
	case maxSession > 0 && c.SessionTimeout > maxSession:
		fs.fail(label, fmt.Sprintf("session_timeout %s is above the brokers' group.max.session.timeout.ms %s: joining the group fails with INVALID_SESSION_TIMEOUT", c.SessionTimeout, maxSession),
			fmt.Sprintf("lower session_timeout to at most %s", maxSession))
	default:
		fs.ok(label, "session_timeout %s is within the brokers' group limits", c.SessionTimeout)
	}
}

// checkTxnTimeout checks transaction_timeout against commit_interval and
// the brokers' transaction.max.timeout.ms (the smallest, since any broker
// may coordinate the transactional id).
func (e *doctorEnv) checkTxnTimeout(fs *findings, label string) {
	c := e.cfg
	if c.TransactionTimeout <= c.CommitInterval {
		fs.fail(label, fmt.Sprintf("transaction_timeout %s is not above commit_interval %s: transactions time out before they commit", c.TransactionTimeout, c.CommitInterval),
			"raise transaction_timeout (Kafka Streams uses 10s with 100ms commits) or lower commit_interval")
	}
	maxTxn := e.msConfig("transaction.max.timeout.ms", false)
	source := "the brokers' transaction.max.timeout.ms"
	if maxTxn <= 0 {
		maxTxn, source = config.MaxTransactionTimeout, "Kafka's default transaction.max.timeout.ms"
	}
	if c.TransactionTimeout > maxTxn {
		fs.fail(label, fmt.Sprintf("transaction_timeout %s exceeds %s (%s): InitProducerId fails with INVALID_TRANSACTION_TIMEOUT", c.TransactionTimeout, source, maxTxn),
			fmt.Sprintf("lower transaction_timeout to at most %s, or raise transaction.max.timeout.ms on every broker", maxTxn))
		return
	}
	if c.TransactionTimeout > c.CommitInterval {
		fs.ok(label, "transaction_timeout %s > commit_interval %s and <= %s (%s)", c.TransactionTimeout, c.CommitInterval, source, maxTxn)
	}
}

// msConfig reads a millisecond broker config as a duration: the largest
// across brokers when largest, else the smallest; 0 when none reports it.
func (e *doctorEnv) msConfig(key string, largest bool) time.Duration {
	var out time.Duration
	for _, v := range e.brokerConfig(key) {
		d, ok := msDuration(v)
		if !ok {
			continue
		}
		if out == 0 || largest && d > out || !largest && d < out {
			out = d
		}
	}
	return out
}

// msDuration parses a broker's millisecond setting. A value beyond what a
// time.Duration holds (about 292 years) saturates instead of wrapping
// around to a wrong, possibly negative, duration.
func msDuration(v string) (time.Duration, bool) {
	ms, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return 0, false
	}
	const limit = math.MaxInt64 / int64(time.Millisecond)
	switch {
	case ms > limit:
		return math.MaxInt64, true
	case ms < -limit:
		return math.MinInt64, true
	}
	return time.Duration(ms) * time.Millisecond, true
}

// splitJoined undoes errors.Join so each problem is its own finding.
func splitJoined(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}
