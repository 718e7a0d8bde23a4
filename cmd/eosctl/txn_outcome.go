package main

import (
	"context"
	"fmt"
	"time"

	"github.com/eosflow/eosflow/internal/txnrepair"
	"github.com/twmb/franz-go/pkg/kadm"
)

// judgeOne judges the transaction open in h as txn hanging does (see
// findHanging): whether it hangs, by what its coordinator says now, and
// what the evidence proves of its outcome, found among every partition of
// the cluster. A coordinator that cannot be asked is an error: "not
// listed" would set the marker's epoch.
func judgeOne(ctx context.Context, adm *kadm.Client, f *txnrepair.Finder, h kadm.DescribedProducer) (txnrepair.Hanging, bool, txnrepair.Verdict, error) {
	coords, err := txnrepair.LookupCoordinators(ctx, adm, []int64{h.ProducerID}, "")
	if err != nil {
		return txnrepair.Hanging{}, false, txnrepair.Verdict{}, kafkaErr("ask the transaction coordinator", err)
	}
	hg, hangs := coords.Classify(h, brokerMaxTxnTimeout(ctx, adm), time.Now())
	all, err := clusterProducers(ctx, adm)
	if err != nil {
		return txnrepair.Hanging{}, false, txnrepair.Verdict{}, err
	}
	return hg, hangs, f.Prove(ctx, hg, f.NewEvidence(ctx, all).Search), nil
}

// clusterProducers describes the producers of every partition of the
// cluster: where the markers that prove a transaction's outcome may be.
func clusterProducers(ctx context.Context, adm *kadm.Client) (kadm.DescribedProducersTopics, error) {
	md, err := adm.Metadata(ctx)
	if err != nil {
		return nil, kafkaErr("metadata", err)
	}
	all, err := adm.DescribeProducers(ctx, md.Topics.TopicsSet())
	if err != nil {
		return nil, kafkaErr("describe producers", err)
	}
	return all, nil
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
