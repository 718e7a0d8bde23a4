package main

import (
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/eosflow/eosflow/config"
	"github.com/eosflow/eosflow/tools/chaos"
)

// newVerifyCmd runs the sample pipeline as worker processes under injected
// faults and judges the output read_committed; it exits 1 on any lost,
// repeated or reordered record.
func newVerifyCmd(g *globals) *cobra.Command {
	var (
		o         chaos.Options
		guarantee string
		pipeline  string
		stateKind string
		groupBy   string
		verbose   bool
		worker    workerLogin
		pg        pgVerify
		dd        dedupFlags
		sf        scaleFlags
		ex        exploreFlags
	)
	cmd := &cobra.Command{
		Use:   "verify",
		Short: "Prove exactly-once under killed workers, aborted transactions, rebalances and broker restarts",
		Long: `verify seeds --records numbered, keyed records, runs --workers worker processes of a sample
pipeline (--pipeline upper, the default, upper-cases each value) in one consumer group,
and meanwhile:
  - SIGKILLs workers in the middle of transactions (--kills) and restarts them
    under the same instance id, so each fences its zombie; how long each
    restarted worker takes to its first commit is reported
    (restart_to_first_commit: count, median_ms, max_ms),
  - SIGTERMs and restarts workers (--terms),
  - makes batches fail with a processing error that aborts them (--abort-rate);
    the failed worker stops and is restarted, as a supervisor would,
  - adds and removes workers (--rebalances),
  - hard-restarts the broker (--broker-restarts; Apache Kafka only),
  - cuts a broker off the network, from the clients, from its peers or from
    everything, then heals it (--net-cuts), pauses a broker with SIGSTOP past
    the session and transaction timeouts, then resumes it (--pauses), and cuts
    the group's transaction or group coordinator from the clients, then heals
    it (--coordinator-cuts); these need the 3-broker network-namespace
    harness integration/kafka/netcluster.sh (--net-cmd, see below).
A read_committed consumer reads the output during the run and again after
it. The verdict counts missing, duplicated and out-of-order records; any of
them exits 1. So does a worker that stops on its own — for any reason but
the SIGKILL or SIGTERM verify sent it or an injected processing error — even
though verify restarts it so the run completes: a pipeline that stops by
itself needs a human. worker_failures names each with its error.

--pipeline count runs a stateful pipeline instead: it counts each key's
records in a state store (--state memory, the default, or pebble) and emits
the key's new count for every record. The verdict then goes key by key: a
key seeded n times must show exactly 1, 2, … n in order in the output, and
its store's changelog must end at n (8 big-endian bytes). Skipped counts
(count_gaps: lost updates), counts emitted again (count_repeats: double
counts), a last count other than n (count_final_mismatch) and a changelog
that ends elsewhere (changelog_mismatch) each exit 1. Every worker keeps its
stores in its own directory under the log directory, across its restarts
(pebble resumes from the offset its database kept: after a SIGKILL, that of
its last flush, since it runs without a write-ahead log); they are removed
when the run ends.

--group-by value counts through a repartition topic instead of by the input
key (--group-by key, the default): every record is seeded under a key of its
own with the counting key as its value, so each counting key's records are
spread over all input partitions; the workers re-key them by value with
topology.GroupBy into APP-by-value-repartition, inside the batch's
transaction, and count them in a second sub-topology whose tasks are that
topic's partitions. The same key-by-key checks apply, and the run ends only
once the group has committed past every committed record of the repartition
topic too.

--pipeline windowed counts each key's records per 10 s tumbling window of
event time (grace 3 s) and emits each window's count once, when it closes.
Records go to chosen partitions with event-time timestamps, some out of
order within the grace and some late, then one record per partition that
closes every window. The expected final results are computed from the seed
in plain Go; every window must come out exactly once with that count:
window_missing, window_duplicates, window_wrong_count, window_unexpected
and window_unreadable each exit 1 (late_records says how many seeded
records must count nowhere).

--pipeline join joins orders (the input topic) with payments (a second,
co-partitioned one) of the same key at most 5 s apart in event time, with a
grace of a day so no record expires whatever order they are read in. Every
pair computed from the seed must come out exactly once and nothing else:
pair_missing, pair_duplicates and pair_unexpected each exit 1.

--pipeline outer-join outer-joins orders with payments of the same key at
most 5 s apart (topology.OuterJoinStreams, grace 10 s): a record that joined
nothing comes out alone ("o12+none", "none+p7") once stream time has passed
it by twice the window plus the grace, which happens all through the run,
and one record per partition at the end expires the rest. Orders and
payments share the input topic (split by Branch), so each partition's order,
and with it stream time, is the seed's. Besides the pair checks, every
lonely record must come out alone exactly once (lonely_missing,
lonely_duplicates), and nothing else alone: a record that joined
(lonely_joined) or none of the seed (lonely_unexpected); a seed without
lonely records expiring during the run fails (lonely_none).

--pipeline global-join left-joins orders, keyed by order id, with a global
table of customers (topology.GlobalTableFrom and LeftJoinGlobal) by the
customer each order names in its value; the table's topic has one more
partition than the orders', so nothing is co-partitioned. The table is
seeded before the workers start, and while they run the verifier updates
some customers in transactions, two thirds committed and a third aborted.
Each order must come out exactly once ("c7=v12" under its key), joined with
a row its customer committed: the seeded one for customers never updated,
the seeded or a committed update for the others, and "none" for customers
without a row; global_missing, global_duplicates, global_wrong_row,
global_aborted_row (an aborted update's value) and global_unexpected each
exit 1, and so does a run that committed or aborted no update, left no
aborted record in the table's log, or in which no order joined an updated
row (global_no_updates). An update whose commit failed is settled by
reading the table after the run (global_unsettled when it cannot be).
After the last fault the verifier stops updating the table, reads it, and
produces late orders (probes): one per updated customer in every input
partition. Each must join its customer's last committed row: a wave in
which some joined an older row is followed by another, and one produced
--table-lag after the table's last update became readable (default the
runtime's bound for the workers' settings, 30s) must come out current, or
the run fails with global_stale. --table-snapshot is its negative control:
the workers join a copy of the table read once at their start.

Without --brokers it starts an embedded broker ('eosctl dev broker') as a
child process and never restarts it: that broker does not replay
transactions faithfully across a hard restart (it can hide committed
records and expose records never committed), so a verdict through its
restarts would prove nothing either way, and --broker-restarts is refused
there. Restart evidence comes from Apache Kafka: with --brokers (or
EOS_BROKERS) verify runs against that cluster and hard-restarts it
--broker-restarts times (default 1) with --broker-restart-cmd, e.g.
integration/kafka/kafka.sh start, then
  eosctl verify --brokers $(integration/kafka/kafka.sh bootstrap) --broker-restarts 2 \
      --broker-restart-cmd "integration/kafka/kafka.sh restart --hard"

Network faults run through integration/kafka/netcluster.sh, which runs
each broker in a network namespace of its own (as root):
  EOS_KAFKA_PORT=29800 integration/kafka/netcluster.sh start
  eosctl verify --brokers $(EOS_KAFKA_PORT=29800 integration/kafka/netcluster.sh bootstrap) \
      --net-cmd "EOS_KAFKA_PORT=29800 $PWD/integration/kafka/netcluster.sh" \
      --net-cuts 3 --pauses 3 --coordinator-cuts 2 --kills 5 --broker-restarts 0
(EOS_KAFKA_NETCLUSTER_CMD may stand for --net-cmd; --broker-restarts,
1 by default against --brokers, needs --broker-restart-cmd or 0.) A cut holds --cut-for (default 12s) and a pause --pause-for
(default 5s past the longer of --session-timeout and the workers'
transaction timeout). Each fault must show in the harness's status when made
and again just before it is undone, and its broker without faults after;
one that does not fails the run (net_fault_failed). net_faults lists each
with that status line, the input records the group committed while it
held, and recovery_ms, the time from the heal or resume to the group's next
committed progress; recovery sums them up per action. Under --sink, the
progress is the table's rows.

Workers pace themselves (--rate) so that faults land
mid-batch; by default the pace leaves about two seconds of work between
faults.

Negative controls: the same chaos under --guarantee at-least-once must report
duplicates, and under at-most-once missing records — a verifier that cannot
fail proves nothing. At-most-once may lose records but never repeat one: a
duplicate under it is reported as its own failure, at_most_once_repeated.
Under at-least-once the count pipeline must fail the count checks, the
windowed pipeline the window checks, and the joins the pair (and lonely)
checks.
With -o json, "failed" names every check the run failed.

--sink postgres verifies the exactly-once Postgres sink (package pgsink)
instead of a pipeline: workers write one row per record into a table of
the database at --postgres-url under the same faults, plus database
restarts (--postgres-restarts, --postgres-restart-cmd) and the network
faults (the coordinator cuts cut the group's coordinator: the sink commits
no Kafka transaction); a missing record, a duplicate row or a network fault
that did not take exits 1. --sink postgres-at-least-once is its control
and must fail with duplicates.

--sink redis-dedup verifies the article's dedup-store pattern for a side
effect outside Kafka: the workers run topology.Dedup with a redisdedup.Store
on the Redis at --redis-url, and the effect adds 1 to the record's
seeded id in a Redis hash (HINCRBY), then upper-case the record to the
output as --pipeline upper does. Under the same faults, injected aborts
included (an aborted batch is processed again, its effects already done),
the hash must show, per seeded id, how often its effect ran. A store cannot
make the effect exactly-once; the bound of what each mode risks is the
run's SIGKILLs, because a worker finishes a record's effect and mark before
its next record, so each killed worker stands between the two for at most
one record:
  --dedup-mode after (topology.MarkAfter, the default; on Redis, a Leaser,
    it claims the id under a lease as before does) passes only with no
    missing effect (effects_missing 0) and at most one repeated run per
    SIGKILL (effects_extra_runs <= effects_bound),
  --dedup-mode before (topology.MarkBefore) holds the mark pending under a
    lease (redisdedup.Store is a Leaser) that another worker takes over once a
    killed worker's lease expired: it passes only with no missing effect
    and at most one repeated run per SIGKILL.
The output is judged as --pipeline upper's, exactly once. --sink
redis-dedup-none (or --dedup-mode none) is the control: the same effect
with no Dedup node, judged as mark-after; it must fail with effects
repeated far beyond the kills, since every aborted batch repeats its
effects.` + scaleHelp,
		Example: `  eosctl verify --records 20000 --workers 2 --kills 3
  eosctl verify --guarantee at-least-once          # must fail with duplicates
  eosctl verify --guarantee at-most-once           # must fail with missing records, and no duplicate
  eosctl verify --pipeline count --state pebble --records 5000 --kills 3
  eosctl verify --pipeline count --guarantee at-least-once   # must fail with repeated or lost counts
  eosctl verify --pipeline count --group-by value --state pebble --records 5000 --kills 3
  eosctl verify --pipeline windowed --state pebble --records 3000 --keys 50 --kills 3
  eosctl verify --pipeline windowed --guarantee at-least-once --records 3000 --keys 50   # must fail with repeated window results
  eosctl verify --pipeline join --records 3000 --keys 50 --kills 3
  eosctl verify --pipeline outer-join --records 3000 --keys 50 --kills 3
  eosctl verify --pipeline outer-join --guarantee at-least-once --records 3000 --keys 50   # must fail with repeated pairs or lonely records
  eosctl verify --pipeline global-join --records 3000 --keys 50 --kills 3
  eosctl verify --pipeline global-join --guarantee at-least-once --records 3000 --keys 50   # must fail with repeated orders
  eosctl verify --pipeline global-join --table-snapshot --table-lag 1s --records 2000 --keys 50 --kills 0 --terms 0 --rebalances 1 --abort-rate 0   # must fail with global_stale
  eosctl verify --sink redis-dedup --redis-url redis://127.0.0.1:16379/0 --records 10000 --kills 3
  eosctl verify --sink redis-dedup --dedup-mode before --records 10000 --kills 3
  eosctl verify --sink redis-dedup-none --records 10000 --kills 3   # must fail with repeated effects
  eosctl verify --brokers 127.0.0.1:9092 --pipeline count --partitions 24 --scale 1,6,2 --process-workers 2 --group-protocol consumer
  eosctl verify --sink postgres --postgres-url postgres://postgres@127.0.0.1:15432/eosflow --records 20000
  eosctl verify --brokers 127.0.0.1:9092 --records 1000000 --kills 30 \
      --broker-restarts 5 --broker-restart-cmd "integration/kafka/kafka.sh restart --hard" -o json
  eosctl verify --brokers $(integration/kafka/netcluster.sh bootstrap) --net-cmd "$PWD/integration/kafka/netcluster.sh" \
      --records 50000 --kills 5 --net-cuts 3 --pauses 3 --coordinator-cuts 2 --broker-restarts 0`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if ex.on {
				pls, err := explorePipelines(pipeline, stateKind, pg.sink, pg.url, cmd.Flags().Changed("pipeline"))
				if err != nil {
					return err
				}
				ex.seed, ex.postgres = o.Seed, pg.url
				if cmd.Flags().Changed("records") {
					ex.records = o.Records
				}
				return runExplore(cmd.Context(), cmd.OutOrStdout(), ex, pls)
			}
			if err := brokerRestartsDefault(cmd, g, &o); err != nil {
				return err
			}
			if pg.sink != "" && !isDedupSink(pg.sink) {
				return verifySink(cmd, g, o, pg, verbose)
			}
			o.Guarantee = config.Guarantee(guarantee)
			o.Pipeline, o.State, o.GroupBy = chaos.PipelineKind(pipeline), chaos.StateKind(stateKind), chaos.Grouping(groupBy)
			scaleOptions(cmd, &o, sf)
			if err := dedupOptions(&o, pg.sink, pipeline, dd); err != nil {
				return err
			}
			exe, err := os.Executable()
			if err != nil {
				return fmt.Errorf("cannot find the eosctl binary to start workers from: %w", err)
			}
			o.Exe = exe
			cfg, err := g.externalCluster()
			if err != nil {
				return err
			}
			if cfg != nil {
				o.Brokers, o.Base = cfg.Brokers, *cfg
				if o.WorkerArgs, o.WorkerEnv, err = g.workerFlags(*cfg, worker); err != nil {
					return err
				}
			} else {
				if worker.user != "" {
					return usageErrorf("--worker-sasl-user needs --brokers: the embedded broker has no users")
				}
				o.Base = config.Default()
				if o.BrokerRestartCmd != "" {
					return usageErrorf("--broker-restart-cmd needs --brokers; the embedded broker is restarted by verify itself")
				}
			}
			if err := o.Validate(); err != nil {
				return usageError{err}
			}
			errw := cmd.ErrOrStderr()
			bar := newProgressBar(errw)
			if bar != nil {
				o.Progress = bar.update
			}
			if verbose {
				o.Events = func(line string) {
					bar.clear()
					fmt.Fprintln(errw, "verify:", line)
				}
			}
			ctx, stop := untilSignal(cmd)
			defer stop()
			res, err := chaos.Run(ctx, o)
			bar.clear()
			if err != nil {
				if res.LogDir != "" {
					fmt.Fprintf(errw, "worker and broker logs: %s\n", res.LogDir)
				}
				return err
			}
			if err := g.render(cmd.OutOrStdout(), res, verifyTable(res)); err != nil {
				return err
			}
			if !res.Pass && res.LogDir != "" {
				fmt.Fprintf(errw, "worker and broker logs kept in %s\n", res.LogDir)
			}
			claim := fmt.Sprintf("every record exactly once, in order per key, through %d faults", res.FaultsPlanned)
			if res.Counts != nil {
				claim = fmt.Sprintf("every key counted 1, 2, … n exactly once, in order, its changelog ending at n, through %d faults", res.FaultsPlanned)
			}
			if c := eventClaim(res); c != "" {
				claim = c
			}
			if res.DedupVerdict != nil {
				claim = dedupClaim(res)
			}
			if len(res.Steps) > 0 {
				claim = scaleClaim(res)
			}
			return g.verdict(cmd.OutOrStdout(), res.Pass, claim,
				strings.Join(res.Problems, "; "))
		},
	}
	workloadFlags(cmd, &o.Records, &o.Partitions, &o.Keys)
	addScaleFlags(cmd, &o, &sf)
	addExploreFlags(cmd, &ex)
	f := cmd.Flags()
	f.IntVar(&o.Workers, "workers", 3, "worker processes in the group at the start")
	f.StringVar(&pg.sink, "sink", "", "verify a sink outside Kafka instead of a pipeline: postgres (the exactly-once sink, package pgsink), postgres-at-least-once (its control: Kafka offsets committed after the database commit; must fail with duplicates), redis-dedup (an effect in Redis behind a dedup store; see --dedup-mode) or redis-dedup-none (its control with no store; must fail with repeated effects)")
	f.StringVar(&dd.mode, "dedup-mode", "", "with --sink redis-dedup: when ids are marked: after (topology.MarkAfter, the default; may repeat one effect per SIGKILL), before (topology.MarkBefore with a lease; may also repeat one per SIGKILL, loses none) or none (the control)")
	f.StringVar(&dd.url, "redis-url", os.Getenv(chaos.EnvRedisURL), "Redis of --sink redis-dedup, its store and effects (default "+chaos.EnvRedisURL+")")
	f.StringVar(&pg.url, "postgres-url", os.Getenv("EOS_POSTGRES_URL"), "database of --sink (default EOS_POSTGRES_URL)")
	f.IntVar(&pg.pgRestarts, "postgres-restarts", 0, "with --sink: hard restarts of the database")
	f.StringVar(&pg.restartCmd, "postgres-restart-cmd", "", "with --postgres-restarts: shell command that hard-restarts the database and returns once it serves again")
	f.IntVar(&o.Kills, "kills", 5, "SIGKILLs of a worker mid-transaction, each followed by a restart")
	f.IntVar(&o.Terms, "terms", 2, "SIGTERMs of a worker, each followed by a restart")
	f.IntVar(&o.BrokerRestarts, "broker-restarts", 0, "hard restarts of the --brokers cluster through --broker-restart-cmd (default 1 with --brokers; the embedded broker allows none)")
	f.IntVar(&o.Rebalances, "rebalances", 2, "workers added and removed, in turn")
	f.Float64Var(&o.AbortRate, "abort-rate", 0.02, "probability per batch of a processing error that aborts it and stops the worker")
	f.StringVar(&o.BrokerRestartCmd, "broker-restart-cmd", "", "shell command that hard-restarts the --brokers cluster and returns once it serves again")
	f.StringVar(&o.NetClusterCmd, "net-cmd", os.Getenv(chaos.EnvNetClusterCmd), "the network-namespace harness running the --brokers cluster, e.g. \"EOS_KAFKA_PORT=29800 $PWD/integration/kafka/netcluster.sh\"; needed by --net-cuts, --pauses and --coordinator-cuts (default "+chaos.EnvNetClusterCmd+")")
	f.IntVar(&o.NetCuts, "net-cuts", 0, "with --net-cmd: times a broker is cut from the clients, from its peers or from everything, in turn, for --cut-for, then healed")
	f.IntVar(&o.Pauses, "pauses", 0, "with --net-cmd: times a broker is paused (SIGSTOP) for --pause-for, then resumed")
	f.IntVar(&o.CoordinatorCuts, "coordinator-cuts", 0, "with --net-cmd: times the group's transaction or group coordinator, in turn, is cut from the clients for --cut-for, then healed")
	f.DurationVar(&o.CutFor, "cut-for", 12*time.Second, "how long a network or coordinator cut holds before it is healed"+durationFlagHelp)
	f.DurationVar(&o.PauseFor, "pause-for", 0, "how long a paused broker stays stopped; 0 is 5s past the longer of --session-timeout and the workers' transaction timeout"+durationFlagHelp)
	f.IntVar(&o.Rate, "rate", 0, "records per second per worker; 0 leaves about 2s of work between faults")
	f.DurationVar(&o.CommitDelay, "commit-delay", 20*time.Millisecond, "pause before each batch commits, its outputs produced"+durationFlagHelp)
	f.IntVar(&o.BatchRecords, "batch-records", 500, "most records in one batch (transaction)")
	f.DurationVar(&o.SessionTimeout, "session-timeout", 6*time.Second, "workers' group session timeout: how long a killed worker holds its partitions"+durationFlagHelp)
	f.DurationVar(&o.Duration, "duration", 15*time.Minute, "limit for the whole run; a run still going then fails"+durationFlagHelp)
	f.DurationVar(&o.DrainTimeout, "drain-timeout", 2*time.Minute, "limit for each read of the output (and changelog) after the workers stop; past it the run fails naming the topic and the positions reached against those wanted"+durationFlagHelp)
	f.Uint64Var(&o.Seed, "seed", 0, "seed of the fault plan, to repeat a run; 0 picks one (printed in the result)")
	f.StringVar(&guarantee, "guarantee", string(config.ExactlyOnce), "delivery guarantee of the workers: exactly-once, idempotent, at-least-once, at-most-once")
	f.StringVar(&pipeline, "pipeline", string(chaos.PipelineUpper), "sample pipeline of the workers: upper (stateless, judged per record), count (counts per key in a state store, judged per key), windowed (final counts per key and event-time window, judged per window) join (two streams joined within a window, judged per pair) outer-join (the same outer-joined, lonely records emitted as they expire, judged per pair and per lonely record) or global-join (orders left-joined with a global table updated while the workers run, judged per order); with --explore also timers (a stream-time and a wall-clock timer per task, judged per firing)")
	f.StringVar(&stateKind, "state", "", "store engine of --pipeline count, windowed, join, outer-join and global-join: memory (default) or pebble")
	f.StringVar(&groupBy, "group-by", "", "what --pipeline count counts by: key (default, the input key) or value (through a repartition topic)")
	f.DurationVar(&o.TableLag, "table-lag", 0, "with --pipeline global-join: how long after the table's last update became readable a late order may still join an older row (default the runtime's bound for the workers' settings, max(connect_timeout, the stall bound): 30s)"+durationFlagHelp)
	f.BoolVar(&o.TableSnapshot, "table-snapshot", false, "with --pipeline global-join: the workers join a copy of the table read once at their start, never kept current; the control of the probe phase, which must fail with global_stale")
	f.BoolVar(&o.KeepTopics, "keep-topics", false, "keep the topics and the consumer group on the cluster afterwards")
	f.StringVar(&o.LogDir, "log-dir", "", "directory for the workers' and broker's logs; default a temporary one, kept only when the run fails")
	f.BoolVarP(&verbose, "verbose", "v", false, "print each injected fault and event to stderr")
	f.StringVar(&worker.user, "worker-sasl-user", "", "SASL user the workers run as, in place of verify's own (which must create and delete topics): e.g. one holding only prefixed grants on eosverify-; its password in env "+envWorkerPassword)
	_ = cmd.RegisterFlagCompletionFunc("guarantee", cobra.FixedCompletions(
		[]string{string(config.ExactlyOnce), string(config.Idempotent), string(config.AtLeastOnce), string(config.AtMostOnce)},
		cobra.ShellCompDirectiveNoFileComp))
	_ = cmd.RegisterFlagCompletionFunc("pipeline", cobra.FixedCompletions(
		[]string{string(chaos.PipelineUpper), string(chaos.PipelineCount), string(chaos.PipelineWindowed), string(chaos.PipelineJoin), string(chaos.PipelineOuterJoin), string(chaos.PipelineGlobalJoin)},
		cobra.ShellCompDirectiveNoFileComp))
	_ = cmd.RegisterFlagCompletionFunc("dedup-mode", cobra.FixedCompletions(
		[]string{string(chaos.DedupAfter), string(chaos.DedupBefore), string(chaos.DedupNone)}, cobra.ShellCompDirectiveNoFileComp))
	_ = cmd.RegisterFlagCompletionFunc("state", cobra.FixedCompletions(
		[]string{string(chaos.StateMemory), string(chaos.StatePebble)}, cobra.ShellCompDirectiveNoFileComp))
	_ = cmd.RegisterFlagCompletionFunc("group-by", cobra.FixedCompletions(
		[]string{string(chaos.GroupingKey), string(chaos.GroupingValue)}, cobra.ShellCompDirectiveNoFileComp))
	_ = cmd.MarkFlagDirname("log-dir")
	cmd.AddCommand(newVerifyWorkerCmd(g))
	cmd.AddCommand(newVerifyPgWorkerCmd(g))
	return cmd
}

