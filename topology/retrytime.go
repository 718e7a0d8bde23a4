package topology

import (
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/eosflow/eosflow/internal/graph"
)

// CheckRetryTime reports every node whose error policy, its own or the
// default, can wait limit or longer in retry backoff for one record. Pass
// the transaction timeout: retries run inside the open transaction, and a
// transaction that outlives its timeout is aborted by the broker, which
// stops the pipeline as if it were fenced. The worst case is the sum of
// the waits before every retry, each as Delay computes it (capped by
// MaxBackoff), over every Retry in the Then chain; for Dedup, three times
// that (its store check, effect and mark each retry). Nodes whose code is
// never retried (Filter, Peek, Branch, Merge) are not reported. The error
// joins one *RetryTimeError per node; nil means every node fits.
func (t *Topology) CheckRetryTime(limit time.Duration) error {
	if limit <= 0 {
		return fmt.Errorf("topology: retry time limit %s is not positive; pass the transaction timeout", limit)
	}
	var errs []error
	for _, n := range t.nodes {
		if !retried(n.op) {
			continue
		}
		p := n.Policy()
		total, attempts := retryTime(p.p)
		if n.op == "Dedup" {
			// One record can retry the store check, the effect and the
			// mark, each under the whole policy.
			total, attempts = mulSat(total, dedupRetried), attempts*dedupRetried
		}
		if attempts > 0 && total >= limit {
			errs = append(errs, &RetryTimeError{Node: n.name, Policy: p, Attempts: attempts, Total: total, Limit: limit})
		}
	}
	return errors.Join(errs...)
}

// dedupRetried is how many calls of a Dedup node each retry under its policy
// for one record: the store check (a claim, Seen or Mark), the effect, and
// the completion or Mark after it. A claim's wait for an id pending
// elsewhere (up to the lease) is not a retry, and is not counted.
const dedupRetried = 3

// retried reports whether the user code of an op runs under call, so that
// a Retry policy applies to it. Ops not listed here count as retried, so a
// new operator is checked until someone says otherwise.
func retried(op string) bool {
	switch op {
	case "Filter", "Peek", "Branch", "Merge":
		return false
	}
	return true
}

// retryTime is the longest p can wait between calls of a failing node,
// following Then, and the number of calls that makes; 0 calls when p does
// not retry. Sums saturate rather than overflow.
func retryTime(p graph.Policy) (total time.Duration, attempts int) {
	for step := &p; step != nil && step.Kind == graph.PolicyRetry; step = step.Then {
		if a := max(step.Attempts, 0); attempts > math.MaxInt-a {
			attempts = math.MaxInt
		} else {
			attempts += a
		}
		prev := time.Duration(-1)
		for i := 0; i < step.Attempts-1; i++ {
			d := max(step.Delay(i), 0) // the engine does not wait for a negative delay
			if d == prev {
				// Delay has stopped growing (capped, or never doubling):
				// every remaining wait is d.
				total = addSat(total, mulSat(d, step.Attempts-1-i))
				break
			}
			total = addSat(total, d)
			prev = d
		}
	}
	return total, attempts
}

func addSat(a, b time.Duration) time.Duration {
	if s := a + b; s >= a {
		return s
	}
	return math.MaxInt64
}

func mulSat(d time.Duration, n int) time.Duration {
	if d == 0 || n == 0 {
		return 0
	}
	if time.Duration(n) > math.MaxInt64/d {
		return math.MaxInt64
	}
	return d * time.Duration(n)
}
