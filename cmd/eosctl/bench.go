package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/eosflow/eosflow/config"
	"github.com/eosflow/eosflow/tools/bench"
	"github.com/eosflow/eosflow/tools/dedupsize"
)

// newBenchCmd runs one consume-transform-produce workload through every
// delivery guarantee, a hand-written franz-go loop and Kafka Streams, and
// reports throughput, latency, CPU and memory side by side.
func newBenchCmd(g *globals) *cobra.Command {
	var (
		o         bench.Options
		chart     string
		inProcess bool
		check     bool
		tolerance float64
		maxMemory string
	)
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Compare the delivery guarantees, raw franz-go and Kafka Streams on one workload",
		Long: `bench moves one workload — keyed records whose values are ASCII upper-cased,
keys unchanged — from an input topic to an output topic with each case, on the
same broker, one after the other:

  at-most-once, at-least-once, idempotent, exactly-once   this framework
  exactly-once/adaptive  exactly-once with adaptive_commit: a batch ends once
                         the records at hand are processed (--commit-interval
                         only bounds it)
  exactly-once/metrics   exactly-once serving /metrics, scraped every second;
                         reported as a ratio to exactly-once (goal ≥ 0.97×)
  exactly-once/traced    exactly-once with eos.Tracing, every span exported
                         to a discarding exporter
  exactly-once/dedup-memory   exactly-once with a topology.Dedup node in front
                         whose effect does nothing, ids in dedup.NewMemory():
                         the difference to exactly-once is the operator's cost
  exactly-once/dedup-redis    the same with redisdedup.New (a claim and a completion per id) on
                         --redis-url; runs by default only when it is set
  exactly-once/dedup-bloom    the same with redisdedup.NewBloom sized for the
                         run's ids at 1% (topology.AcceptFalsePositives)
                         Below the table each dedup row is set against
                         exactly-once: records/s ratio, µs and CPU µs per
                         record added
  raw-franz-go    a hand-written kgo.GroupTransactSession loop, same transform and batching
  kafka-streams   the Java app in bench/streams (exactly_once_v2), when java is on PATH
                  and its jar exists or mvn can build it; otherwise skipped. One
                  stream thread, Kafka Streams' defaults but linger.ms 5
  kafka-streams/tuned   the same with a stream thread per core and the Go side's
                  batching (snappy, linger.ms 10, batch.size 1 MB, 10,000-record
                  polls); the goal against Kafka Streams is judged on both rows

Every run of a case gets fresh topics. Throughput phase: --records records are
seeded first, then the pipeline starts; records/s is measured by a read_committed
consumer of the output, leaving out the first --warmup share (start-up, group
join, JIT). Latency phase: with the pipeline caught up, --rate records/s are
produced for --latency-duration, each carrying its send time; p50/p99/p99.9 are
from that send to the read_committed consumer receiving the output.

CPU seconds (over the measured throughput window) and peak RSS are those of the
process under test: each Go case runs in a child process (eosctl bench worker),
Kafka Streams in its JVM. With --in-process the Go cases run inside this
process instead, and CPU and memory then include the load generator, the output
reader and the embedded broker.

A throughput window must last --min-window (default 5s): the first run of a
case whose window came out shorter (or saw fewer than 10 commits) is redone
with a backlog grown to last about 1.2 times that, up to twice more, at most
--max-records; its later runs keep that size. WINDOW S gives each case's
median window, and the notes name windows that stayed short. The window opens
only once the group is stable with every member of the case. Runs are interleaved (each case once,
then again) and reported as the median with the min–max spread. Without
--brokers it uses an embedded broker (--max-records 1000000 unless given).

--check makes the exit code judge the run: it fails when an exactly-once case
repeats a record, when any case misses one or writes a wrong output, or when a
goal's ratio falls below the goal times (1 - --check-tolerance) both in
records/s and by CPU per record: load from other processes sways the first far
more than the second, and a real regression moves both.

--pipeline count moves a stateful workload instead: GroupByKey → Count →
ToTable, each record emitting its key's new count as 8 big-endian bytes (what
Kafka's LongSerializer writes), over --keys keys (default 10000 here), so that
counts accumulate. Its cases:

  exactly-once/memory    this framework, exactly-once, state.Memory()
  exactly-once/pebble    the same with pebble.New() in a fresh temp directory
  kafka-streams          groupByKey().count() (RocksDB), exactly_once_v2, record
                         cache off (statestore.cache.max.bytes=0): every update
                         emitted, as the framework does
  kafka-streams/cached   the same with Kafka Streams' default 10 MB cache, which
                         emits a key's latest count per commit instead

Records/s count input records; the reader checks each key's counts (none
repeated, none above the key's records, the last equal to them). The other
guarantees do not apply (at-most-once refuses state). --restore-keys N adds
restore/memory and restore/pebble: a changelog is filled with N distinct keys
and a fresh instance (pebble from an empty directory) is timed restoring it
from the broker; records/s is changelog records over the time the runtime
spent restoring. List only restore/memory,restore/pebble in --cases to run
nothing else.

--pipeline windowed counts each key's records in tumbling windows of event
time: GroupByKey → CountWindows(Tumbling(--window).Grace(--grace)) → ToTable.
Record i carries event time base + i ms (base a multiple of --window, in the
recent past), so windows close as records arrive and every window's count is
known. Each output is the key with 16 bytes: the window's start (unix ms) and
its count, big-endian. Its cases:

  exactly-once/memory    this framework, every update emitted, state.Memory()
  exactly-once/pebble    the same with pebble.New()
  kafka-streams          windowedBy(TimeWindows.ofSizeAndGrace).count(), record
                         cache off: every update, as the framework does
  final/memory           FinalOnly(): each window once, when it closes
  final/pebble           the same with pebble.New()
  kafka-streams/final    suppress(untilWindowCloses(unbounded())), cache off

The reader checks every window: every update, its counts rising one by one to
the window's records; final results, each closed window exactly once with its
records. Records/s count input records (final results: those of the windows
that closed). Final results' p99 runs from the send of the first record that
can close the window to the result's receipt.

--pipeline postgres writes every record as a row into a fresh PostgreSQL table
at --postgres-url (dropped after the run) with COPY, in batches of up to
--batch-records (500 here unless given), from a pre-seeded backlog. Its cases:

  postgres/exactly-once    package pgsink: each batch's rows and its input
                           offsets in one Postgres transaction
  postgres/at-least-once   the loop most consumers write by hand: the same
                           COPY in its own transaction, then a synchronous
                           Kafka offset commit

Rows/s are timed at each case's commit point (the sink's offsets table, the
loop's Kafka offsets), leaving out the first --warmup share; there is no latency
phase. After each run the table must hold every record exactly once, or the run
fails instead of reporting a speed.

--pipeline cpu runs a transform bound by CPU: each value, JSON with an id and a
pad, is decoded, hashed with --cpu-rounds rounds of SHA-256 (default ` + strconv.Itoa(bench.CPURounds) + `: about
50 µs a record) and encoded back as JSON with the hex digest. Its cases run
once per --workers count (default 1,2). The broker and the output reader share
the machine: on few cores a costlier transform (--cpu-rounds 2200) leaves them
less of it, so that the speed-up workers buy shows.

  exactly-once/workers-N   this framework with workers: N, one process
  raw-franz-go/workers-N   N hand-written GroupTransactSession loops in one
                           process, each on its own goroutine with its own
                           transactional id
  kafka-streams/threads-N  the same transform in the Java app, exactly_once_v2,
                           num.stream.threads N (when java is on PATH)

The reader checks every 1,024th output's digest. Below the table each
workers-N row is set against the same case at the fewest workers (the
speed-up; goal for 2 against 1: ≥ 1.6×). --workers also applies to
--pipeline upper: each case runs once per count, named <case>/workers-N
(Kafka Streams: kafka-streams/threads-N, num.stream.threads N).`,
		Example: `  eosctl bench --records 20000 --repeat 1
  eosctl bench --brokers 127.0.0.1:9092 --records 500000 --repeat 3 --chart bench.svg
  eosctl bench --brokers 127.0.0.1:9092 --sweep                  # exactly-once at 10ms, 50ms, 100ms, 500ms
  eosctl bench --brokers 127.0.0.1:9092 --records 100000 --repeat 1 -o json   # CI, under 3 minutes
  eosctl bench --brokers 127.0.0.1:9092 --pipeline count --records 200000 --repeat 1
  eosctl bench --brokers 127.0.0.1:9092 --pipeline count --restore-keys 1000000 --cases restore/memory,restore/pebble
  eosctl bench --brokers 127.0.0.1:9092 --pipeline windowed --records 200000 --repeat 1 -o json
  eosctl bench --brokers 127.0.0.1:9092 --records 100000 --repeat 1 --redis-url $(integration/redis/redis.sh url) \
    --cases exactly-once,exactly-once/dedup-memory,exactly-once/dedup-redis,exactly-once/dedup-bloom
  eosctl bench --brokers 127.0.0.1:9092 --pipeline postgres --records 200000 --repeat 1 --postgres-url $(integration/postgres/pg.sh url)
  eosctl bench --brokers 127.0.0.1:9092 --pipeline cpu --records 100000 --repeat 1 -o json   # workers 1 and 2`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if chart != "" && !strings.EqualFold(filepath.Ext(chart), ".svg") {
				return usageErrorf("--chart %q: only SVG is written; name the file *.svg", chart)
			}
			if o.Warmup < 0 || o.Warmup >= 1 {
				return usageErrorf("--warmup must be in [0, 1), got %g", o.Warmup)
			}
			if o.Warmup == 0 {
				o.Warmup = -1 // bench.Options: none
			}
			if o.MinWindow < 0 {
				return usageErrorf("--min-window %s: give 0 (off) or a positive duration, e.g. 5s", o.MinWindow)
			}
			if tolerance < 0 || tolerance >= 1 {
				return usageErrorf("--check-tolerance must be in [0, 1), got %g", tolerance)
			}
			if o.MaxRecords <= 0 {
				return usageErrorf("--max-records %d: give a positive number", o.MaxRecords)
			}
			if !cmd.Flags().Changed("redis-url") {
				o.RedisURL = os.Getenv(bench.EnvRedisURL)
			}
			if !cmd.Flags().Changed("postgres-url") {
				o.PostgresURL = os.Getenv(bench.EnvPostgresURL)
			}
			valid := bench.CasesFor(o.Pipeline)
			if valid == nil {
				return usageErrorf("--pipeline %q: unknown pipeline; use %s", o.Pipeline, strings.Join(bench.Pipelines(), " or "))
			}
			for _, name := range []string{"window", "grace"} {
				if cmd.Flags().Changed(name) && o.Pipeline != bench.PipelineWindowed {
					return usageErrorf("--%s applies to --pipeline windowed only; drop it or add --pipeline windowed", name)
				}
			}
			if o.Pipeline == bench.PipelineWindowed {
				if o.Window <= 0 || o.Window%time.Millisecond != 0 {
					return usageErrorf("--window %s: give a positive whole number of milliseconds, e.g. 10s", o.Window)
				}
				if o.Grace < 0 || o.Grace%time.Millisecond != 0 {
					return usageErrorf("--grace %s: give 0 or a positive whole number of milliseconds, e.g. 1s", o.Grace)
				}
				if span := time.Duration(o.Records) * time.Millisecond; span < 2*(o.Window+o.Grace) {
					return usageErrorf("--records %d span %s of event time (1 ms apart), less than twice --window %s plus --grace %s, so windows would hardly close; "+
						"give more --records or a smaller --window", o.Records, span, o.Window, o.Grace)
				}
				if o.Grace == 0 {
					o.Grace = -1 // bench.Options: none
				}
			} else {
				o.Window, o.Grace = 0, 0
			}
			if cmd.Flags().Changed("cpu-rounds") && (o.Pipeline != bench.PipelineCPU || o.CPURounds < 1) {
				return usageErrorf("--cpu-rounds %d: give a positive number of rounds with --pipeline cpu", o.CPURounds)
			}
			if cmd.Flags().Changed("workers") {
				if o.Pipeline != bench.PipelineUpper && o.Pipeline != bench.PipelineCPU {
					return usageErrorf("--workers applies to --pipeline upper and cpu (stateless); drop it for --pipeline %s", o.Pipeline)
				}
				seen := map[int]bool{}
				for _, n := range o.Workers {
					if n < 1 || n > int(config.MaxWorkers) {
						return usageErrorf("--workers %d: give worker counts from 1 to %d, e.g. --workers 1,2", n, config.MaxWorkers)
					}
					if seen[n] {
						return usageErrorf("--workers lists %d twice; give each count once, e.g. --workers 1,2", n)
					}
					seen[n] = true
				}
			} else {
				o.Workers = nil // the pipeline's own: 1,2 for cpu, 1 otherwise
			}
			if o.RestoreKeys < 0 || o.RestoreKeys > 0 && o.Pipeline != bench.PipelineCount {
				return usageErrorf("--restore-keys %d: restores measure the count pipeline's state; give a positive number with --pipeline count", o.RestoreKeys)
			}
			if o.Pipeline == bench.PipelineCount && !cmd.Flags().Changed("keys") {
				o.Keys = countKeys
			}
			if o.Pipeline == bench.PipelinePostgres {
				if o.PostgresURL == "" {
					return usageErrorf("--pipeline postgres writes into PostgreSQL: give --postgres-url (or EOS_POSTGRES_URL), e.g. $(integration/postgres/pg.sh url) after integration/postgres/pg.sh start")
				}
				if len(o.Sweep) > 0 {
					return usageErrorf("--sweep: --pipeline postgres has no commit interval (a batch commits per poll); drop --sweep")
				}
				if !cmd.Flags().Changed("batch-records") {
					o.BatchRecords = bench.DefaultPostgresBatchRecords
				}
			}
			if !cmd.Flags().Changed("cases") {
				o.Cases = nil // the pipeline's own
			}
			if maxMemory != "" {
				v, err := config.ParseByteSize(maxMemory)
				if err != nil || v < config.MinMaxMemory {
					return usageErrorf("--max-memory %q: give a size of at least %s, e.g. 64MiB", maxMemory, config.MinMaxMemory)
				}
				o.MaxMemory = v
			}
			for _, c := range o.Cases {
				if !slices.Contains(valid, c) {
					return usageErrorf("--cases: case %q is not one of --pipeline %s; use %s", c, o.Pipeline, strings.Join(valid, ", "))
				}
				if (c == bench.RestoreMemory || c == bench.RestorePebble || c == bench.RestoreCrash ||
					c == bench.KafkaStreamsCrash || c == bench.KafkaStreamsCrashTxn) && o.RestoreKeys == 0 {
					return usageErrorf("--cases %s: give the changelog keys to restore with --restore-keys N", c)
				}
				if (c == bench.DedupRedisCase || c == bench.DedupBloomCase) && o.RedisURL == "" {
					return usageErrorf("--cases %s keeps its ids in Redis: give --redis-url (or EOS_REDIS_URL), e.g. $(integration/redis/redis.sh url) after integration/redis/redis.sh start", c)
				}
			}
			if len(o.Sweep) > 0 && !cmd.Flags().Changed("cases") {
				o.Cases = []string{bench.AtMostOnce}
				switch o.Pipeline {
				case bench.PipelineCount, bench.PipelineWindowed:
					o.Cases = []string{bench.CountMemory}
				case bench.PipelineCPU:
					o.Cases = []string{bench.ExactlyOnce}
				}
			}
			cfg, err := g.externalCluster()
			if err != nil {
				return err
			}
			if cfg != nil {
				o.Brokers, o.Base = cfg.Brokers, cfg
			} else if !cmd.Flags().Changed("max-records") {
				o.MaxRecords = embeddedMaxRecords
			}
			if !inProcess {
				exe, err := os.Executable()
				if err != nil {
					return fmt.Errorf("cannot find the eosctl binary to start workers from (%w); use --in-process", err)
				}
				o.Worker = []string{exe, "bench", "worker"}
			}
			o.Progress = cmd.ErrOrStderr()
			ctx, stop := untilSignal(cmd)
			defer stop()
			rep, err := bench.Run(ctx, o)
			if err != nil {
				return err
			}
			if chart != "" {
				if err := writeChart(chart, rep); err != nil {
					return err
				}
			}
			if err := g.render(cmd.OutOrStdout(), rep.Results, benchTable(rep)); err != nil {
				return err
			}
			if g.output == outputTable {
				benchNotes(cmd.OutOrStdout(), rep, chart)
			}
			failed := false
			for _, r := range rep.Results {
				failed = failed || r.Error != ""
			}
			if check {
				for _, f := range benchCheck(rep, tolerance) {
					fmt.Fprintf(cmd.ErrOrStderr(), "check failed: %s\n", f)
					failed = true
				}
			}
			if failed {
				return errFindings
			}
			return nil
		},
	}
	workloadFlags(cmd, &o.Records, &o.Partitions, &o.Keys)
	f := cmd.Flags()
	f.Lookup("keys").Usage += fmt.Sprintf(" (--pipeline count: %d unless given)", countKeys)
	f.StringVar(&o.Pipeline, "pipeline", bench.PipelineUpper, "workload: upper (stateless, every guarantee), count (stateful GroupByKey → Count), "+
		"windowed (GroupByKey → CountWindows over tumbling windows of event time), postgres (rows into PostgreSQL: the pgsink sink against an at-least-once loop) "+
		"or cpu (JSON decode, SHA-256 rounds, JSON encode: about 50 µs a record, at each --workers count)")
	f.IntVar(&o.CPURounds, "cpu-rounds", bench.CPURounds, "with --pipeline cpu, rounds of SHA-256 a record (the transform's cost: "+strconv.Itoa(bench.CPURounds)+" is about 50 µs)")
	f.IntSliceVar(&o.Workers, "workers", nil, "run each case once per worker count, named <case>/workers-N: workers: N for the framework, "+
		"N GroupTransactSession loops for raw-franz-go, num.stream.threads N for Kafka Streams (--pipeline upper and cpu; default 1,2 for cpu, 1 otherwise)")
	// Read from the environment when not given, so that --help does not
	// print a URL that may hold a password.
	f.StringVar(&o.RedisURL, "redis-url", "", "Redis of the exactly-once/dedup-redis and dedup-bloom cases (default $EOS_REDIS_URL); each run uses its own keys and deletes them")
	f.StringVar(&o.PostgresURL, "postgres-url", "", "database of --pipeline postgres (default $EOS_POSTGRES_URL); each run writes a fresh table and drops it")
	f.DurationVar(&o.Window, "window", bench.DefaultWindow, "with --pipeline windowed, the tumbling windows' size (records are 1 ms of event time apart)"+durationFlagHelp)
	f.DurationVar(&o.Grace, "grace", bench.DefaultGrace, "with --pipeline windowed, how long a window stays open after its end for records out of order"+durationFlagHelp)
	f.IntVar(&o.RestoreKeys, "restore-keys", 0, "with --pipeline count, also time restoring a changelog of this many keys (restore/memory, restore/pebble, and restore/pebble-crash: then a SIGKILL and a restart on the same state directory; name kafka-streams/crash and kafka-streams/crash-txn in --cases for Kafka Streams' figure without and with KIP-892's transactional stores)")
	f.IntVar(&o.RecordSize, "record-size", 100, "value bytes per record (at least 40)")
	f.StringVar(&maxMemory, "max-memory", "", "max_memory of the Go cases, e.g. 64MiB (default 128MiB per worker)")
	f.DurationVar(&o.CommitInterval, "commit-interval", 100*time.Millisecond, "how often a batch commits (Kafka Streams: commit.interval.ms)"+durationFlagHelp)
	f.IntVar(&o.BatchRecords, "batch-records", config.DefaultMaxBatchRecords, fmt.Sprintf("most records in one batch of the Go cases (--pipeline postgres: %d unless given)", bench.DefaultPostgresBatchRecords))
	f.DurationVar(&o.MinWindow, "min-window", 5*time.Second, "shortest throughput window to measure over; a case's backlog grows until its window lasts this long (0: --records as given)"+durationFlagHelp)
	f.IntVar(&o.MaxRecords, "max-records", bench.DefaultMaxRecords, "most records --min-window may grow a case's backlog to")
	f.BoolVar(&check, "check", false, "exit 1 when an exactly-once case repeats a record, a case misses one, or a goal's ratio falls below goal × (1 - --check-tolerance) in records/s and by CPU per record")
	f.Float64Var(&tolerance, "check-tolerance", 0.35, "with --check, the share a goal's ratio may fall short by before the run fails")
	f.IntVar(&o.Repeat, "repeat", 3, "runs per case; the median is reported with the min–max spread")
	f.Float64Var(&o.Warmup, "warmup", 0.2, "share of each phase's first records left out of its measurement")
	f.IntVar(&o.Rate, "rate", 5000, "records per second produced in the latency phase")
	f.DurationVar(&o.LatencyDuration, "latency-duration", 5*time.Second, "length of the latency phase; negative skips it"+durationFlagHelp)
	f.DurationSliceVar(&o.Sweep, "sweep", nil, "also run exactly-once at each of these commit intervals; --sweep alone means "+
		"10ms,50ms,100ms,500ms (give values with =). Without --cases only at-most-once runs besides")
	f.Lookup("sweep").NoOptDefVal = "10ms,50ms,100ms,500ms"
	f.StringSliceVar(&o.Cases, "cases", bench.Cases(), "cases to run, comma separated (--pipeline count: "+strings.Join(bench.CountCases(), ", ")+
		"; --pipeline windowed: "+strings.Join(bench.WindowedCases(), ", ")+"; --pipeline postgres: "+strings.Join(bench.PostgresCases(), ", ")+
		"; --pipeline cpu: "+strings.Join(bench.CPUCases(), ", ")+", each at every --workers count)")
	f.StringVar(&chart, "chart", "", "write an SVG chart of throughput and p99 per case to this file")
	f.BoolVar(&inProcess, "in-process", false, "run the Go cases inside this process instead of child processes")
	f.StringVar(&o.StreamsJar, "streams-jar", "", "the Kafka Streams app; default bench/streams/target/streams-bench.jar, built with mvn if missing")
	f.DurationVar(&o.RunTimeout, "run-timeout", 10*time.Minute, "give up on a run when a phase takes longer"+durationFlagHelp)
	_ = cmd.RegisterFlagCompletionFunc("cases", cobra.FixedCompletions(slices.Compact(slices.Sorted(slices.Values(slices.Concat(bench.Cases(), bench.CountCases(), bench.WindowedCases(), bench.PostgresCases())))), cobra.ShellCompDirectiveNoFileComp))
	_ = cmd.RegisterFlagCompletionFunc("pipeline", cobra.FixedCompletions(bench.Pipelines(), cobra.ShellCompDirectiveNoFileComp))
	_ = cmd.MarkFlagFilename("chart", "svg")
	cmd.AddCommand(newBenchWorkerCmd())
	return cmd
}