// brokerRestartsDefault gives --broker-restarts its default, 1 against
// --brokers (or EOS_BROKERS) and 0 on the embedded broker, and refuses
// restarts of the embedded broker: they are no evidence (see
// chaos.ErrEmbeddedRestarts).
func brokerRestartsDefault(cmd *cobra.Command, g *globals, o *chaos.Options) error {
	external := g.brokersSet || os.Getenv("EOS_BROKERS") != ""
	switch {
	case external && !cmd.Flags().Changed("broker-restarts"):
		o.BrokerRestarts = 1
	case !external && o.BrokerRestarts > 0:
		return usageError{chaos.ErrEmbeddedRestarts}
	}
	return nil
}

// verifyTable is the human rendering of a verify result.
func verifyTable(r chaos.Result) *table {
	t := newTable("field", "value")
	t.add("broker", r.Broker)
	t.add("guarantee", r.Guarantee)
	if r.Counts != nil || r.WindowVerdict != nil || r.JoinVerdict != nil {
		p := fmt.Sprintf("%s (%s state)", r.Pipeline, r.State)
		if r.GroupBy == string(chaos.GroupingValue) {
			p = fmt.Sprintf("%s (%s state, by value through %s)", r.Pipeline, r.State, r.Repartition)
		}
		t.add("pipeline", p)
	}
	t.add("topics", verifyTopics(r))
	t.add("records in", r.RecordsIn)
	t.add("records out", r.RecordsOut)
	if r.WindowVerdict != nil || r.JoinVerdict != nil {
		addEventRows(t, r)
	} else if c := r.Counts; c != nil {
		t.add("keys", c.CountKeys)
		t.add("count gaps", fmt.Sprintf("%d (counts skipped: lost updates)", c.CountGaps))
		t.add("count repeats", fmt.Sprintf("%d (counts emitted again: double counts)", c.CountRepeats))
		t.add("count final mismatch", fmt.Sprintf("%d (keys whose last count is not their input count)", c.CountFinalMismatch))
		t.add("changelog mismatch", fmt.Sprintf("%d (keys whose changelog %s ends elsewhere; %d records read)", c.ChangelogMismatch, r.Changelog, c.ChangelogRead))
		t.add("unreadable", r.Unknown)
		for _, e := range c.Examples {
			t.add("count example", e)
		}
	} else {
		t.add("missing", r.Missing)
		t.add("duplicates", r.Duplicates)
		t.add("out of order", r.OutOfOrder)
		if r.DedupVerdict != nil {
			addDedupRows(t, r)
		}
	}
	t.add("live read_committed reads", fmt.Sprintf("%d (%d duplicates)", r.LiveRead, r.LiveDuplicates))
	t.add("workers", fmt.Sprintf("%d (+%d added, -%d removed, %d starts)", r.Workers, r.WorkersAdded, r.WorkersRemoved, r.WorkerStarts))
	t.add("worker kills", r.WorkerKills)
	t.add("restart → first commit", r.RestartToFirstCommit.String())
	t.add("worker terms", r.WorkerTerms)
	t.add("broker restarts", r.BrokerRestarts)
	addNetRows(t, r)
	if r.WedgeRestarts > 0 {
		t.add("wedge restarts", fmt.Sprintf("%d (added to end a coordinator that served the group nothing)", r.WedgeRestarts))
	}
	t.add("injected aborts", r.InjectedAborts)
	t.add("worker failures", fmt.Sprintf("%d (stopped on their own, not by an injected fault)", r.WorkerCrashes))
	for _, f := range r.WorkerFailures {
		t.add("  "+f.Worker, fmt.Sprintf("pid %d at %.1fs: %s", f.Pid, f.AtSeconds, f.Error))
	}
	t.add("aborted transactions", fmt.Sprintf("%d (reported by workers that exited on their own)", r.AbortedTransactions))
	if r.AbortedRecords >= 0 {
		t.add("aborted records", fmt.Sprintf("%d (in the log, hidden from read_committed)", r.AbortedRecords))
	}
	addScaleRows(t, r)
	t.add("faults", fmt.Sprintf("%d planned, %d not injected", r.FaultsPlanned, r.FaultsNotInjected))
	t.add("rate", fmt.Sprintf("%d records/s per worker", r.Rate))
	t.add("seed", r.Seed)
	t.add("seconds", fmt.Sprintf("%.1f", r.Seconds))
	return t
}

