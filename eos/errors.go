package eos

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/eosflow/eosflow/config"
	"github.com/eosflow/eosflow/internal/kafkautil"
	"github.com/twmb/franz-go/pkg/kerr"
)

// ErrFenced matches every *FencedError.
var ErrFenced = errors.New("eos: producer fenced")

// ErrUnreachable means no seed broker answered within the connect timeout.
var ErrUnreachable = errors.New("eos: brokers unreachable")

// ErrAuthentication means the brokers refused this client's SASL login or
// its TLS client certificate (or its lack of one, on a mutual-TLS
// listener), or it refused their TLS certificate: Run stops at once, as
// retrying the same credentials cannot succeed.
var ErrAuthentication = errors.New("eos: authentication failed")

// ErrMissingTopics matches every *MissingTopicsError.
var ErrMissingTopics = errors.New("eos: topics do not exist")

// ErrClosed is returned by Run on a closed Runner.
var ErrClosed = errors.New("eos: runner closed")

// FencedError means another process runs with this instance's instance_id:
// it took over the transactional.id (PRODUCER_FENCED) and the group slot
// (the static member id, FENCED_INSTANCE_ID). This instance is a zombie
// and stopped without committing. Restarting it under the same instance
// id fences the other one in turn, so first make sure only one process
// runs per instance id. A fence with no such process in the group (the
// coordinator aborted a transaction on its own) is not an error: the
// batch is redone.
type FencedError struct {
	TransactionalID string
	Err             error
}

// Error names the transactional.id and says what to do.
func (e *FencedError) Error() string {
	return fmt.Sprintf("eos: transactional.id %q was fenced (%v): another process with the same instance_id took over; this one stopped without committing — check that no two processes share instance_id", e.TransactionalID, e.Err)
}

// Unwrap exposes the broker's error.
func (e *FencedError) Unwrap() error { return e.Err }

// Is makes errors.Is(err, ErrFenced) hold.
func (e *FencedError) Is(target error) bool { return target == ErrFenced }

// MissingTopicsError lists the topics the topology needs that the cluster
// does not have. Nothing was consumed.
type MissingTopicsError struct {
	Topics []string // the missing topics, in the order the topology names them
	// Brokers are the seed brokers the runner asked, so the command in
	// the message reaches the same cluster; without them it leaves out
	// --brokers and eosctl uses EOS_BROKERS or 127.0.0.1:9092.
	Brokers []string
}

// Error lists the missing topics and the eosctl command that creates them.
func (e *MissingTopicsError) Error() string {
	// Topic names Kafka accepts need no quoting in a shell; anything else
	// (an IPv6 [host]:port, a name Kafka would refuse) is single-quoted so
	// the command can be pasted as printed.
	word := func(s string) string {
		if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-:,/") == "" {
			return s
		}
		return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
	}
	cmd := []string{"eosctl", "topic", "create"}
	for _, t := range e.Topics {
		cmd = append(cmd, word(t))
	}
	if len(e.Brokers) > 0 {
		cmd = append(cmd, "--brokers", word(strings.Join(e.Brokers, ",")))
	}
	what, it := "topics "+strings.Join(e.Topics, ", ")+" do not exist", "them"
	if len(e.Topics) == 1 {
		what, it = "topic "+e.Topics[0]+" does not exist", "it"
	}
	return fmt.Sprintf("eos: %s; create %s with: %s", what, it, strings.Join(cmd, " "))
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
func isFatal(err error) bool { return kafkautil.IsFatal(err) }

// ErrStalled matches every *StallError.
var ErrStalled = errors.New("eos: pipeline stalled")

// StallError means no batch could start for longer than the stall bound
// while input was waiting, and a new client did not help. It names what the
// runtime was waiting for and how to look at it.
type StallError struct {
	Group      string
	Partitions []string      // input partitions with records waiting, "topic/partition"
	Waited     time.Duration // time without a batch
	Waiting    string        // what the client was waiting for, as far as the broker says
	// Hanging are the hanging transactions that no evidence decides,
	// which the runtime leaves open rather than complete on a guess.
	Hanging []HangingTxn
}

// Error names the partitions, the wait and the commands to inspect them.
func (e *StallError) Error() string {
	msg := fmt.Sprintf("eos: no batch started for %s although input is waiting on %s: %s; inspect with `eosctl group lag %s` and `eosctl txn list` (a hanging transaction: `eosctl txn hanging`)",
		e.Waited.Round(time.Second), strings.Join(e.Partitions, ", "), e.Waiting, e.Group)
	if len(e.Hanging) == 0 {
		return msg
	}
	hs := make([]string, len(e.Hanging))
	for i, h := range e.Hanging {
		hs[i] = h.String() + " (" + h.inspect() + ")"
	}
	return msg + "; no evidence tells how these hanging transactions ended, so none was completed: " + strings.Join(hs, "; ") +
		"; settle each with `eosctl txn commit` or `eosctl txn abort` once its outcome is known (`eosctl txn abort --force` aborts one whose outcome nothing proves, at the risk of dropping a committed batch's records)"
}