// countKeys is --keys under --pipeline count unless given: enough keys to
// spread over every partition, few enough that counts accumulate.
const countKeys = 10_000

// newBenchWorkerCmd is the child process bench starts for each Go case:
// the pipeline alone, so that its CPU and memory are measured alone.
func newBenchWorkerCmd() *cobra.Command {
	var spec string
	cmd := &cobra.Command{
		Use:    "worker --spec JSON",
		Short:  "Run one case of eosctl bench (started by bench itself)",
		Hidden: true,
		Args:   usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			var s bench.WorkerSpec
			if err := json.Unmarshal([]byte(spec), &s); err != nil {
				return usageErrorf("--spec: %v", err)
			}
			ctx, stop := untilSignal(cmd)
			defer stop()
			if dir := os.Getenv(envBenchProfileDir); dir != "" {
				// Where a case spends its CPU, to explain its row.
				f, err := os.Create(filepath.Join(dir, fmt.Sprintf("%s-%s-%d.cpu.pprof", s.Pipeline, strings.ReplaceAll(s.Case, "/", "-"), os.Getpid())))
				if err != nil {
					return fmt.Errorf("%s: %w", envBenchProfileDir, err)
				}
				defer f.Close()
				if err := pprof.StartCPUProfile(f); err != nil {
					return fmt.Errorf("%s: %w", envBenchProfileDir, err)
				}
				defer pprof.StopCPUProfile()
			}
			return bench.Work(ctx, s, cmd.OutOrStdout())
		},
	}
	cmd.Flags().StringVar(&spec, "spec", "", "the case as JSON (bench.WorkerSpec)")
	_ = cmd.MarkFlagRequired("spec")
	return cmd
}

