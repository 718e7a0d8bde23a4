package eos

import (
	"errors"
	"fmt"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
)

// ErrFenced matches every *FencedError.
var ErrFenced = errors.New("eos: producer fenced")

// ErrUnreachable means no seed broker answered within the connect timeout.
var ErrUnreachable = errors.New("eos: brokers unreachable")

// ErrMissingTopics matches every *MissingTopicsError.
var ErrMissingTopics = errors.New("eos: topics do not exist")

// ErrClosed is returned by Run on a closed Runner.
var ErrClosed = errors.New("eos: runner closed")

// FencedError means a newer producer epoch exists for our transactional.id
// (another instance started with the same id, or the coordinator aborted our
// transaction after it timed out): this instance is a zombie and stopped
// without committing. Restarting it
// under the same instance id fences the other one in turn, so first make
// sure only one process runs per instance id.
type FencedError struct {
	TransactionalID string
	Err             error
}

// Error names the transactional.id and says what to do.
func (e *FencedError) Error() string {
	return fmt.Sprintf("eos: transactional.id %q was fenced (%v): a newer instance took over or this one stalled past transaction_timeout; it stopped without committing — restart it, and check that no two processes share instance_id", e.TransactionalID, e.Err)
}

// Unwrap exposes the broker's error.
func (e *FencedError) Unwrap() error { return e.Err }

// Is makes errors.Is(err, ErrFenced) hold.
func (e *FencedError) Is(target error) bool { return target == ErrFenced }

// MissingTopicsError lists the topics the topology needs that the cluster
// does not have. Nothing was consumed.
type MissingTopicsError struct{ Topics []string }

// Error lists the missing topics and how to create them.
func (e *MissingTopicsError) Error() string {
	return fmt.Sprintf("eos: topics %s do not exist; create them first (e.g. kafka-topics.sh --create --topic %s)", strings.Join(e.Topics, ", "), e.Topics[0])
}

// Is makes errors.Is(err, ErrMissingTopics) hold.
func (e *MissingTopicsError) Is(target error) bool { return target == ErrMissingTopics }

// isFenced reports whether err says another producer owns our id. With
// transactions v2 (KIP-890) a zombie's EndTxn can also be answered
// INVALID_TXN_STATE once a newer instance has bumped the epoch and aborted
// its transaction; rebuilding then would fence the newer instance in turn,
// so that too stops the zombie.
func isFenced(err error) bool {
	return errors.Is(err, kerr.ProducerFenced) || errors.Is(err, kerr.InvalidProducerEpoch) ||
		errors.Is(err, kerr.InvalidTxnState)
}

// isFatal reports errors that no rebuild can fix: a rebuild would hit them
// again, so Run stops and names the fix.
func isFatal(err error) bool {
	return errors.Is(err, kerr.TransactionalIDAuthorizationFailed) ||
		errors.Is(err, kerr.TopicAuthorizationFailed) ||
		errors.Is(err, kerr.GroupAuthorizationFailed) ||
		errors.Is(err, kerr.ClusterAuthorizationFailed)
}
