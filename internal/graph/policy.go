package graph

import "time"

// PolicyKind says what happens to a record whose processing failed.
type PolicyKind int

// The error policies. Fail is the zero value so that an unset policy is the
// safe one: nothing is skipped unless someone asked for it.
const (
	PolicyFail PolicyKind = iota
	PolicyRetry
	PolicyDeadLetter
	PolicySkip
)

// Policy is the data behind a topology.ErrorPolicy.
type Policy struct {
	Kind       PolicyKind
	Attempts   int           // Retry: calls in total, including the first
	Backoff    time.Duration // Retry: wait before the second call, doubled after each
	MaxBackoff time.Duration // Retry: the cap on one wait
	Topic      string        // DeadLetter: where failed records go
	Then       *Policy       // Retry: applied once the attempts are used up
}

// Final is the policy that applies once retries, if any, are used up.
func (p Policy) Final() Policy {
	for p.Kind == PolicyRetry && p.Then != nil {
		p = *p.Then
	}
	if p.Kind == PolicyRetry {
		return Policy{Kind: PolicyFail}
	}
	return p
}

// Delay is the wait before call attempt+2, after attempt+1 calls failed.
func (p Policy) Delay(attempt int) time.Duration {
	d := p.Backoff
	for i := 0; i < attempt && d < p.MaxBackoff; i++ {
		d *= 2
	}
	if p.MaxBackoff > 0 && d > p.MaxBackoff {
		d = p.MaxBackoff
	}
	return d
}