// envBenchProfileDir names a directory each Go case of eosctl bench writes
// its CPU profile to (<pipeline>-<case>-<pid>.cpu.pprof).
const envBenchProfileDir = "EOS_BENCH_PROFILE_DIR"

// benchTable is the human rendering: one row per case.
func benchTable(rep *bench.Report) *table {
	ref, refHead := bench.AtMostOnce, "×AT-MOST-ONCE"
	switch rep.Pipeline {
	case bench.PipelineCount, bench.PipelineWindowed:
		ref, refHead = bench.KafkaStreams, "×KAFKA-STREAMS"
	case bench.PipelinePostgres:
		ref, refHead = bench.PostgresAtLeastOnce, "×AT-LEAST-ONCE"
	case bench.PipelineCPU:
		refHead = "×FEWEST WORKERS"
		if n := fewestWorkers(rep); n > 0 {
			refHead = fmt.Sprintf("×WORKERS-%d", n)
		}
	}
	t := newTable("CASE", "RECORDS/S", "(MIN–MAX)", "WINDOW S", "MB/S", "P50 MS", "P99 MS", "(MIN–MAX)", "P99.9 MS", "CPU S", "CPU µS/REC", "PEAK RSS", refHead)
	for _, r := range rep.Results {
		if r.Runs == 0 {
			why := "failed"
			if r.Skipped != "" {
				why = "skipped"
			}
			t.add(r.Name, why, "", "", "", "", "", "", "", "", "", "", "")
			continue
		}
		ratio := "-"
		ref := ref
		if r.Name == bench.FinalMemory || r.Name == bench.FinalPebble || r.Name == bench.KafkaStreamsFinal {
			ref = bench.KafkaStreamsFinal // final results against final results
		}
		if r.Workers > 0 && rep.Pipeline != bench.PipelineCPU {
			// The reference at the row's own worker count.
			ref = fmt.Sprintf("%s/workers-%d", ref, r.Workers)
		}
		switch v, ok := r.Ratios[ref]; {
		case rep.Pipeline == bench.PipelineCPU && r.Baseline != nil:
			ratio = fmt.Sprintf("%.2f", r.Baseline.Ratio)
		case rep.Pipeline == bench.PipelineCPU:
			ratio = "1.00"
		case ok:
			ratio = fmt.Sprintf("%.2f", v)
		case r.Name == ref:
			ratio = "1.00"
		}
		mbs := fmt.Sprintf("%.1f", r.MBPerSec)
		if r.RestoreKeys > 0 {
			mbs = "-"
		}
		lat := func(v float64) string {
			if r.LatencySamples == 0 {
				return "-"
			}
			return fmt.Sprintf("%.1f", v)
		}
		window := "-"
		if r.WindowSeconds > 0 {
			window = fmt.Sprintf("%.1f", r.WindowSeconds)
		}
		p99spread := "-"
		if r.LatencySamples > 0 {
			p99spread = fmt.Sprintf("(%.1f–%.1f)", r.P99MSMin, r.P99MSMax)
		}
		t.add(r.Name,
			fmt.Sprintf("%.0f", r.RecordsPerSec), fmt.Sprintf("(%.0f–%.0f)", r.RecordsPerSecMin, r.RecordsPerSecMax),
			window, mbs,
			lat(r.P50MS), lat(r.P99MS), p99spread, lat(r.P999MS),
			fmt.Sprintf("%.2f", r.CPUSeconds), fmt.Sprintf("%.2f", r.CPUMicrosPerRecord),
			dedupsize.HumanBytes(float64(r.PeakRSSBytes)), ratio)
	}
	return t
}

