package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"github.com/eosflow/eosflow/tools/chaos"
)

func TestVerifyScaleUsageErrors(t *testing.T) {
	t.Setenv("EOS_BROKERS", "")
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"scale with kills asked for", []string{"verify", "--scale", "1,3", "--kills", "2"}, "drop --kills"},
		{"a step of no process", []string{"verify", "--scale", "1,0"}, "at least 1"},
		{"unknown group protocol", []string{"verify", "--group-protocol", "eager"}, "--group-protocol"},
		{"scale with a pace", []string{"verify", "--scale", "2", "--rate", "10"}, "drop --rate"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			if code := run(context.Background(), tc.args, nil, &out, &errb); code != exitUsage {
				t.Fatalf("exit %d, want %d; stderr %s", code, exitUsage, errb.String())
			}
			if !strings.Contains(errb.String(), tc.want) {
				t.Fatalf("stderr %q does not mention %q", errb.String(), tc.want)
			}
		})
	}
}

// --scale switches off the faults left at their defaults, and only those.
func TestScaleOptionsDropDefaultFaults(t *testing.T) {
	var o chaos.Options
	var sf scaleFlags
	cmd := &cobra.Command{}
	f := cmd.Flags()
	f.IntVar(&o.Kills, "kills", 5, "")
	f.IntVar(&o.Terms, "terms", 2, "")
	f.IntVar(&o.BrokerRestarts, "broker-restarts", 1, "")
	f.IntVar(&o.Rebalances, "rebalances", 2, "")
	f.Float64Var(&o.AbortRate, "abort-rate", 0.02, "")
	f.IntVar(&o.BatchRecords, "batch-records", 500, "")
	addScaleFlags(cmd, &o, &sf)
	if err := f.Parse([]string{"--scale", "1,6,2", "--terms", "1", "--group-protocol", "consumer"}); err != nil {
		t.Fatal(err)
	}
	scaleOptions(cmd, &o, sf)
	if o.Kills != 0 || o.BrokerRestarts != 0 || o.Rebalances != 0 || o.AbortRate != 0 || o.BatchRecords != 0 || o.Terms != 1 {
		t.Fatalf("options %+v: want the default faults off and --terms 1 kept", o)
	}
	if len(o.Scale) != 3 || o.GroupProtocol != "consumer" || o.InputRate != 1000 || o.ProcessWorkers != 1 {
		t.Fatalf("options %+v", o)
	}
}

func TestVerifyTableScale(t *testing.T) {
	r := chaos.Result{
		AbortedRecords: -1, ProcessWorkers: 2, GroupProtocol: "consumer", ScalePlan: []int{1, 6, 2}, InputRate: 1000,
		Steps: []chaos.ScaleStep{
			{Processes: 1, Members: 2, Assigned: time.Second, Rebalance: 3 * time.Second, Partitions: 24, Committing: 24, Settled: true},
			{Processes: 6, Members: 12, Problem: "after 2m0s still waiting for 3 of 24 partitions to commit again"},
		},
	}
	var b bytes.Buffer
	if err := verifyTable(r).write(&b); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"2 sessions per process, consumer protocol", "1 → 6 → 2 processes (2 of 3 steps began)", "committing 3s",
		"not settled: after 2m0s still waiting"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, b.String())
		}
	}
}
