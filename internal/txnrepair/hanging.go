package txnrepair

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/eosflow/eosflow/config"

	"github.com/twmb/franz-go/pkg/kadm"
)

// SearchFunc tells how the coordinator of txnID ended the transaction open
// in p, from its log or its markers (Finder.Search over the partitions a
// look described; see Evidence).
type SearchFunc func(txnID string, p kadm.DescribedProducer) Verdict

// Facts are what the search for hanging transactions knows besides the
// cluster: whose transactions it judges, how long a transaction may stay
// open, and which of the app's instances run.
type Facts struct {
	// AppID limits the coordinators asked to the app's transactional ids
	// (AppID, config.TransactionalIDSeparator, the instance id); "" asks
	// about every transactional id.
	AppID string
	// MaxTimeout is how long a transaction may stay open (the brokers'
	// transaction.max.timeout.ms); zero means config.MaxTransactionTimeout.
	MaxTimeout time.Duration
	// Now is the time open transactions are aged at; zero means time.Now().
	Now time.Time
	// Instances returns the instance ids of the app's group members now;
	// nil when the caller does not know them. See FindHanging.
	Instances func(ctx context.Context) map[string]bool
	// Search is the evidence search for outcomes the coordinator does not
	// prove; nil searches nothing further.
	Search SearchFunc
	// ActsOn reports whether the caller completes h on its proven outcome
	// by itself; the verdicts of those it does not are cleared, so they
	// count as unproven (see FindHanging). Nil acts on all.
	ActsOn func(h Hanging) bool
}

// FindHanging returns the transactions that open (partitions' open
// transactions, as DescribeProducers gives them) hold open and that no
// coordinator will end (see Coordinators.Classify), each with why and
// with what the evidence proves of its outcome (see Prove). A
// transaction of an instance of the app that runs again (in the group,
// its coordinator in a new session: Empty or Ongoing) and that no
// evidence decides is left out: that instance alone knows, from before
// its InitProducerId, how it ended, and completes it itself.
//
// The error reports what the coordinators could not be asked (see
// LookupCoordinators); the transactions found are returned with it, and
// those the coordinators could not tell about are not among them.
func (f *Finder) FindHanging(ctx context.Context, facts Facts, open []kadm.DescribedProducer) ([]Hanging, error) {
	if len(open) == 0 {
		return nil, nil
	}
	var pids []int64
	for _, p := range open {
		if !slices.Contains(pids, p.ProducerID) {
			pids = append(pids, p.ProducerID)
		}
	}
	coords, err := LookupCoordinators(ctx, f.adm, pids, facts.AppID)
	now, maxTimeout := facts.Now, facts.MaxTimeout
	if now.IsZero() {
		now = time.Now()
	}
	if maxTimeout <= 0 {
		maxTimeout = config.MaxTransactionTimeout
	}
	var instances map[string]bool // described once, when first needed
	var out []Hanging
	for _, p := range open {
		h, hangs := coords.Classify(p, maxTimeout, now)
		if !hangs {
			continue
		}
		h.Verdict = f.Prove(ctx, h, facts.Search)
		if v := h.Verdict; v.Proven() && facts.ActsOn != nil && !facts.ActsOn(h) {
			h.Reason += fmt.Sprintf("; proven %s (%s), but left to an operator", v.Marker(), v.Where)
			h.Verdict = Verdict{}
		}
		if d := h.Coordinator; !h.Verdict.Proven() && d != nil && (d.State == "Empty" || d.State == "Ongoing") &&
			facts.AppID != "" && facts.Instances != nil {
			if instances == nil {
				instances = facts.Instances(ctx)
			}
			if instances[strings.TrimPrefix(h.TxnID, appPrefix(facts.AppID))] {
				continue
			}
		}
		out = append(out, h)
	}
	return out, err
}

// Prove is what the evidence proves of h's outcome: its coordinator's
// word (see FromCoordinator), else search's (nil: nothing more).
func (f *Finder) Prove(ctx context.Context, h Hanging, search SearchFunc) Verdict {
	if h.Coordinator != nil {
		if v := f.FromCoordinator(ctx, *h.Coordinator, h.DescribedProducer); v.Proven() {
			return v
		}
	}
	if search == nil {
		return Verdict{}
	}
	return search(h.TxnID, h.DescribedProducer)
}
