package topology

import (
	"errors"
	"fmt"
	"time"
)

// ErrInvalid matches every error Validate returns, so callers can tell a
// mistake in the pipeline's declaration from a runtime failure.
var ErrInvalid = errors.New("topology: invalid")

// ValidationError names the node (or topology) at fault and what to change.
type ValidationError struct {
	Node    string // "" when the problem concerns the whole topology
	Problem string
}

// Error names the node and the problem.
func (e *ValidationError) Error() string {
	if e.Node == "" {
		return "topology: " + e.Problem
	}
	return fmt.Sprintf("topology: node %q: %s", e.Node, e.Problem)
}

// Is makes errors.Is(err, ErrInvalid) hold for every ValidationError.
func (e *ValidationError) Is(target error) bool { return target == ErrInvalid }

// NodeError is a failure of user code at one node while processing a record.
// The runtime applies the node's error policy to it.
type NodeError struct {
	Node  string
	Err   error
	Stack []byte // set when the error was a panic
}

// Error names the node and whether it panicked.
func (e *NodeError) Error() string {
	if e.Stack != nil {
		return fmt.Sprintf("node %q panicked: %v", e.Node, e.Err)
	}
	return fmt.Sprintf("node %q: %v", e.Node, e.Err)
}

// Unwrap exposes the user's error to errors.Is and errors.As.
func (e *NodeError) Unwrap() error { return e.Err }

// ErrRetryTooLong matches every error CheckRetryTime reports for a node:
// its retries can wait so long that the broker aborts the transaction
// holding the record, after which the producer gets the errors of a
// fenced zombie and the pipeline stops.
var ErrRetryTooLong = errors.New("topology: retries can outlast the transaction")

// RetryTimeError is a node whose error policy can wait Total in retry
// backoff for one record, at least Limit (the transaction timeout). It
// matches ErrRetryTooLong and ErrInvalid.
type RetryTimeError struct {
	Node     string
	Policy   ErrorPolicy   // the node's policy, its own or the default
	Attempts int           // calls in total, over every Retry in the Then chain
	Total    time.Duration // the sum of all waits between those calls
	Limit    time.Duration // the limit checked against: the transaction timeout
}

// Error names the node, its policy, the total wait and the limit, and how
// to bring the total below the limit.
func (e *RetryTimeError) Error() string {
	return fmt.Sprintf("topology: node %q: %s can wait %s in backoff over %d attempts, not below the transaction timeout %s; "+
		"use fewer attempts or a shorter backoff, or raise transaction_timeout above %s",
		e.Node, e.Policy, e.Total, e.Attempts, e.Limit, e.Total)
}

// Is makes errors.Is hold for ErrRetryTooLong and for ErrInvalid, since
// the cure is a change to the pipeline's declaration or its config.
func (e *RetryTimeError) Is(target error) bool {
	return target == ErrRetryTooLong || target == ErrInvalid
}

// ErrNoKey matches the error of an aggregation (Count, Reduce, Aggregate)
// given a record without a key: it has no group to count it in. The
// node's error policy applies to it, without retries.
var ErrNoKey = errors.New("topology: record has no key")

// ErrEmptyDedupID is the error of a Dedup node whose id function returned
// "": every record needs an id that is the same on each delivery.
var ErrEmptyDedupID = errors.New("topology: dedup id function returned an empty id; derive the id from the record (a header, a field of the value, or topic/partition/offset)")