// envWorkerPassword holds the password of --worker-sasl-user, kept out of
// flags because ps shows them.
const envWorkerPassword = "EOS_WORKER_SASL_PASSWORD"

// workerLogin is who the workers authenticate as when it is not verify's
// own user: a least-privilege principal, so a run proves the pipeline
// needs no more than the grants it holds.
type workerLogin struct{ user string }

// workerFlags passes the connection flags on to the workers; the SASL
// password goes through the environment, which ps does not show. With
// w.user set the workers log in as that user instead.
func (g *globals) workerFlags(cfg config.Config, w workerLogin) (args, env []string, err error) {
	if w.user != "" {
		pw := os.Getenv(envWorkerPassword)
		switch {
		case cfg.SASL.Mechanism == "":
			return nil, nil, usageErrorf("--worker-sasl-user needs a SASL mechanism (--sasl-mechanism or EOS_SASL_MECHANISM)")
		case pw == "":
			return nil, nil, usageErrorf("--worker-sasl-user %s needs its password in env %s", w.user, envWorkerPassword)
		}
		cfg.SASL.Username, cfg.SASL.Password = w.user, pw
	}
	if g.configFile != "" {
		args = append(args, "--config", g.configFile)
	}
	if cfg.TLS.Enabled {
		args = append(args, "--tls")
	}
	for _, kv := range [][2]string{
		{"--tls-ca", cfg.TLS.CAFile}, {"--tls-cert", cfg.TLS.CertFile}, {"--tls-key", cfg.TLS.KeyFile},
		{"--sasl-mechanism", cfg.SASL.Mechanism}, {"--sasl-user", cfg.SASL.Username},
	} {
		if kv[1] != "" {
			args = append(args, kv[0], kv[1])
		}
	}
	if cfg.TLS.InsecureSkipVerify {
		args = append(args, "--tls-insecure")
	}
	if cfg.SASL.Password != "" {
		// Last in the environment, so it wins over an inherited
		// EOS_SASL_PASSWORD of verify's own user.
		env = append(env, "EOS_SASL_PASSWORD="+cfg.SASL.Password)
	}
	return args, env, nil
}

