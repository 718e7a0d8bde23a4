package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/eosflow/eosflow/config"
)

// What demo, verify and bench share: they run a workload on a cluster of
// their own unless one is named, run until done or interrupted, and judge
// the result.

// externalCluster returns the pipeline config when --brokers or
// EOS_BROKERS names a cluster, and nil when neither does: the command then
// starts an embedded broker rather than trying 127.0.0.1:9092.
func (g *globals) externalCluster() (*config.Config, error) {
	if !g.brokersSet && os.Getenv("EOS_BROKERS") == "" {
		return nil, nil
	}
	cfg, err := g.pipelineConfig()
	if err != nil {
		return nil, err
	}
	return &cfg, nil
}

// untilSignal is cmd's context, cancelled by SIGINT or SIGTERM, so that a
// long run stops cleanly (closing its pipelines and broker) when asked to.
func untilSignal(cmd *cobra.Command) (context.Context, context.CancelFunc) {
	return signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
}

// verdict prints the VERDICT line (unless -o json, whose result says it)
// and returns errFindings when the run failed, so the exit code says so.
func (g *globals) verdict(w io.Writer, pass bool, passWhy, failWhy string) error {
	word, why := "PASS", passWhy
	if !pass {
		word, why = "FAIL", failWhy
	}
	if g.output != outputJSON {
		fmt.Fprintf(w, "VERDICT: %s — %s\n", word, why)
	}
	if !pass {
		return errFindings
	}
	return nil
}

// workloadFlags declares --records, --partitions and, when keys is not
// nil, --keys, with the same defaults in every command that seeds a
// workload.
func workloadFlags(cmd *cobra.Command, records *int, partitions *int32, keys *int) {
	f := cmd.Flags()
	f.IntVar(records, "records", 100_000, "records to seed")
	f.Int32Var(partitions, "partitions", 6, "partitions of the input and output topics")
	if keys != nil {
		f.IntVar(keys, "keys", 1000, "distinct keys the records are spread over")
	}
}
