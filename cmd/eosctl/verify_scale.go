package main

import (
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/eosflow/eosflow/config"
	"github.com/eosflow/eosflow/tools/chaos"
)

// scaleHelp is the part of verify's help about scale runs.
const scaleHelp = `

--scale 1,6,2 runs waves of worker processes instead of the faults, while
it writes the input at --input-rate (a live stream; the workers run
unpaced, and the run stops writing once the last step is over): it starts
the first count, and once the group holds every input partition
over exactly that step's members and every partition committed again, and
the step ran --scale-dwell more, it starts or SIGTERMs processes (the
newest first; they leave the group as they stop) to reach the next count.
Each step reports how long the group took to assign every partition
(assigned_ms), to commit on every partition again (rebalance_ms), the
longest time one partition's output stood still (longest_pause_ms), the
same for the partitions the step did not move (stayed_pause_ms), and
the longest time no partition committed (group_pause_ms); a step not
settled within --settle-timeout exits 1 (scale_unsettled). --process-workers
N runs N sessions in each process (workers: N), and --group-protocol
consumer has the workers use KIP-848's consumer group protocol. The same
checks of the output apply: use --pipeline count for per-key order.
Batches take the runtime's max_batch_records unless --batch-records is given.`

// scaleFlags are the flags of a scale run; the group protocol is read as
// text and checked by scaleOptions.
type scaleFlags struct{ protocol string }

// addScaleFlags adds the flags of a scale run to verify.
func addScaleFlags(cmd *cobra.Command, o *chaos.Options, sf *scaleFlags) {
	f := cmd.Flags()
	f.IntSliceVar(&o.Scale, "scale", nil, "worker processes per step of a scale run, e.g. 1,6,2: replaces the faults (see above)")
	f.IntVar(&o.ProcessWorkers, "process-workers", 1, "sessions each worker process runs (workers: N), each a group member of its own")
	f.StringVar(&sf.protocol, "group-protocol", string(config.GroupProtocolClassic), "the workers' group_protocol: classic or consumer (KIP-848, Kafka 4.0 or later)")
	f.DurationVar(&o.ScaleDwell, "scale-dwell", 5*time.Second, "how long a settled step of --scale runs before the next"+durationFlagHelp)
	f.IntVar(&o.InputRate, "input-rate", 1000, "records per second --scale writes to the input while its steps run (up to --records); the workers run unpaced")
	f.DurationVar(&o.SettleTimeout, "settle-timeout", 2*time.Minute, "how long a step of --scale may take to settle before the run fails"+durationFlagHelp)
	_ = cmd.RegisterFlagCompletionFunc("group-protocol", cobra.FixedCompletions(
		[]string{string(config.GroupProtocolClassic), string(config.GroupProtocolConsumer)}, cobra.ShellCompDirectiveNoFileComp))
}

// scaleOptions sets o's group protocol and, for a scale run, switches off
// the faults the user left at their defaults: a scale run times
// rebalances of its own.
func scaleOptions(cmd *cobra.Command, o *chaos.Options, sf scaleFlags) {
	o.GroupProtocol = config.GroupProtocol(sf.protocol)
	if len(o.Scale) == 0 {
		return
	}
	f := cmd.Flags()
	for name, v := range map[string]*int{"kills": &o.Kills, "terms": &o.Terms, "broker-restarts": &o.BrokerRestarts, "rebalances": &o.Rebalances} {
		if !f.Changed(name) {
			*v = 0
		}
	}
	if !f.Changed("abort-rate") {
		o.AbortRate = 0
	}
	if !f.Changed("batch-records") {
		o.BatchRecords = 0 // the runtime's max_batch_records
	}
}

// addScaleRows adds a scale run's steps to the result table.
func addScaleRows(t *table, r chaos.Result) {
	if r.ProcessWorkers > 1 || r.GroupProtocol != "" {
		protocol := r.GroupProtocol
		if protocol == "" {
			protocol = string(config.GroupProtocolClassic)
		}
		t.add("group", fmt.Sprintf("%d sessions per process, %s protocol", max(r.ProcessWorkers, 1), protocol))
	}
	if len(r.ScalePlan) == 0 {
		return
	}
	plan := make([]string, len(r.ScalePlan))
	for i, n := range r.ScalePlan {
		plan[i] = fmt.Sprint(n)
	}
	t.add("scale", fmt.Sprintf("%s processes (%d of %d steps began), input written at %d records/s", strings.Join(plan, " → "), len(r.Steps), len(r.ScalePlan), r.InputRate))
	for i, s := range r.Steps {
		t.add(fmt.Sprintf("  step %d", i+1), s.String())
	}
}

// scaleClaim is what a passing scale run proved.
func scaleClaim(r chaos.Result) string {
	return fmt.Sprintf("every record exactly once, in order per key, through %d scale steps, each settled", len(r.Steps))
}
