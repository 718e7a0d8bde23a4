package main

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/eosflow/eosflow/config"
	"github.com/eosflow/eosflow/internal/txnrepair"
	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
)

// hangingJSON is one hanging transaction: an open transaction on a
// partition that no coordinator will ever finish.
type hangingJSON struct {
	producerJSON
	TransactionalID string `json:"transactional_id,omitempty"`
	AgeMillis       int64  `json:"age_ms"`
	Reason          string `json:"reason"`
	// Outcome is how its coordinator ended it, as far as the evidence
	// proves: "committed, marker missing", "aborted, marker missing" or
	// "unknown"; Evidence says where that was read.
	Outcome  string `json:"outcome"`
	Evidence string `json:"evidence,omitempty"`
	// Settle is the command that completes it as its outcome says, or
	// why none can yet.
	Settle  string            `json:"settle"`
	outcome txnrepair.Outcome // the verdict behind Outcome
}

// newTxnHangingCmd finds hanging transactions (KIP-664).
func newTxnHangingCmd(g *globals) *cobra.Command {
	var (
		topic      string
		partition  int32
		broker     int32
		maxTimeout time.Duration
	)
	c := &cobra.Command{
		Use:   "hanging [--topic T [--partition N] | --broker ID]",
		Short: "Find hanging transactions that block read_committed consumers",
		Long: `Find hanging transactions (KIP-664): a partition has an open transaction
older than the longest allowed transaction timeout, and its coordinator does
not know it (no transactional id has its producer id, the id is not in an
ongoing state, or the id's transaction does not include the partition).
Nothing will ever finish such a transaction: its last stable offset is stuck
and read_committed consumers stop there.

Each is judged with the evidence the runtime's own repair reads: the
coordinator one epoch on, its log (__transaction_state) or the markers it
wrote on the transaction's other partitions. One proven committed is
completed with 'eosctl txn commit', one proven aborted with 'eosctl txn
abort'; one that no evidence decides is reported as unknown, and aborting it
needs --force, as it may drop a committed transaction's records.

Exits 1 when it finds any.`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if partition >= 0 && topic == "" {
				return usageErrorf("--partition needs --topic")
			}
			if cmd.Flags().Changed("max-timeout") {
				if err := parsePositiveDuration("max-timeout", maxTimeout); err != nil {
					return err
				}
			}
			return g.withOutcomes(cmd, func(ctx context.Context, adm *kadm.Client, f *txnrepair.Finder) error {
				if !cmd.Flags().Changed("max-timeout") {
					maxTimeout = brokerMaxTxnTimeout(ctx, adm)
				}
				s, err := hangingScope(ctx, adm, topic, partition, broker, cmd.Flags().Changed("broker"))
				if err != nil {
					return err
				}
				hanging, err := findHanging(ctx, &judge{adm: adm, f: f}, s, maxTimeout, time.Now())
				if err != nil {
					return err
				}
				t := newTable("TOPIC", "PARTITION", "PRODUCER ID", "EPOCH", "COORDINATOR EPOCH", "START OFFSET", "LAST TIMESTAMP", "AGE", "TRANSACTIONAL ID", "OUTCOME", "REASON")
				for _, h := range hanging {
					t.add(h.Topic, h.Partition, h.ProducerID, h.ProducerEpoch, h.CoordinatorEpoch, h.CurrentTxnStartOffset,
						fmtTime(derefTime(h.LastTimestamp)), fmtAge(time.Duration(h.AgeMillis)*time.Millisecond), orDash(h.TransactionalID), h.Outcome, h.Reason)
				}
				if err := g.render(cmd.OutOrStdout(), hanging, t); err != nil {
					return err
				}
				if len(hanging) == 0 {
					if g.output == outputTable {
						fmt.Fprintf(cmd.ErrOrStderr(), "no hanging transactions older than %s\n", maxTimeout)
					}
					return nil
				}
				if g.output == outputTable {
					for _, h := range hanging {
						fmt.Fprintf(cmd.ErrOrStderr(), "%s-%d at %d: %s\n", h.Topic, h.Partition, h.CurrentTxnStartOffset, h.Settle)
					}
				}
				return errFindings
			})
		},
	}
	f := c.Flags()
	f.StringVar(&topic, "topic", "", "only this topic (default every topic)")
	f.Int32Var(&partition, "partition", -1, "only this partition of --topic")
	f.Int32Var(&broker, "broker", -1, "only partitions with a replica on this broker id (their leaders are asked)")
	f.DurationVar(&maxTimeout, "max-timeout", config.MaxTransactionTimeout,
		"transactions open longer than this are candidates (default the brokers' transaction.max.timeout.ms, else 15m)"+durationFlagHelp)
	c.MarkFlagsMutuallyExclusive("topic", "broker")
	return c
}

// brokerMaxTxnTimeout reads transaction.max.timeout.ms from the brokers
// (the largest, in case they differ): no transaction can legitimately stay
// open longer. It falls back to Kafka's default when the brokers hide it.
func brokerMaxTxnTimeout(ctx context.Context, adm *kadm.Client) time.Duration {
	cfgs, err := brokerConfigs(ctx, adm)
	if err != nil {
		return config.MaxTransactionTimeout
	}
	var best time.Duration
	for _, c := range cfgs {
		if ms, err := strconv.ParseInt(c["transaction.max.timeout.ms"], 10, 64); err == nil {
			best = max(best, time.Duration(ms)*time.Millisecond)
		}
	}
	if best == 0 {
		return config.MaxTransactionTimeout
	}
	return best
}

