package main

import "github.com/spf13/cobra"

// newTxnCommitCmd writes the COMMIT marker that a restarting broker
// skipped for a transaction its coordinator committed.
func newTxnCommitCmd(g *globals) *cobra.Command {
	var s settleFlags
	c := &cobra.Command{
		Use:   "commit --topic T --partition N --start-offset O [--yes]",
		Short: "Complete a hanging transaction that committed by writing its COMMIT marker",
		Long: `Commit the open transaction that starts at --start-offset on one partition,
by writing the COMMIT marker its coordinator decided but never wrote there
(a restarting broker can skip a partition's marker). Its records on the
partition become visible, as they are on the transaction's other partitions.

It writes the marker only when the evidence proves the commit: the
coordinator one epoch on, its log (__transaction_state), or a COMMIT marker
it wrote on another partition of the transaction. Nothing overrides that:
committing on a guess could expose records that were never committed.

Prints what it will do and asks for confirmation unless --yes.`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error { return g.settle(cmd, s, true) },
	}
	s.bind(c, false)
	return c
}
