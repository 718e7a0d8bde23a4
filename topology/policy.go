package topology

import (
	"fmt"
	"time"
)

// PolicyKind says what happens to a record whose processing failed.
type PolicyKind int

// The error policies. Fail is the zero value so that an unset policy is the
// safe one: nothing is skipped unless someone asked for it.
const (
	// PolicyFail aborts the transaction and stops the pipeline with the error.
	PolicyFail PolicyKind = iota
	// PolicyRetry calls the failing node again with exponential backoff,
	// then hands the error to the policy in Then.
	PolicyRetry
	// PolicyDeadLetter writes the original record, with error headers, to a
	// dead-letter topic in the same transaction as the offset commit.
	PolicyDeadLetter
	// PolicySkip drops the record, counting and logging it.
	PolicySkip
)

// String is the policy's name as Describe prints it.
func (k PolicyKind) String() string {
	switch k {
	case PolicyFail:
		return "fail"
	case PolicyRetry:
		return "retry"
	case PolicyDeadLetter:
		return "dead-letter"
	case PolicySkip:
		return "skip"
	}
	return fmt.Sprintf("PolicyKind(%d)", int(k))
}

// ErrorPolicy is what to do when user code fails on a record. Build one with
// Fail, Retry, DeadLetter or Skip.
type ErrorPolicy struct {
	Kind       PolicyKind
	Attempts   int           // Retry: calls in total, including the first
	Backoff    time.Duration // Retry: wait before the second call, doubled after each
	MaxBackoff time.Duration // Retry: the cap on one wait
	Topic      string        // DeadLetter: where failed records go
	Then       *ErrorPolicy  // Retry: applied once the attempts are used up
}

// Fail stops the pipeline on the first error; the open transaction aborts,
// so nothing of the batch becomes visible. This is the default.
func Fail() ErrorPolicy { return ErrorPolicy{Kind: PolicyFail} }

// Skip drops records whose processing failed. They are counted and logged;
// their offsets commit with the rest of the batch.
func Skip() ErrorPolicy { return ErrorPolicy{Kind: PolicySkip} }

// DeadLetter writes the failed input record, unchanged, to topic with headers
// naming the node, the error and the source coordinates. The write and the
// offset commit share a transaction in exactly-once mode.
func DeadLetter(topic string) ErrorPolicy {
	return ErrorPolicy{Kind: PolicyDeadLetter, Topic: topic}
}

// Retry calls the failing node up to attempts times in all, waiting backoff
// before the second call and doubling the wait each time up to 30 times
// backoff, then applies then. Retries run inside the open transaction, so
// keep the total wait well below the transaction timeout; CheckRetryTime
// reports the nodes where it is not.
func Retry(attempts int, backoff time.Duration, then ErrorPolicy) ErrorPolicy {
	return ErrorPolicy{Kind: PolicyRetry, Attempts: attempts, Backoff: backoff, MaxBackoff: 30 * backoff, Then: &then}
}

// Final is the policy that applies once retries, if any, are used up.
func (p ErrorPolicy) Final() ErrorPolicy {
	for p.Kind == PolicyRetry && p.Then != nil {
		p = *p.Then
	}
	if p.Kind == PolicyRetry {
		return Fail()
	}
	return p
}

// Delay is the wait before call attempt+2, after attempt+1 calls failed.
func (p ErrorPolicy) Delay(attempt int) time.Duration {
	d := p.Backoff
	for i := 0; i < attempt && d < p.MaxBackoff; i++ {
		d *= 2
	}
	if p.MaxBackoff > 0 && d > p.MaxBackoff {
		d = p.MaxBackoff
	}
	return d
}

// String describes the policy as Describe prints it.
func (p ErrorPolicy) String() string {
	switch p.Kind {
	case PolicyRetry:
		then := "fail"
		if p.Then != nil {
			then = p.Then.String()
		}
		return fmt.Sprintf("retry(%d, %s) then %s", p.Attempts, p.Backoff, then)
	case PolicyDeadLetter:
		return fmt.Sprintf("dead-letter(%s)", p.Topic)
	}
	return p.Kind.String()
}

// check returns the problem with p, or "".
func (p ErrorPolicy) check() string {
	switch p.Kind {
	case PolicyFail, PolicySkip:
		return ""
	case PolicyDeadLetter:
		if p.Topic == "" {
			return "dead-letter policy has no topic; use DeadLetter(\"my-app-dlq\")"
		}
		return ""
	case PolicyRetry:
		if p.Attempts < 1 {
			return fmt.Sprintf("retry policy with %d attempts; use at least 1", p.Attempts)
		}
		if p.Backoff < 0 {
			return "retry policy with a negative backoff"
		}
		if p.Then != nil {
			return p.Then.check()
		}
		return ""
	}
	return fmt.Sprintf("unknown error policy kind %d", int(p.Kind))
}