// progressBar draws one line on a terminal; it is nil elsewhere, and its
// methods do nothing on nil.
type progressBar struct {
	w    io.Writer
	last time.Time
	drew bool
}

// newProgressBar returns a bar drawing on w when w is a terminal, or nil.
func newProgressBar(w io.Writer) *progressBar {
	f, ok := w.(*os.File)
	if !ok {
		return nil
	}
	st, err := f.Stat()
	if err != nil || st.Mode()&os.ModeCharDevice == 0 {
		return nil
	}
	return &progressBar{w: w}
}

// update redraws the bar at most four times a second.
func (b *progressBar) update(p chaos.Progress) {
	if b == nil || time.Since(b.last) < 250*time.Millisecond {
		return
	}
	b.last = time.Now()
	const width = 30
	frac := 0.0
	if p.Records > 0 {
		frac = min(float64(p.Consumed)/float64(p.Records), 1)
	}
	n := int(frac * width)
	fmt.Fprintf(b.w, "\r\033[K[%s%s] %3.0f%% %d/%d consumed, %d read, faults %d/%d, kills %d, broker restarts %d, %s",
		strings.Repeat("#", n), strings.Repeat(".", width-n), 100*frac, p.Consumed, p.Records, p.LiveRead,
		p.Faults, p.FaultsPlanned, p.Kills, p.BrokerRestarts, p.Elapsed.Round(time.Second))
	b.drew = true
}

// clear erases the bar so other output starts on a clean line.
func (b *progressBar) clear() {
	if b == nil || !b.drew {
		return
	}
	fmt.Fprint(b.w, "\r\033[K")
	b.drew = false
}
