package main

import (
	"context"
	"fmt"

	"github.com/eosflow/eosflow/internal/txnrepair"
	"github.com/twmb/franz-go/pkg/kadm"
)

// judge tells how the coordinator ended the transactions that partitions
// hold open, with the evidence the runtime's repair reads (txnrepair): the
// coordinator one epoch on, its log, or the markers it wrote on the
// transaction's other partitions, found among every partition of the
// cluster. It describes those partitions once, on first need.
type judge struct {
	adm *kadm.Client
	f   *txnrepair.Finder
	all kadm.DescribedProducersTopics
}

// outcome is the verdict on the transaction open in h, of producer
// txnID ("" when no coordinator lists its producer id), whose coordinator
// says d (nil when it says nothing).
func (j *judge) outcome(ctx context.Context, h kadm.DescribedProducer, txnID string, d *kadm.DescribedTransaction) (txnrepair.Verdict, error) {
	if d != nil {
		if v := j.f.FromCoordinator(ctx, *d, h); v.Proven() {
			return v, nil
		}
	}
	if j.all == nil {
		md, err := j.adm.Metadata(ctx)
		if err != nil {
			return txnrepair.Verdict{}, kafkaErr("metadata", err)
		}
		all, err := j.adm.DescribeProducers(ctx, md.Topics.TopicsSet())
		if err != nil {
			return txnrepair.Verdict{}, kafkaErr("describe producers", err)
		}
		j.all = all
	}
	return j.f.Search(ctx, txnID, j.all, h), nil
}

// repairEpoch is the epoch of the marker that completes h with a proven
// outcome, as its coordinator would write it (txnrepair RepairEpoch):
// the producer's current epoch is its coordinator's, or past h's next
// one when no coordinator lists the producer id any more.
func (j *judge) repairEpoch(ctx context.Context, h kadm.DescribedProducer, d *kadm.DescribedTransaction, listed bool) int16 {
	current := h.ProducerEpoch
	switch {
	case d != nil && d.ProducerID == h.ProducerID:
		current = d.ProducerEpoch
	case !listed:
		current = h.ProducerEpoch + 2
	}
	return j.f.RepairEpoch(ctx, h, current)
}

// outcomeText is how txn hanging reports a verdict.
func outcomeText(v txnrepair.Verdict) string {
	switch {
	case v.Outcome == txnrepair.Committed:
		return "committed, marker missing"
	case v.Outcome == txnrepair.Aborted:
		return "aborted, marker missing"
	case v.Unsure:
		return "unknown (a read failed; try again)"
	}
	return "unknown"
}

// adviceFor is the command that settles the transaction h reports.
func adviceFor(h hangingJSON) string {
	at := fmt.Sprintf("--topic %s --partition %d --start-offset %d", h.Topic, h.Partition, h.CurrentTxnStartOffset)
	switch h.outcome {
	case txnrepair.Committed:
		return "it committed (" + h.Evidence + "); complete it with: eosctl txn commit " + at
	case txnrepair.Aborted:
		return "it aborted (" + h.Evidence + "); complete it with: eosctl txn abort " + at
	}
	return "no evidence tells how it ended (neither its coordinator, its log nor a marker on its other partitions); " +
		"find out before acting: aborting drops its records even if it committed, while the rest of it stays visible. " +
		"Only then: eosctl txn abort --force " + at
}
