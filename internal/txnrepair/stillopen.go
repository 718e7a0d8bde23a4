package txnrepair

import (
	"context"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
)

// stillOpenTimeout bounds describing the partitions of hanging
// transactions again.
const stillOpenTimeout = 10 * time.Second

// StillOpen describes the partitions of hs again, after the coordinators
// and the evidence searches were asked, and keeps those that still hold
// the same transaction open (same producer id, epoch and start offset): a
// marker written meanwhile, by a coordinator that was only slow, is seen
// rather than raced. On an error none is kept: what holds them open now
// is not known.
func StillOpen(ctx context.Context, adm *kadm.Client, hs []Hanging) ([]Hanging, error) {
	if len(hs) == 0 {
		return nil, nil
	}
	again := kadm.TopicsSet{}
	for _, h := range hs {
		again.Add(h.Topic, h.Partition)
	}
	nctx, cancel := context.WithTimeout(ctx, stillOpenTimeout)
	defer cancel()
	now, err := adm.DescribeProducers(nctx, again)
	if err != nil {
		return nil, err
	}
	var out []Hanging
	for _, h := range hs {
		still := false
		now.EachProducer(func(p kadm.DescribedProducer) {
			still = still || p.Topic == h.Topic && p.Partition == h.Partition && p.ProducerID == h.ProducerID &&
				p.ProducerEpoch == h.ProducerEpoch && p.CurrentTxnStartOffset == h.CurrentTxnStartOffset
		})
		if still {
			out = append(out, h)
		}
	}
	return out, nil
}
