package topology

import (
	"fmt"
	"time"

	"github.com/eosflow/eosflow/internal/graph"
)

// ErrorPolicy is what to do when user code fails on a record. It is a value
// built by Fail, Retry, DeadLetter or Skip, so an invalid one cannot be made;
// the zero ErrorPolicy is Fail.
type ErrorPolicy struct{ p graph.Policy }

// Fail stops the pipeline on the first error; the open transaction aborts,
// so nothing of the batch becomes visible. This is the default.
func Fail() ErrorPolicy { return ErrorPolicy{} }

// Skip drops records whose processing failed. They are counted and logged;
// their offsets commit with the rest of the batch. An expired entry whose
// emission failed (a join's unmatched record, a final window result) is
// dropped alone, and the record that expired it goes on.
func Skip() ErrorPolicy { return ErrorPolicy{graph.Policy{Kind: graph.PolicySkip}} }

// DeadLetter writes the failed input record, unchanged, to topic with headers
// naming the node, the error and the source coordinates (the Header
// constants of package processor). The write and the offset commit share a
// transaction in exactly-once mode. For an expired entry whose emission
// failed (a join's unmatched record, a final window result) the dead
// letter is the entry itself, with headers naming its join or window.
func DeadLetter(topic string) ErrorPolicy {
	return ErrorPolicy{graph.Policy{Kind: graph.PolicyDeadLetter, Topic: topic}}
}

// DefaultMaxBackoffFactor is how many times backoff one wait of Retry may
// reach unless MaxBackoff says otherwise.
const DefaultMaxBackoffFactor = 30

// RetryOption tunes Retry.
type RetryOption interface{ apply(*graph.Policy) }

type retryOpt func(*graph.Policy)

func (f retryOpt) apply(p *graph.Policy) { f(p) }

// MaxBackoff caps one wait between calls at d, overriding the default of
// DefaultMaxBackoffFactor times the first backoff.
func MaxBackoff(d time.Duration) RetryOption {
	return retryOpt(func(p *graph.Policy) { p.MaxBackoff = d })
}

// Retry calls the failing node up to attempts times in all, waiting backoff
// before the second call and doubling the wait each time up to the cap (see
// MaxBackoff), then applies then. Each call starts from the store state
// the first one found: the store writes of a call that failed are undone
// before the next, and its emits dropped. Retries run inside the open
// transaction, so keep the total wait well below the transaction timeout;
// eos.New refuses a topology where it is not (see CheckRetryTime).
func Retry(attempts int, backoff time.Duration, then ErrorPolicy, opts ...RetryOption) ErrorPolicy {
	next := then.p
	p := graph.Policy{Kind: graph.PolicyRetry, Attempts: attempts, Backoff: backoff, MaxBackoff: DefaultMaxBackoffFactor * backoff, Then: &next}
	for _, o := range opts {
		o.apply(&p)
	}
	return ErrorPolicy{p}
}

// String describes the policy as Describe prints it.
func (p ErrorPolicy) String() string { return policyString(p.p) }

func policyString(p graph.Policy) string {
	switch p.Kind {
	case graph.PolicyRetry:
		then := "fail"
		if p.Then != nil {
			then = policyString(*p.Then)
		}
		capped := ""
		if p.MaxBackoff != DefaultMaxBackoffFactor*p.Backoff {
			capped = fmt.Sprintf(", max %s", p.MaxBackoff)
		}
		return fmt.Sprintf("retry(%d, %s%s) then %s", p.Attempts, p.Backoff, capped, then)
	case graph.PolicyDeadLetter:
		return fmt.Sprintf("dead-letter(%s)", p.Topic)
	case graph.PolicySkip:
		return "skip"
	}
	return "fail"
}

// check returns the problem with p, or "".
func (p ErrorPolicy) check() string { return checkPolicy(p.p) }

func checkPolicy(p graph.Policy) string {
	switch p.Kind {
	case graph.PolicyDeadLetter:
		if p.Topic == "" {
			return "dead-letter policy has no topic; use DeadLetter(\"my-app-dlq\")"
		}
	case graph.PolicyRetry:
		if p.Attempts < 1 {
			return fmt.Sprintf("retry policy with %d attempts; use at least 1", p.Attempts)
		}
		if p.Backoff < 0 {
			return "retry policy with a negative backoff"
		}
		if p.MaxBackoff < p.Backoff {
			return fmt.Sprintf("retry policy with MaxBackoff %s below its backoff %s", p.MaxBackoff, p.Backoff)
		}
		if p.Then != nil {
			return checkPolicy(*p.Then)
		}
	}
	return ""
}
