package main

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
)

// describedJSON converts a coordinator's description; the age is measured
// from the open transaction's start, and is -1 when none is open.
func describedJSON(d kadm.DescribedTransaction, now time.Time) txnJSON {
	j := txnJSON{
		TransactionalID: d.TxnID,
		Coordinator:     d.Coordinator,
		ProducerID:      d.ProducerID,
		ProducerEpoch:   d.ProducerEpoch,
		State:           d.State,
		TimeoutMillis:   d.TimeoutMillis,
		AgeMillis:       -1,
		Partitions:      topicsJSON(d.Topics),
	}
	if start := millis(d.StartTimestamp); !start.IsZero() {
		j.StartTime = &start
		// Kafka keeps the start of the last transaction after it
		// completes; only an open one has an age worth reporting.
		if coordinatorKnows(d.State) {
			j.AgeMillis = now.Sub(start).Milliseconds()
		}
	}
	return j
}

// newTxnDescribeCmd describes transactional ids in full.
func newTxnDescribeCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "describe TRANSACTIONAL-ID...",
		Short: "Describe transactional ids: producer, state, timeout, start, duration, partitions",
		Args:  usageArgs(cobra.MinimumNArgs(1)),
		RunE: func(cmd *cobra.Command, ids []string) error {
			return g.withAdmin(cmd, func(ctx context.Context, adm *kadm.Client) error {
				described, err := describeTxns(ctx, adm, ids)
				if err != nil {
					return err
				}
				now := time.Now()
				out := []txnJSON{}
				var missing []string
				t := newTable("TRANSACTIONAL ID", "COORDINATOR", "PRODUCER ID", "EPOCH", "STATE", "TIMEOUT", "START", "DURATION", "PARTITIONS")
				for _, id := range ids {
					d, ok := described[id]
					if !ok {
						missing = append(missing, id)
						continue
					}
					j := describedJSON(d, now)
					out = append(out, j)
					start := time.Time{}
					if j.StartTime != nil {
						start = *j.StartTime
					}
					t.add(id, j.Coordinator, j.ProducerID, j.ProducerEpoch, j.State,
						time.Duration(j.TimeoutMillis)*time.Millisecond, fmtTime(start), fmtAge(ageOf(j)), partitionsString(d.Topics))
				}
				if err := g.render(cmd.OutOrStdout(), out, t); err != nil {
					return err
				}
				if len(missing) > 0 {
					return fmt.Errorf("transactional id(s) %q not found — the coordinator does not know them (expired or never used); check with 'eosctl txn list'", missing)
				}
				return nil
			})
		},
	}
}
