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
that its coordinator will never end, by the rule the runtime's own repair
uses. Either the coordinator has moved its transactional id to a later epoch
and is not preparing a commit or abort (it ended this transaction and wrote
this partition no marker), or it no longer tracks the transaction (no
transactional id has its producer id, the id is not in a transaction, or its
transaction does not include the partition) and the producer last wrote
longer ago than the longest allowed transaction timeout. Nothing will ever
finish such a transaction: its last stable offset is stuck and
read_committed consumers stop there.

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
				hanging, err := findHanging(ctx, adm, f, s, maxTimeout, time.Now())
				if err != nil {
					return err
				}
				return g.renderHanging(cmd, hanging, maxTimeout)
			})
		},
	}
	f := c.Flags()
	f.StringVar(&topic, "topic", "", "only this topic (default every topic)")
	f.Int32Var(&partition, "partition", -1, "only this partition of --topic")
	f.Int32Var(&broker, "broker", -1, "only partitions with a replica on this broker id (their leaders are asked)")
	f.DurationVar(&maxTimeout, "max-timeout", config.MaxTransactionTimeout,
		"a transaction its coordinator no longer tracks hangs once its producer last wrote longer ago than this (default the brokers' transaction.max.timeout.ms, else 15m)"+durationFlagHelp)
	c.MarkFlagsMutuallyExclusive("topic", "broker")
	return c
}

// renderHanging prints what txn hanging found, with the command that
// settles each, and returns errFindings when it found any.
func (g *globals) renderHanging(cmd *cobra.Command, hanging []hangingJSON, maxTimeout time.Duration) error {
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
			fmt.Fprintf(cmd.ErrOrStderr(), "no hanging transactions (an untracked one counts once its producer last wrote longer ago than %s)\n", maxTimeout)
		}
		return nil
	}
	if g.output == outputTable {
		for _, h := range hanging {
			fmt.Fprintf(cmd.ErrOrStderr(), "%s-%d at %d: %s\n", h.Topic, h.Partition, h.CurrentTxnStartOffset, h.Settle)
		}
	}
	return errFindings
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

// findHanging looks for hanging transactions on the partitions of s, by
// the runtime's own rule and evidence (txnrepair.FindHanging): open
// transactions (DescribeProducers) whose coordinator will never end them,
// those it no longer tracks counting once open longer than maxTimeout.
// Each is judged with the markers on every partition of the cluster, and
// only those still open after that are reported.
func findHanging(ctx context.Context, adm *kadm.Client, f *txnrepair.Finder, s kadm.TopicsSet, maxTimeout time.Duration, now time.Time) ([]hangingJSON, error) {
	out := []hangingJSON{}
	if len(s) == 0 {
		return out, nil
	}
	producers, err := describeProducers(ctx, adm, s)
	if err != nil {
		return nil, err
	}
	var open []kadm.DescribedProducer
	for _, p := range producers {
		if p.CurrentTxnStartOffset >= 0 {
			open = append(open, p)
		}
	}
	if len(open) == 0 {
		return out, nil
	}
	all, err := clusterProducers(ctx, adm)
	if err != nil {
		return nil, err
	}
	facts := txnrepair.Facts{MaxTimeout: maxTimeout, Now: now, Search: f.NewEvidence(ctx, all).Search}
	found, err := f.FindHanging(ctx, facts, open)
	if err != nil {
		return nil, kafkaErr("ask the transaction coordinators about the open transactions", err)
	}
	if found, err = txnrepair.StillOpen(ctx, adm, found); err != nil {
		return nil, kafkaErr("describe producers again", err)
	}
	for _, hg := range found {
		h := hangingJSON{
			producerJSON:    producerToJSON(hg.DescribedProducer),
			TransactionalID: hg.TxnID,
			AgeMillis:       now.Sub(millis(hg.LastTimestamp)).Milliseconds(),
			Reason:          hg.Reason,
		}
		h.outcome, h.Outcome, h.Evidence = hg.Verdict.Outcome, outcomeText(hg.Verdict), hg.Verdict.Where
		h.Settle = adviceFor(h)
		out = append(out, h)
	}
	return out, nil
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