// hangingScope resolves which partitions to search: one topic (or one
// partition of it), the partitions with a replica on one broker, or all.
func hangingScope(ctx context.Context, adm *kadm.Client, topic string, partition, broker int32, byBroker bool) (kadm.TopicsSet, error) {
	if topic != "" {
		return topicPartitions(ctx, adm, topic, partition)
	}
	md, err := adm.Metadata(ctx)
	if err != nil {
		return nil, kafkaErr("metadata", err)
	}
	if byBroker && !slices.ContainsFunc(md.Brokers, func(b kadm.BrokerDetail) bool { return b.NodeID == broker }) {
		return nil, fmt.Errorf("broker %d is not in the cluster — brokers are %v", broker, md.Brokers.NodeIDs())
	}
	s := kadm.TopicsSet{}
	for _, td := range md.Topics {
		if td.Err != nil {
			continue
		}
		for _, pd := range td.Partitions {
			if !byBroker || slices.Contains(pd.Replicas, broker) {
				s.Add(td.Topic, pd.Partition)
			}
		}
	}
	return s, nil
}

// findHanging implements the detection: candidates from DescribeProducers
// (an open transaction whose producer last wrote more than maxTimeout ago),
// then for each producer id its transactional id (ListTransactions filtered
// by producer id) and the coordinator's view of it (DescribeTransactions);
// j judges how each ended.
func findHanging(ctx context.Context, j *judge, s kadm.TopicsSet, maxTimeout time.Duration, now time.Time) ([]hangingJSON, error) {
	adm := j.adm
	out := []hangingJSON{}
	if len(s) == 0 {
		return out, nil
	}
	producers, err := describeProducers(ctx, adm, s)
	if err != nil {
		return nil, err
	}
	var candidates []kadm.DescribedProducer
	var pids []int64
	for _, p := range producers {
		if p.CurrentTxnStartOffset < 0 || now.Sub(millis(p.LastTimestamp)) <= maxTimeout {
			continue
		}
		candidates = append(candidates, p)
		if !slices.Contains(pids, p.ProducerID) {
			pids = append(pids, p.ProducerID)
		}
	}
	if len(candidates) == 0 {
		return out, nil
	}
	listed, err := adm.ListTransactions(ctx, pids, nil)
	if err != nil {
		return nil, kafkaErr("list transactions", err)
	}
	txnIDOf := make(map[int64]string)
	for _, l := range listed {
		if slices.Contains(pids, l.ProducerID) { // ignore ids we did not ask for
			txnIDOf[l.ProducerID] = l.TxnID
		}
	}
	var ids []string
	for _, id := range txnIDOf {
		ids = append(ids, id)
	}
	described, err := describeTxns(ctx, adm, ids)
	if err != nil {
		return nil, err
	}
	for _, p := range candidates {
		reason := hangingReason(p, txnIDOf[p.ProducerID], described)
		if reason == "" {
			continue
		}
		h := hangingJSON{
			producerJSON:    producerToJSON(p),
			TransactionalID: txnIDOf[p.ProducerID],
			AgeMillis:       now.Sub(millis(p.LastTimestamp)).Milliseconds(),
			Reason:          reason,
		}
		var d *kadm.DescribedTransaction
		if dt, ok := described[h.TransactionalID]; ok {
			d = &dt
		}
		v, err := j.outcome(ctx, p, h.TransactionalID, d)
		if err != nil {
			return nil, err
		}
		h.outcome, h.Outcome, h.Evidence = v.Outcome, outcomeText(v), v.Where
		h.Settle = adviceFor(h)
		out = append(out, h)
	}
	return out, nil
}

// hangingReason says why the coordinator will not finish p's transaction on
// its partition, or "" when it still will.
func hangingReason(p kadm.DescribedProducer, txnID string, described kadm.DescribedTransactions) string {
	if txnID == "" {
		return "no transactional id has this producer id"
	}
	d, ok := described[txnID]
	switch {
	case !ok:
		return fmt.Sprintf("coordinator does not know transactional id %q", txnID)
	case !coordinatorKnows(d.State):
		return fmt.Sprintf("transactional id %q is %s, not in a transaction", txnID, d.State)
	case d.ProducerID != p.ProducerID:
		return fmt.Sprintf("transactional id %q now has producer id %d", txnID, d.ProducerID)
	}
	if ps, ok := d.Topics[p.Topic]; ok {
		if _, ok := ps[p.Partition]; ok {
			return ""
		}
	}
	return fmt.Sprintf("transaction of %q does not include this partition", txnID)
}

// derefTime returns *t, or the zero time for nil.
func derefTime(t *time.Time) time.Time {
	if t == nil {
		return time.Time{}
	}
	return *t
}

// orDash prints "-" for an empty cell.
func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// parsePositiveDuration rejects a non-positive duration flag as a usage error.
func parsePositiveDuration(name string, d time.Duration) error {
	if d <= 0 {
		return usageErrorf("--%s must be positive, got %s", name, d)
	}
	return nil
}
