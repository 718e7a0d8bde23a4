package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
)

// abortJSON reports what txn abort did.
type abortJSON struct {
	Topic            string `json:"topic"`
	Partition        int32  `json:"partition"`
	StartOffset      int64  `json:"start_offset"`
	ProducerID       int64  `json:"producer_id"`
	ProducerEpoch    int16  `json:"producer_epoch"`
	CoordinatorEpoch int32  `json:"coordinator_epoch"`
	Aborted          bool   `json:"aborted"`
	LastStableOffset int64  `json:"last_stable_offset"`
}

// newTxnAbortCmd writes an abort marker for a hanging transaction.
func newTxnAbortCmd(g *globals) *cobra.Command {
	var (
		topic       string
		partition   int32
		startOffset int64
		yes         bool
	)
	c := &cobra.Command{
		Use:   "abort --topic T --partition N --start-offset O [--yes]",
		Short: "Abort a hanging transaction by writing its abort marker",
		Long: `Abort the open transaction that starts at --start-offset on one partition,
by writing an ABORT marker with its producer id and epoch (WriteTxnMarkers).
The last stable offset then moves past it and read_committed consumers
continue. Use it for transactions 'eosctl txn hanging' reports: aborting a
transaction its coordinator still tracks fails that producer's commit.

Prints what it will do and asks for confirmation unless --yes.`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if partition < 0 || startOffset < 0 {
				return usageErrorf("--partition and --start-offset must not be negative")
			}
			return g.withAdmin(cmd, func(ctx context.Context, adm *kadm.Client) error {
				s, producers, err := producersOf(ctx, adm, topic, partition)
				if err != nil {
					return err
				}
				var p *kadm.DescribedProducer
				for i := range producers {
					if producers[i].CurrentTxnStartOffset == startOffset {
						p = &producers[i]
					}
				}
				if p == nil {
					return fmt.Errorf("no open transaction starts at offset %d on %s-%d — list open ones with 'eosctl txn producers --topic %s --partition %d'",
						startOffset, topic, partition, topic, partition)
				}
				res := abortJSON{
					Topic: topic, Partition: partition, StartOffset: startOffset,
					ProducerID: p.ProducerID, ProducerEpoch: p.ProducerEpoch,
					// A transaction that hung before its coordinator ever
					// wrote a marker has coordinator epoch -1; 0 is not above
					// any epoch the partition has seen, as Kafka's tool does.
					CoordinatorEpoch: max(p.CoordinatorEpoch, 0),
				}
				errw := cmd.ErrOrStderr()
				fmt.Fprintf(errw, "will write an ABORT marker to %s-%d for producer id %d epoch %d (coordinator epoch %d), the transaction starting at offset %d\n",
					topic, partition, res.ProducerID, res.ProducerEpoch, res.CoordinatorEpoch, startOffset)
				if why := stillTracked(ctx, adm, *p); why != "" {
					fmt.Fprintf(errw, "warning: %s; aborting it here makes that producer's commit fail — prefer waiting for its transaction timeout\n", why)
				}
				if !yes && !confirm(cmd.InOrStdin(), errw) {
					return &exitError{code: exitFailure, err: fmt.Errorf("not confirmed; nothing was written (pass --yes to skip the question)")}
				}
				rs, err := adm.WriteTxnMarkers(ctx, kadm.TxnMarkers{
					ProducerID: res.ProducerID, ProducerEpoch: res.ProducerEpoch,
					CoordinatorEpoch: res.CoordinatorEpoch, Commit: false, Topics: s,
				})
				if err != nil {
					return kafkaErr("write abort marker", err)
				}
				for _, pr := range rs.SortedPartitions() {
					if pr.Err != nil {
						return kafkaErr(fmt.Sprintf("write abort marker to %s-%d", pr.Topic, pr.Partition), pr.Err)
					}
				}
				res.Aborted = true
				res.LastStableOffset = -1
				if lso, err := adm.ListCommittedOffsets(ctx, topic); err == nil {
					if o, ok := lso.Lookup(topic, partition); ok && o.Err == nil {
						res.LastStableOffset = o.Offset
					}
				}
				t := newTable("TOPIC", "PARTITION", "START OFFSET", "PRODUCER ID", "EPOCH", "ABORTED", "LAST STABLE OFFSET")
				t.add(topic, partition, startOffset, res.ProducerID, res.ProducerEpoch, res.Aborted, res.LastStableOffset)
				return g.render(cmd.OutOrStdout(), res, t)
			})
		},
	}
	f := c.Flags()
	f.StringVar(&topic, "topic", "", "topic of the hanging transaction (required)")
	f.Int32Var(&partition, "partition", -1, "partition of the hanging transaction (required)")
	f.Int64Var(&startOffset, "start-offset", -1, "first offset of the hanging transaction, as 'txn hanging' prints it (required)")
	f.BoolVarP(&yes, "yes", "y", false, "do not ask for confirmation")
	for _, n := range []string{"topic", "partition", "start-offset"} {
		_ = c.MarkFlagRequired(n)
	}
	return c
}

// stillTracked says whether p's coordinator still tracks the transaction
// on its partition (so it is not hanging), or "" if not or unknown.
func stillTracked(ctx context.Context, adm *kadm.Client, p kadm.DescribedProducer) string {
	listed, err := adm.ListTransactions(ctx, []int64{p.ProducerID}, nil)
	if err != nil {
		return ""
	}
	txnIDOf := map[int64]string{}
	for _, l := range listed {
		if l.ProducerID == p.ProducerID {
			txnIDOf[p.ProducerID] = l.TxnID
		}
	}
	id := txnIDOf[p.ProducerID]
	if id == "" {
		return ""
	}
	described, err := describeTxns(ctx, adm, []string{id})
	if err != nil || hangingReason(p, id, described) != "" {
		return ""
	}
	return fmt.Sprintf("the coordinator still tracks this transaction of %q (%s)", id, described[id].State)
}

// confirm asks on w and reads one line from r; only y or yes proceeds, so
// an empty or closed stdin never aborts anything.
func confirm(r io.Reader, w io.Writer) bool {
	fmt.Fprint(w, "proceed? [y/N] ")
	line, _ := bufio.NewReader(r).ReadString('\n')
	switch strings.ToLower(strings.TrimSpace(line)) {
	case "y", "yes":
		return true
	}
	fmt.Fprintln(w)
	return false
}
