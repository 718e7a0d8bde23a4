package main

import (
	"context"
	"regexp"
	"sort"
	"time"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
)

// txnJSON is one transactional id in list and describe output.
type txnJSON struct {
	TransactionalID string             `json:"transactional_id"`
	Coordinator     int32              `json:"coordinator"`
	ProducerID      int64              `json:"producer_id"`
	ProducerEpoch   int16              `json:"producer_epoch"`
	State           string             `json:"state"`
	TimeoutMillis   int32              `json:"timeout_ms"`
	StartTime       *time.Time         `json:"start_time,omitempty"`
	AgeMillis       int64              `json:"age_ms"`
	Partitions      map[string][]int32 `json:"partitions,omitempty"`
}

// newTxnListCmd lists transactional ids the coordinators know.
func newTxnListCmd(g *globals) *cobra.Command {
	var (
		states    []string
		pids      []int64
		pattern   string
		olderThan time.Duration
	)
	c := &cobra.Command{
		Use:   "list",
		Short: "List transactional ids with their coordinator, producer, state and age",
		Long: `List transactional ids with their coordinator, producer id and epoch, state,
and the age of the open transaction (ListTransactions + DescribeTransactions).`,
		Example: "  eosctl txn list --state Ongoing --older-than 1m\n  eosctl txn list --pattern '^orders:'",
		Args:    usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			states, err := canonicalStates(states)
			if err != nil {
				return err
			}
			var re *regexp.Regexp
			if pattern != "" {
				if re, err = regexp.Compile(pattern); err != nil {
					return usageErrorf("--pattern %q is not a regular expression: %v", pattern, err)
				}
			}
			if olderThan < 0 {
				return usageErrorf("--older-than must not be negative, got %s", olderThan)
			}
			return g.withAdmin(cmd, func(ctx context.Context, adm *kadm.Client) error {

				listed, err := adm.ListTransactionsByTxPattern(ctx, pids, states, pattern)
				if err != nil {
					return kafkaErr("list transactions", err)
				}
				var ids []string
				for id := range listed {
					// Brokers before ListTransactions v2 ignore the
					// pattern, so filter here as well.
					if re == nil || re.MatchString(id) {
						ids = append(ids, id)
					}
				}
				described, err := describeTxns(ctx, adm, ids)
				if err != nil {
					return err
				}
				now := time.Now()
				var out []txnJSON
				for _, id := range ids {
					l := listed[id]
					j := txnJSON{TransactionalID: id, Coordinator: l.Coordinator, ProducerID: l.ProducerID, State: l.State, AgeMillis: -1}
					if d, ok := described[id]; ok {
						j = describedJSON(d, now)
					}
					if olderThan > 0 && (j.AgeMillis < 0 || time.Duration(j.AgeMillis)*time.Millisecond < olderThan) {
						continue
					}
					out = append(out, j)
				}
				sort.Slice(out, func(i, k int) bool { return out[i].TransactionalID < out[k].TransactionalID })
				t := newTable("TRANSACTIONAL ID", "COORDINATOR", "PRODUCER ID", "EPOCH", "STATE", "AGE")
				for _, j := range out {
					t.add(j.TransactionalID, j.Coordinator, j.ProducerID, j.ProducerEpoch, j.State, fmtAge(ageOf(j)))
				}
				if out == nil {
					out = []txnJSON{}
				}
				return g.render(cmd.OutOrStdout(), out, t)
			})
		},
	}
	f := c.Flags()
	f.StringSliceVar(&states, "state", nil, "only these states (repeatable): Empty, Ongoing, PrepareCommit, PrepareAbort, CompleteCommit, CompleteAbort, Dead, PrepareEpochFence")
	f.Int64SliceVar(&pids, "producer-id", nil, "only these producer ids (repeatable)")
	f.StringVar(&pattern, "pattern", "", "only transactional ids matching this regular expression")
	f.DurationVar(&olderThan, "older-than", 0, "only transactions open for at least this long"+durationFlagHelp)
	_ = c.RegisterFlagCompletionFunc("state", cobra.FixedCompletions(txnStates, cobra.ShellCompDirectiveNoFileComp))
	return c
}

// ageOf is the open transaction's age, or -1 when none is open.
func ageOf(j txnJSON) time.Duration {
	if j.AgeMillis < 0 {
		return -1
	}
	return time.Duration(j.AgeMillis) * time.Millisecond
}