// fewestWorkers is the smallest worker count among rep's results, 0 when
// none was expanded by --workers.
func fewestWorkers(rep *bench.Report) int {
	n := 0
	for _, r := range rep.Results {
		if r.Workers > 0 && (n == 0 || r.Workers < n) {
			n = r.Workers
		}
	}
	return n
}

// embeddedMaxRecords is --max-records on the embedded broker unless
// given: it keeps every record in this process's memory.
const embeddedMaxRecords = 1_000_000

// benchCheck lists what makes a run fail --check: an exactly-once case
// that repeated records, a case that missed some or wrote a wrong output,
// a goal's ratio below its want times (1 - tolerance) both in records/s
// and by CPU per record. Kafka Streams' goal is judged on
// records/s alone; its p99 condition is for the report.
func benchCheck(rep *bench.Report, tolerance float64) []string {
	var out []string
	for _, r := range rep.Results {
		if r.Runs == 0 {
			continue
		}
		if r.Duplicates > 0 && (r.Guarantee == bench.ExactlyOnce || r.Guarantee == "exactly_once_v2") {
			out = append(out, fmt.Sprintf("%s (%s) repeated %d records", r.Name, r.Guarantee, r.Duplicates))
		}
		if r.Missing > 0 {
			out = append(out, fmt.Sprintf("%s missed %d records", r.Name, r.Missing))
		}
		if r.Invalid > 0 {
			out = append(out, fmt.Sprintf("%s wrote %d outputs that are no input's right transform", r.Name, r.Invalid))
		}
		for _, t := range r.Targets {
			// Other load on a shared machine sways records/s far more
			// than CPU per record; a regression moves both.
			if floor := t.Want * (1 - tolerance); t.Ratio < floor && (t.CPURatio <= 0 || t.CPURatio < floor) {
				out = append(out, fmt.Sprintf("%s vs %s: %.2f× the records/s and %.2f× by CPU per record, both below %.2f× (goal %.2f× less %.0f%%)",
					r.Name, t.Against, t.Ratio, t.CPURatio, floor, t.Want, tolerance*100))
			}
		}
	}
	return out
}

