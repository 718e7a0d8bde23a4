package main

import "github.com/spf13/cobra"

// newTxnAbortCmd writes an abort marker for a hanging transaction that
// the evidence proves aborted, or, with --force, one it cannot decide.
func newTxnAbortCmd(g *globals) *cobra.Command {
	var s settleFlags
	c := &cobra.Command{
		Use:   "abort --topic T --partition N --start-offset O [--force] [--yes]",
		Short: "Complete a hanging transaction that aborted by writing its ABORT marker",
		Long: `Abort the open transaction that starts at --start-offset on one partition,
by writing an ABORT marker for its producer (WriteTxnMarkers). The last
stable offset then moves past it and read_committed consumers continue.

It first reads how the transaction's coordinator ended it, with the
evidence the runtime's own repair reads: the coordinator one epoch on, its
log (__transaction_state), or the markers it wrote on the transaction's
other partitions. It aborts only a transaction proven aborted. One proven
committed is refused (complete it with 'eosctl txn commit': aborting it would
drop its records on this partition while the rest of it stays visible), and
so is one no evidence decides; --force aborts either, with a warning.

Prints what it will do and asks for confirmation unless --yes.`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error { return g.settle(cmd, s, false) },
	}
	s.bind(c, true)
	return c
}
