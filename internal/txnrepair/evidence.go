package txnrepair

import (
	"context"

	"github.com/twmb/franz-go/pkg/kadm"
)

// Evidence is one look's evidence search: Finder.Search over the
// producers of the partitions the look described, at most once per
// transaction (a transaction that hangs on several partitions is searched
// for once), all within one context that bounds the look.
type Evidence struct {
	f    *Finder
	ctx  context.Context
	all  kadm.DescribedProducersTopics
	seen map[[2]int64]Verdict
}

// NewEvidence searches within ctx, over all: the described producers of
// every partition the transactions may have written.
func (f *Finder) NewEvidence(ctx context.Context, all kadm.DescribedProducersTopics) *Evidence {
	return &Evidence{f: f, ctx: ctx, all: all, seen: map[[2]int64]Verdict{}}
}

// Search is the verdict on the transaction open in p, of txnID's
// producer; it is a SearchFunc.
func (e *Evidence) Search(txnID string, p kadm.DescribedProducer) Verdict {
	k := [2]int64{p.ProducerID, int64(p.ProducerEpoch)}
	v, ok := e.seen[k]
	if !ok {
		v = e.f.Search(e.ctx, txnID, e.all, p)
		e.seen[k] = v
	}
	return v
}