// HangingTxn is a transaction that a partition holds open although its
// producer moved on (a broker crash lost or skipped its marker), and
// whose outcome neither its coordinator, nor its log, nor a marker on its
// other partitions proves. The runtime never completes such a one: an
// ABORT could drop a committed batch's records, a COMMIT expose aborted
// ones.
type HangingTxn struct {
	TransactionalID string
	ProducerID      int64
	Epoch           int16
	Topic           string
	Partition       int32
	StartOffset     int64 // the transaction's first offset on the partition
}

// String names the transaction and where it is open.
func (h HangingTxn) String() string {
	return fmt.Sprintf("transaction of %q (producer id %d, epoch %d) open on %s/%d from offset %d",
		h.TransactionalID, h.ProducerID, h.Epoch, h.Topic, h.Partition, h.StartOffset)
}

// HangingError stops a session that would write into partitions where
// this instance's own earlier transactions hang with no proof of their
// outcome: Kafka joins a producer's new transaction to the one still
// open on a partition, so its commit would commit the hanging one too,
// and its abort abort it. The runtime waits for proof up to
// recovery_timeout, then Run returns this error.
type HangingError struct {
	Hanging []HangingTxn
	Waited  time.Duration
}

// Error names the transactions and the commands that settle them.
func (e *HangingError) Error() string {
	hs := make([]string, len(e.Hanging))
	for i, h := range e.Hanging {
		hs[i] = h.String() + " (" + h.inspect() + ")"
	}
	return fmt.Sprintf("eos: waited %s for proof of how this instance's hanging transactions ended, which neither the coordinator, nor its log, nor a marker gives: %s; settle each with `eosctl txn commit` or `eosctl txn abort` once its outcome is known (`eosctl txn abort --force` aborts one whose outcome nothing proves, at the risk of dropping a committed batch's records)",
		e.Waited.Round(time.Second), strings.Join(hs, "; "))
}

// inspect is the command that shows the evidence on h.
func (h HangingTxn) inspect() string {
	return fmt.Sprintf("`eosctl txn hanging --topic %s --partition %d`", h.Topic, h.Partition)
}

// Is makes errors.Is(err, ErrStalled) hold.
func (e *StallError) Is(target error) bool { return target == ErrStalled }

// ErrTransactionTimeout matches every *TransactionTimeoutError.
var ErrTransactionTimeout = errors.New("eos: transaction outlived transaction_timeout")

// TransactionTimeoutError means one record took so long that its batch's
// transaction outlived transaction_timeout: the coordinator aborts such a
// transaction, so the batch can never commit. Smaller batches cannot help;
// the record must be processed faster or the timeout raised.
type TransactionTimeoutError struct {
	Topic     string
	Partition int32
	Offset    int64
	Took      time.Duration // time the batch was open when the record finished
	Timeout   time.Duration // transaction_timeout
}

// Error names the record and the timeout.
func (e *TransactionTimeoutError) Error() string {
	return fmt.Sprintf("eos: record %s/%d@%d kept its transaction open %s, past transaction_timeout %s, so the coordinator aborts it; make that record's processing faster or raise transaction_timeout (EOS_TRANSACTION_TIMEOUT, at most the broker's transaction.max.timeout.ms)",
		e.Topic, e.Partition, e.Offset, e.Took.Round(time.Millisecond), e.Timeout)
}

// Is makes errors.Is(err, ErrTransactionTimeout) hold.
func (e *TransactionTimeoutError) Is(target error) bool { return target == ErrTransactionTimeout }

// ErrRejectedSetting matches every *RejectedSettingError.
var ErrRejectedSetting = errors.New("eos: the broker rejected a setting")

// RejectedSettingError means the broker refused a configured value (one
// Validate cannot know, because the broker's own limits may differ from
// the defaults it checks). No retry can fix it.
type RejectedSettingError struct {
	Setting string // the config field, e.g. session_timeout
	Value   string
	Limit   string // the broker setting that bounds it
	Err     error  // the broker's answer
}

// Error names the setting, the broker's limit and the fix.
func (e *RejectedSettingError) Error() string {
	return fmt.Sprintf("eos: the broker rejected %s %s (%v); it must lie within the broker's %s: change %s (EOS_%s) or the broker setting",
		e.Setting, e.Value, e.Err, e.Limit, e.Setting, strings.ToUpper(e.Setting))
}

// Unwrap exposes the broker's error.
func (e *RejectedSettingError) Unwrap() error { return e.Err }

// Is makes errors.Is(err, ErrRejectedSetting) hold.
func (e *RejectedSettingError) Is(target error) bool { return target == ErrRejectedSetting }

// rejectedSetting turns the broker's refusal of a configured value into an
// error naming the setting and the broker's bound, or returns nil.
func rejectedSetting(cfg config.Config, err error) *RejectedSettingError {
	switch {
	case errors.Is(err, kerr.InvalidSessionTimeout):
		return &RejectedSettingError{Setting: "session_timeout", Value: cfg.SessionTimeout.String(), Err: err,
			Limit: "group.min.session.timeout.ms (default 6s) and group.max.session.timeout.ms (default 30m)"}
	case errors.Is(err, kerr.InvalidTransactionTimeout):
		return &RejectedSettingError{Setting: "transaction_timeout", Value: cfg.TransactionTimeout.String(), Err: err,
			Limit: "transaction.max.timeout.ms (default 15m)"}
	}
	return nil
}
