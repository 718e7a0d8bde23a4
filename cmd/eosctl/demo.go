package main

import (
	"fmt"

	"github.com/spf13/cobra"
	"go.uber.org/zap"

	"github.com/eosflow/eosflow/config"
	"github.com/eosflow/eosflow/tools/demo"
)

// newDemoCmd runs the example pipeline under injected failures and prints
// the verdict; it exits 1 if anything is missing or duplicated.
func newDemoCmd(g *globals) *cobra.Command {
	var o demo.Options
	var guarantee string
	var verbose bool
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Run an example pipeline with injected failures and check it was exactly-once",
		Long: "demo seeds numbered records, runs an example topology while injecting processing errors " +
			"that abort transactions, broker-side commit failures, undecodable records (dead-lettered) and " +
			"pipeline restarts, then reads the output read_committed and counts missing and duplicated records.\n\n" +
			"Without --brokers it runs on an embedded broker and needs nothing installed.",
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			o.Guarantee = config.Guarantee(guarantee)
			if !o.Guarantee.Valid() {
				return usageErrorf("--guarantee must be one of %v, got %q", config.Guarantees(), guarantee)
			}
			cfg, err := g.externalCluster()
			if err != nil {
				return err
			}
			if cfg != nil {
				o.Brokers, o.Base = cfg.Brokers, cfg
			}
			if verbose {
				l, _ := zap.NewDevelopment()
				o.Logger = l
			}
			ctx, stop := untilSignal(cmd)
			defer stop()
			res, err := demo.Run(ctx, o)
			if err != nil {
				return err
			}
			t := newTable("field", "value")
			t.add("broker", res.Broker)
			t.add("guarantee", res.Guarantee)
			t.add("records in", res.RecordsIn)
			t.add("records out", res.RecordsOut)
			t.add("dead-lettered", res.DeadLettered)
			t.add("missing", res.Missing)
			t.add("duplicates", res.Duplicates)
			t.add("out of order", res.OutOfOrder)
			t.add("aborted transactions", res.AbortedTransactions)
			t.add("injected errors", res.InjectedErrors)
			t.add("broker faults", res.BrokerFaults)
			t.add("restarts", res.Restarts)
			t.add("seconds", fmt.Sprintf("%.2f", res.Seconds))
			t.add("records/s", fmt.Sprintf("%.0f", res.RecordsPerSec))
			if err := g.render(cmd.OutOrStdout(), res, t); err != nil {
				return err
			}
			return g.verdict(cmd.OutOrStdout(), res.Pass, "every record exactly once", "records were lost or repeated")
		},
	}
	workloadFlags(cmd, &o.Records, &o.Partitions, nil)
	f := cmd.Flags()
	f.IntVar(&o.FailEvery, "fail-every", 0, "inject a processing error (aborting its transaction) on one record in every N; default records/8")
	f.IntVar(&o.PoisonEvry, "poison-every", 0, "make one record in every N undecodable, to be dead-lettered; default records/20")
	f.IntVar(&o.Restarts, "restarts", 2, "graceful pipeline restarts spread over the run")
	f.StringVar(&guarantee, "guarantee", string(config.ExactlyOnce), "delivery guarantee: exactly-once, idempotent, at-least-once, at-most-once")
	f.StringVar(&o.MetricsAddr, "metrics-addr", "", "serve the pipeline's /metrics, /healthz and /readyz on this host:port (e.g. 127.0.0.1:9464), for Prometheus or 'eosctl top'")
	f.BoolVarP(&verbose, "verbose", "v", false, "log the runtime's events to stderr")
	return cmd
}