// benchNotes explains the table: the workload, what was measured, the
// goals, and why a case did not run.
func benchNotes(w io.Writer, rep *bench.Report, chart string) {
	pipeline := ""
	switch rep.Pipeline {
	case bench.PipelineCount:
		pipeline = "; a count per key, records/s of input records"
	case bench.PipelinePostgres:
		pipeline = "; one row per record into a fresh PostgreSQL table with COPY, rows/s in RECORDS/S"
	case bench.PipelineCPU:
		pipeline = fmt.Sprintf("; JSON decode, %d rounds of SHA-256, JSON encode per record; ×WORKERS is records/s over the same case at the fewest workers", rep.CPURounds)
	case bench.PipelineWindowed:
		pipeline = fmt.Sprintf("; a count per key in tumbling windows of %d ms, grace %d ms, records 1 ms of event time apart, records/s of input records "+
			"(final/* and kafka-streams/final: those of the windows that closed; their ratio is to kafka-streams/final)", rep.WindowMS, rep.GraceMS)
	}
	fmt.Fprintf(w, "\nworkload: %d records × %d B, %d partitions, %d keys, batches ≤ %d records; first %.0f%% of each phase left out; broker %s%s\n",
		rep.Records, rep.RecordSize, rep.Partitions, rep.Keys, rep.BatchRecords, rep.Warmup*100, rep.Broker, pipeline)
	var grown, short []string
	for _, r := range rep.Results {
		if r.Runs > 0 && r.Records != rep.Records {
			grown = append(grown, fmt.Sprintf("%s %d", r.Name, r.Records))
		}
		if r.Runs > 0 && r.RestoreKeys == 0 && r.WindowSecondsMin > 0 && r.WindowSecondsMin < rep.MinWindowSeconds {
			short = append(short, fmt.Sprintf("%s %.1f s", r.Name, r.WindowSecondsMin))
		}
	}
	if len(grown) > 0 {
		fmt.Fprintf(w, "backlogs grown for throughput windows of %.1f s or more: %s records\n", rep.MinWindowSeconds, strings.Join(grown, ", "))
	}
	if len(short) > 0 {
		fmt.Fprintf(w, "windows still shorter than %.1f s (at --max-records, or after %d runs of a case): %s; their records/s are less steady\n",
			rep.MinWindowSeconds, bench.MaxCalibrations, strings.Join(short, ", "))
	}
	if rep.LatencyRecs > 0 {
		fmt.Fprintf(w, "latency: %d records paced at %d/s, from the input's send to a read_committed reader receiving the output\n", rep.LatencyRecs, rep.LatencyRate)
	}
	measured := map[string]bool{}
	for _, r := range rep.Results {
		if r.Measured != "" && !measured[r.Measured] {
			measured[r.Measured] = true
			fmt.Fprintf(w, "CPU (measured window) and peak RSS: %s\n", r.Measured)
		}
	}
	for _, r := range rep.Results {
		if r.RestoreKeys > 0 && r.Runs > 0 {
			fmt.Fprintf(w, "%s: %d changelog records (distinct keys) restored from the broker by a fresh instance in %.2f s of restore "+
				"(records/s above), %.2f s from its start\n", r.Name, r.RestoreKeys, r.RestoreSeconds, r.RestoreWallSeconds)
		}
		if c := r.Crash; c != nil {
			fmt.Fprintf(w, "%s: restarted after a SIGKILL on the same state directory, it restored %.0f changelog records (%.1f %% of %d; worst run %.0f) "+
				"and committed again %.2f s after its start (worst run %.2f s)\n",
				r.Name, c.Restored, 100*c.RestoredShare, r.RestoreKeys, c.RestoredMax, c.CommitSeconds, c.CommitSecondsMax)
		}
	}
	for _, r := range rep.Results {
		for _, t := range r.Targets {
			verdict := "met"
			if !t.Met {
				verdict = "MISSED"
			}
			cmp := fmt.Sprintf("≥ %.2f×", t.Want)
			switch t.Against {
			case bench.KafkaStreams, bench.KafkaStreamsTuned:
				cmp = "ahead at equal or lower p99"
			case bench.RawFranzGo:
				cmp += fmt.Sprintf(" and CPU per record ≤ %.2f× the loop's", bench.TargetCPUVsRaw)
			}
			fmt.Fprintf(w, "goal %s vs %s: %.2f× (%s), p99 %.1f vs %.1f ms: %s; by CPU per record %.2f×\n",
				r.Name, t.Against, t.Ratio, cmp, t.P99MS, t.OtherP99, verdict, t.CPURatio)
		}
		if b := r.Baseline; b != nil {
			fmt.Fprintf(w, "%s against %s: %.2f× the records/s, %+.2f µs per record at that throughput, %+.2f CPU µs per record\n",
				r.Name, b.Against, b.Ratio, b.MicrosPerRecordAdded, b.CPUMicrosPerRecordAdded)
		}
		if r.Duplicates > 0 || r.Missing > 0 {
			fmt.Fprintf(w, "%s: %d duplicates, %d missing in the output\n", r.Name, r.Duplicates, r.Missing)
		}
		if r.Invalid > 0 {
			fmt.Fprintf(w, "%s: %d outputs are no input's right transform\n", r.Name, r.Invalid)
		}
	}
	for _, r := range rep.Results {
		switch {
		case r.Skipped != "":
			fmt.Fprintf(w, "%s skipped: %s\n", r.Name, r.Skipped)
		case r.Error != "":
			fmt.Fprintf(w, "%s failed: %s\n", r.Name, r.Error)
		}
	}
	if chart != "" {
		fmt.Fprintf(w, "chart: %s\n", chart)
	}
}

func writeChart(path string, rep *bench.Report) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("--chart: %w", err)
	}
	if err := bench.WriteSVG(f, rep); err != nil {
		f.Close()
		return fmt.Errorf("--chart: %w", err)
	}
	return f.Close()
}
