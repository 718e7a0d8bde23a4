package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/eosflow/eosflow/config"
	"github.com/eosflow/eosflow/internal/kafkautil"
	"github.com/eosflow/eosflow/topology"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Case names, in the order a bench reports them. The first four run the
// framework under each delivery guarantee.
const (
	AtMostOnce   = string(config.AtMostOnce)
	AtLeastOnce  = string(config.AtLeastOnce)
	Idempotent   = string(config.Idempotent)
	ExactlyOnce  = string(config.ExactlyOnce)
	RawFranzGo   = "raw-franz-go"  // the hand-written GroupTransactSession loop (RunRaw)
	KafkaStreams = "kafka-streams" // the Java app in bench/streams, exactly_once_v2
	// KafkaStreamsTuned is the same app with franz-go's batching (snappy,
	// linger.ms 10, 1 MB batches, 10,000-record polls;
	// bench/streams/README.md lists every setting) and one stream thread
	// per core (or per Options.Workers count), while exactly-once runs one
	// worker unless Options.Workers says more: the row gives Kafka
	// Streams every advantage. The goal against Kafka Streams is judged
	// against both rows.
	KafkaStreamsTuned = "kafka-streams/tuned"
	// ExactlyOnceMetrics is exactly-once serving its metrics on
	// metrics_addr, scraped every second as Prometheus would.
	ExactlyOnceMetrics = "exactly-once/metrics"
	// ExactlyOnceAdaptive is exactly-once with adaptive_commit: a batch
	// ends once the records at hand are processed, the commit interval
	// only bounding it.
	ExactlyOnceAdaptive = "exactly-once/adaptive"
	// ExactlyOnceTraced is exactly-once with eos.Tracing, every span kept
	// and handed to a batching exporter that discards them.
	ExactlyOnceTraced = "exactly-once/traced"
	// DedupMemoryCase, DedupRedisCase and DedupBloomCase are exactly-once
	// with a topology.Dedup node in front of the upper-casing whose effect
	// does nothing, so that the difference to ExactlyOnce is what the
	// operator and its store cost: dedup.NewMemory, redisdedup.New (a claim and
	// a completion per id) and redisdedup.NewBloom (sized for the run's ids at 1%, with
	// topology.AcceptFalsePositives). The Redis ones need Options.RedisURL.
	DedupMemoryCase = "exactly-once/dedup-memory"
	DedupRedisCase  = "exactly-once/dedup-redis"
	DedupBloomCase  = "exactly-once/dedup-bloom"
)

// Cases lists every case of the upper pipeline in report order; the Redis
// dedup cases run by default only with Options.RedisURL set.
func Cases() []string {
	return []string{AtMostOnce, AtLeastOnce, Idempotent, ExactlyOnce, ExactlyOnceAdaptive, ExactlyOnceMetrics, ExactlyOnceTraced,
		DedupMemoryCase, DedupRedisCase, DedupBloomCase, RawFranzGo, KafkaStreams, KafkaStreamsTuned}
}

// needsRedis says whether case c keeps its dedup ids in Redis.
func needsRedis(c string) bool { return c == DedupRedisCase || c == DedupBloomCase }

// Pipelines: the workloads a bench can move.
const (
	// PipelineUpper upper-cases values, stateless: every guarantee, raw
	// franz-go and Kafka Streams compare on it.
	PipelineUpper = "upper"
	// PipelineCount counts the records of each key and emits each key's
	// new count (codec.Int64): stateful, so exactly-once with a state engine
	// against Kafka Streams' groupByKey().count().
	PipelineCount = "count"
	// PipelineWindowed counts the records of each key in tumbling windows
	// of event time (CountWindows), exactly-once with a state engine,
	// against Kafka Streams' windowedBy(TimeWindows).count(): every
	// update, and final results only (FinalOnly against suppress).
	PipelineWindowed = "windowed"
	// PipelinePostgres writes every input record as a row into a fresh
	// PostgreSQL table with COPY, batch by batch: the exactly-once sink
	// (package pgsink) against the at-least-once loop consumers write by
	// hand. It needs Options.PostgresURL.
	PipelinePostgres = "postgres"
	// PipelineCPU runs Crunch, a transform bound by CPU (JSON decode,
	// CPURounds of SHA-256, JSON encode: about 50 µs a record), so that
	// what more workers in one process buy shows: exactly-once and the
	// raw franz-go loop at each of Options.Workers (default 1 and 2).
	PipelineCPU = "cpu"
)

// Pipelines lists the workloads, the default first.
func Pipelines() []string {
	return []string{PipelineUpper, PipelineCount, PipelineWindowed, PipelinePostgres, PipelineCPU}
}

// CPUCases lists the cases of the cpu pipeline in report order, before
// they are expanded to one per worker count (exactly-once/workers-1,
// ...): the framework exactly-once, the raw franz-go loop with as many
// GroupTransactSession clients, each on its own goroutine with its own
// transactional id, and Kafka Streams (exactly_once_v2) with as many
// stream threads (kafka-streams/threads-1, ...), the same transform in
// Java.
func CPUCases() []string { return []string{ExactlyOnce, RawFranzGo, KafkaStreams} }

// DefaultCPUWorkers is Options.Workers of the cpu pipeline unless given:
// one worker against two, the cores of the machines the figures of
// docs/benchmarks.md come from.
var DefaultCPUWorkers = []int{1, 2}

// TargetWorkers2 is the project's goal for workers: two workers in one
// process move at least this many times the records per second of one,
// on a CPU-bound transform with two cores.
const TargetWorkers2 = 1.6

// workersSuffix and threadsSuffix name a case expanded to a worker count:
// exactly-once/workers-2, kafka-streams/threads-2 (num.stream.threads).
const (
	workersSuffix = "/workers-"
	threadsSuffix = "/threads-"
)

// stateful says whether pipeline keeps state, so that its cases run
// exactly-once with a state engine.
func stateful(pipeline string) bool { return pipeline == PipelineCount || pipeline == PipelineWindowed }

// Case names of the count pipeline. Kafka Streams runs it as KafkaStreams
// with its record cache off (statestore.cache.max.bytes=0), so that it
// emits every update as the framework does, and as KafkaStreamsCached
// with its default cache, which coalesces a key's updates between commits.
const (
	CountMemory        = "exactly-once/memory" // state.Memory
	CountPebble        = "exactly-once/pebble" // pebble.New in a fresh directory
	KafkaStreamsCached = "kafka-streams/cached"
	// RestoreMemory and RestorePebble time a fresh instance restoring
	// Options.RestoreKeys changelog records from the broker.
	RestoreMemory = "restore/memory"
	RestorePebble = "restore/pebble"
	// RestoreCrash is RestorePebble, then a SIGKILL and a restart on the
	// same state directory: it measures what the restarted instance
	// restores and how soon it commits again (worker processes only).
	RestoreCrash = "restore/pebble-crash"
	// KafkaStreamsCrash and KafkaStreamsCrashTxn are RestoreCrash for
	// Kafka Streams (exactly_once_v2, RocksDB, static membership as
	// eosflow's instance_id), the latter with KIP-892's transactional
	// state stores (enable.transactional.statestores=true).
	KafkaStreamsCrash    = "kafka-streams/crash"
	KafkaStreamsCrashTxn = "kafka-streams/crash-txn"
)

// CountCases lists every case of the count pipeline in report order; the
// restore cases run only with Options.RestoreKeys set.
func CountCases() []string {
	return []string{CountMemory, CountPebble, KafkaStreams, KafkaStreamsCached, RestoreMemory, RestorePebble, RestoreCrash,
		KafkaStreamsCrash, KafkaStreamsCrashTxn}
}

// Case names of the windowed pipeline besides those it shares with the
// count pipeline (CountMemory, CountPebble and KafkaStreams, which emit
// every update, Kafka Streams with its record cache off). These emit each
// window's count once, when the window closes: the framework with
// FinalOnly, Kafka Streams with suppress(untilWindowCloses(unbounded())).
const (
	FinalMemory       = "final/memory"
	FinalPebble       = "final/pebble"
	KafkaStreamsFinal = "kafka-streams/final"
)

// WindowedCases lists every case of the windowed pipeline in report
// order: every update first (the like-for-like comparison), then final
// results.
func WindowedCases() []string {
	return []string{CountMemory, CountPebble, KafkaStreams, FinalMemory, FinalPebble, KafkaStreamsFinal}
}

// Case names of the postgres pipeline. Both write the same rows with the
// same COPY, in batches of up to Options.BatchRecords records.
const (
	// PostgresExactlyOnce is pgsink.Sink: each batch's rows and its input
	// offsets in one Postgres transaction.
	PostgresExactlyOnce = "postgres/exactly-once"
	// PostgresAtLeastOnce is the loop most consumers write by hand: the
	// batch's rows in their own transaction, then a synchronous Kafka
	// offset commit; a crash between the two writes the batch again.
	PostgresAtLeastOnce = "postgres/at-least-once"
)

// PostgresCases lists every case of the postgres pipeline in report order.
func PostgresCases() []string { return []string{PostgresExactlyOnce, PostgresAtLeastOnce} }

// DefaultPostgresBatchRecords is Options.BatchRecords of the postgres
// pipeline unless given: the batches of BenchmarkIntoPostgres (package
// pgsink), so that a commit point is passed often enough to time.
const DefaultPostgresBatchRecords = 500

// CasesFor lists the cases of pipeline in report order; nil for an
// unknown pipeline.
func CasesFor(pipeline string) []string {
	switch pipeline {
	case PipelineUpper, "":
		return Cases()
	case PipelineCount:
		return CountCases()
	case PipelineWindowed:
		return WindowedCases()
	case PipelinePostgres:
		return PostgresCases()
	case PipelineCPU:
		return CPUCases()
	}
	return nil
}

// scalable says whether pipeline's cases can run with more than one
// worker: the stateless ones.
func scalable(pipeline string) bool { return pipeline == PipelineUpper || pipeline == PipelineCPU }

// Defaults of the windowed pipeline. Records carry event times 1 ms
// apart, so a 10 s window holds 10,000 records: 10 per key over the
// default 1,000 keys.
const (
	DefaultWindow = 10 * time.Second
	DefaultGrace  = time.Second
)

// State engines of the count pipeline, by name.
const (
	StateMemory = "memory"
	StatePebble = "pebble"
)

// Engines: what moves the records in a case.
const (
	EngineFramework = "eosflow"
	EngineFranzGo   = "franz-go"
	EngineStreams   = "kafka-streams"
	EnginePgsink    = "pgsink"
)

// DefaultMaxRecords is Options.MaxRecords unless given: ten million
// records of 100 B are about 1 GB on the broker per topic.
const DefaultMaxRecords = 10_000_000

// DefaultSweep is the commit intervals a sweep tries when none are given.
var DefaultSweep = []time.Duration{10 * time.Millisecond, 50 * time.Millisecond, 100 * time.Millisecond, 500 * time.Millisecond}

// Options shape one bench. Zero values take the defaults named.
type Options struct {
	Brokers []string       // empty: an embedded kfake broker in this process
	Base    *config.Config // TLS and SASL for a real cluster; nil: none
	Records int            // records in the throughput phase; default 100,000
	// MinWindow is the shortest throughput window a run may be measured
	// over: the first run of a case whose window came out shorter, or
	// saw fewer than minBursts commits, is redone with its backlog grown
	// to last about 1.2 times MinWindow, up to MaxCalibrations runs in all
	// and at most MaxRecords, and the case's later runs keep that size. A
	// window of a fraction of a second swings with every hiccup of a
	// shared machine, and its CPU time is a handful of clock ticks. 0:
	// Records as given.
	MinWindow time.Duration
	// MaxRecords caps what MinWindow grows a backlog to; default the
	// larger of DefaultMaxRecords and Records.
	MaxRecords int
	RecordSize int   // value bytes; default 100
	Partitions int32 // of the input and output topics; default 6
	Keys       int   // distinct keys; default 1,000, 10,000 for PipelineCount
	// Pipeline is the workload: PipelineUpper (default), PipelineCount or
	// PipelineWindowed.
	Pipeline string
	// Window and Grace shape PipelineWindowed's tumbling windows, in whole
	// milliseconds of event time; default DefaultWindow and DefaultGrace
	// (negative Grace: none).
	// Record i carries event time base + i ms, base a multiple of Window.
	Window, Grace time.Duration
	// RestoreKeys, with PipelineCount, adds the restore cases: a changelog
	// is filled with this many distinct keys, and a fresh instance of each
	// engine is timed restoring it. 0: no restore cases.
	RestoreKeys    int
	CommitInterval time.Duration // default config.DefaultCommitInterval (100ms)
	BatchRecords   int           // most records per batch; default config.DefaultMaxBatchRecords
	Repeat         int           // runs per case; default 3
	// MaxMemory is config max_memory of the Go cases; 0: its default.
	MaxMemory config.ByteSize
	// Warmup is the share of each phase left out of its measurement: the
	// first records of the throughput phase (start-up, group join, JIT)
	// and of the latency phase. Default 0.2.
	Warmup float64
	// Rate is the records per second the latency phase produces, paced,
	// while the pipeline is caught up; default 5,000. LatencyDuration is
	// how long it lasts; default 5s, negative to skip the phase.
	Rate            int
	LatencyDuration time.Duration
	// Sweep adds an exactly-once case for each commit interval.
	Sweep []time.Duration
	// Workers runs every case of PipelineUpper or PipelineCPU once per
	// count given, named <case>/workers-N: the framework with workers: N
	// (config.Workers), the raw loop with N GroupTransactSession clients
	// on their own goroutines, Kafka Streams with num.stream.threads N
	// (<case>/threads-N). Default: DefaultCPUWorkers for PipelineCPU,
	// otherwise 1 with the cases' plain names.
	Workers []int
	// CPURounds is PipelineCPU's rounds of SHA-256 a record, which set the
	// transform's cost; default CPURounds (about 50 µs a record). A
	// costlier transform leaves less of the machine to the broker and the
	// output reader, so that what workers buy shows on few cores.
	CPURounds int
	// Cases to run, by name; default every case of the pipeline
	// (CasesFor), the restore cases only with RestoreKeys set (Kafka
	// Streams' crash cases only when named), the Redis dedup cases only
	// with RedisURL set.
	Cases []string
	// RedisURL is the Redis the dedup-redis and dedup-bloom cases keep
	// their ids in (redis://host:port/db); each run uses keys of its own
	// and deletes them after.
	RedisURL string
	// PostgresURL is the database of the postgres pipeline; each run
	// writes a fresh table and drops it after.
	PostgresURL string
	// Worker is the command line (program and leading arguments) that runs
	// a WorkerSpec given as --spec JSON, e.g. eosctl bench worker. Each Go
	// case then runs in a child process, measured alone; nil runs them in
	// this process, whose CPU and memory then include the load generator,
	// the output reader and an embedded broker.
	Worker []string
	// StreamsJar is the Kafka Streams app; default: found (or built with
	// mvn) in bench/streams of the repository around the working directory.
	StreamsJar string
	Java       string        // default "java" on PATH
	RunTimeout time.Duration // per phase of one run; default 10m
	Progress   io.Writer     // one line per run; nil: quiet
}

func (o *Options) defaults() {
	def := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	if o.Pipeline == "" {
		o.Pipeline = PipelineUpper
	}
	def(&o.Records, 100_000)
	def(&o.MaxRecords, max(DefaultMaxRecords, o.Records))
	def(&o.RecordSize, 100)
	if o.Pipeline == PipelineCount {
		def(&o.Keys, 10_000)
	}
	def(&o.Keys, 1000)
	if o.Pipeline == PipelineWindowed {
		if o.Window <= 0 {
			o.Window = DefaultWindow
		}
		switch {
		case o.Grace == 0:
			o.Grace = DefaultGrace
		case o.Grace < 0:
			o.Grace = 0
		}
	}
	if o.Pipeline == PipelineCPU {
		if len(o.Workers) == 0 {
			o.Workers = DefaultCPUWorkers
		}
		def(&o.CPURounds, CPURounds)
	}
	if o.Pipeline == PipelinePostgres {
		def(&o.BatchRecords, DefaultPostgresBatchRecords)
		o.LatencyDuration = -1 // rows in a table carry no latency to read back
	}
	def(&o.BatchRecords, config.DefaultMaxBatchRecords)
	def(&o.Repeat, 3)
	def(&o.Rate, 5000)
	if o.Partitions <= 0 {
		o.Partitions = 6
	}
	if o.CommitInterval <= 0 {
		o.CommitInterval = config.DefaultCommitInterval
	}
	switch {
	case o.Warmup == 0 || o.Warmup >= 1:
		o.Warmup = 0.2
	case o.Warmup < 0:
		o.Warmup = 0
	}
	if o.LatencyDuration == 0 {
		o.LatencyDuration = 5 * time.Second
	}
	if o.RunTimeout <= 0 {
		o.RunTimeout = 10 * time.Minute
	}
	if len(o.Cases) == 0 {
		for _, c := range CasesFor(o.Pipeline) {
			// Kafka Streams' crash cases start two JVMs each: only on request.
			streamsCrash := c == KafkaStreamsCrash || c == KafkaStreamsCrashTxn
			if (!isRestore(c) || o.RestoreKeys > 0) && (!needsRedis(c) || o.RedisURL != "") && !streamsCrash {
				o.Cases = append(o.Cases, c)
			}
		}
	}
}

func isRestore(c string) bool {
	return c == RestoreMemory || c == RestorePebble || isCrash(c)
}

// isCrash says whether case c is killed and restarted after its restore.
func isCrash(c string) bool {
	return c == RestoreCrash || c == KafkaStreamsCrash || c == KafkaStreamsCrashTxn
}

// validate checks the case names and numbers after defaults.
func (o *Options) validate() error {
	valid := CasesFor(o.Pipeline)
	if valid == nil {
		return fmt.Errorf("bench: unknown pipeline %q; use %s", o.Pipeline, strings.Join(Pipelines(), " or "))
	}
	for _, c := range o.Cases {
		ok := false
		for _, k := range valid {
			ok = ok || c == k
		}
		if !ok {
			return fmt.Errorf("bench: case %q is not one of pipeline %s; use %s", c, o.Pipeline, strings.Join(valid, ", "))
		}
		if isRestore(c) && o.RestoreKeys <= 0 {
			return fmt.Errorf("bench: case %s needs the number of changelog keys to restore; set RestoreKeys (--restore-keys)", c)
		}
		if needsRedis(c) && o.RedisURL == "" {
			return fmt.Errorf("bench: case %s keeps its ids in Redis; set RedisURL (--redis-url or EOS_REDIS_URL), e.g. after integration/redis/redis.sh start", c)
		}
	}
	if o.Pipeline == PipelinePostgres && o.PostgresURL == "" {
		return fmt.Errorf("bench: pipeline %s writes into PostgreSQL; set PostgresURL (--postgres-url or EOS_POSTGRES_URL), e.g. after integration/postgres/pg.sh start", PipelinePostgres)
	}
	if o.Pipeline == PipelinePostgres && len(o.Sweep) > 0 {
		return fmt.Errorf("bench: pipeline %s has no commit interval to sweep (a batch commits per poll); drop the sweep", PipelinePostgres)
	}
	if o.RestoreKeys < 0 {
		return fmt.Errorf("bench: restore keys %d must not be negative", o.RestoreKeys)
	}
	if o.RestoreKeys > 0 && o.Pipeline != PipelineCount {
		return fmt.Errorf("bench: restoring measures the count pipeline's state; use pipeline %s with restore keys", PipelineCount)
	}
	if err := o.validateWindows(); err != nil {
		return err
	}
	if err := o.validateWorkers(); err != nil {
		return err
	}
	if o.RecordSize < 40 {
		return fmt.Errorf("bench: record size %d is too small; values carry an id and a send time, use at least 40 bytes", o.RecordSize)
	}
	for _, d := range o.Sweep {
		if d <= 0 {
			return fmt.Errorf("bench: sweep interval %s must be positive", d)
		}
	}
	return nil
}

// validateWorkers checks the worker counts.
func (o *Options) validateWorkers() error {
	seen := map[int]bool{}
	for _, n := range o.Workers {
		if n < 1 || n > int(config.MaxWorkers) {
			return fmt.Errorf("bench: workers %d: give counts from 1 to %d", n, config.MaxWorkers)
		}
		if seen[n] {
			return fmt.Errorf("bench: workers %d is listed twice; give each count once", n)
		}
		seen[n] = true
	}
	if o.expandWorkers() && !scalable(o.Pipeline) {
		return fmt.Errorf("bench: workers apply to pipelines %s and %s (stateless); drop them for pipeline %s", PipelineUpper, PipelineCPU, o.Pipeline)
	}
	return nil
}

// expandWorkers says whether each case runs once per worker count, under
// a name with the count: always for the cpu pipeline, and whenever other
// counts than the single default 1 are asked for.
func (o *Options) expandWorkers() bool {
	return o.Pipeline == PipelineCPU || len(o.Workers) > 1 || len(o.Workers) == 1 && o.Workers[0] != 1
}

// validateWindows checks the windowed pipeline's window and grace.
func (o *Options) validateWindows() error {
	if o.Pipeline != PipelineWindowed {
		if o.Window != 0 || o.Grace != 0 {
			return fmt.Errorf("bench: a window and a grace apply to pipeline %s only; drop them or use that pipeline", PipelineWindowed)
		}
		return nil
	}
	if o.Window%time.Millisecond != 0 || o.Grace%time.Millisecond != 0 {
		return fmt.Errorf("bench: window %s and grace %s must be whole milliseconds, the resolution of Kafka timestamps", o.Window, o.Grace)
	}
	// Records are 1 ms of event time apart: a window closes only once
	// later records pass its end plus the grace.
	if span := time.Duration(o.Records) * time.Millisecond; span < 2*(o.Window+o.Grace) {
		return fmt.Errorf("bench: %d records span %s of event time (1 ms apart), less than twice the window %s plus grace %s, so windows would hardly close; "+
			"give more records or a smaller window", o.Records, span, o.Window, o.Grace)
	}
	return nil
}

// Workload is what every case of a bench moved.
type Workload struct {
	Pipeline   string `json:"pipeline"`
	Broker     string `json:"broker"`
	Records    int    `json:"records"`
	RecordSize int    `json:"record_size"`
	Partitions int32  `json:"partitions"`
	Keys       int    `json:"keys"`
	// WindowMS and GraceMS: the windowed pipeline's tumbling windows.
	WindowMS     int64   `json:"window_ms,omitempty"`
	GraceMS      int64   `json:"grace_ms,omitempty"`
	BatchRecords int     `json:"batch_records"`
	Warmup       float64 `json:"warmup"`
	LatencyRate  int     `json:"latency_rate"`
	LatencyRecs  int     `json:"latency_records"`
	// MinWindowSeconds is Options.MinWindow: a case whose throughput
	// window fell short ran with a bigger backlog (its Result.Records).
	MinWindowSeconds float64 `json:"min_window_seconds,omitempty"`
	// CPURounds: the cpu pipeline's rounds of SHA-256 a record.
	CPURounds int `json:"cpu_rounds,omitempty"`
}

// Result is one case: medians over its runs, with the spread (min and
// max) of throughput and p99.
type Result struct {
	Name             string  `json:"name"`
	Engine           string  `json:"engine"`
	Guarantee        string  `json:"guarantee"`
	CommitIntervalMS float64 `json:"commit_interval_ms"`
	Runs             int     `json:"runs"`
	// Throughput over the throughput phase after warm-up: input records
	// per second, from the output records a read_committed consumer saw.
	RecordsPerSec    float64 `json:"records_per_sec"`
	RecordsPerSecMin float64 `json:"records_per_sec_min"`
	RecordsPerSecMax float64 `json:"records_per_sec_max"`
	// WindowSeconds is the median length of the throughput window the
	// records/s were measured over (WindowSecondsMin its shortest); the
	// case's Records is the backlog that gave it (see Options.MinWindow).
	WindowSeconds    float64 `json:"window_seconds"`
	WindowSecondsMin float64 `json:"window_seconds_min"`
	MBPerSec         float64 `json:"mb_per_sec"` // of record values
	// End-to-end latency in the paced latency phase: from the input's
	// produce call (its send time is in the value) to a read_committed
	// consumer of the output receiving it.
	P50MS          float64 `json:"p50_ms"`
	P99MS          float64 `json:"p99_ms"`
	P999MS         float64 `json:"p999_ms"`
	P99MSMin       float64 `json:"p99_ms_min"`
	P99MSMax       float64 `json:"p99_ms_max"`
	LatencySamples int     `json:"latency_samples"`
	// CPU time of the process under test during the throughput window,
	// and its peak resident set over its life; see Measured.
	CPUSeconds         float64 `json:"cpu_seconds"`
	CPUMicrosPerRecord float64 `json:"cpu_us_per_record"`
	PeakRSSBytes       int64   `json:"peak_rss_bytes"`
	Measured           string  `json:"measured"`
	// RatioToAtMostOnce is this case's records/s over at-most-once's; nil
	// without an at-most-once result. Ratios holds the same against every
	// other case that ran.
	RatioToAtMostOnce *float64           `json:"ratio_to_at_most_once"`
	Ratios            map[string]float64 `json:"ratios,omitempty"`
	Targets           []Target           `json:"targets,omitempty"`
	// Missing is input records no output accounted for; Duplicates,
	// outputs that accounted for a record again (for the count pipeline: a
	// key's count repeated, going back, or above the key's records).
	Missing    int `json:"missing"`
	Duplicates int `json:"duplicates"`
	// Invalid is outputs that are no input record's right transform:
	// unreadable, or (cpu pipeline, every 1,024th id checked) a digest
	// that does not match the input's.
	Invalid int `json:"invalid,omitempty"`
	// Workers is the workers the case ran with (Kafka Streams: stream
	// threads); 0 for a case not expanded by Options.Workers.
	Workers int `json:"workers,omitempty"`
	// StreamThreads is a Kafka Streams case's num.stream.threads.
	StreamThreads int `json:"stream_threads,omitempty"`
	// A restore case's RecordsPerSec is changelog records applied per
	// second: RestoreKeys over RestoreSeconds, the time the runtime spent
	// restoring (reading the changelogs from the broker and applying them
	// to the engine). RestoreWallSeconds runs from the fresh instance's
	// start to its stores caught up: group join and store opening too.
	RestoreKeys        int     `json:"restore_keys,omitempty"`
	RestoreSeconds     float64 `json:"restore_seconds,omitempty"`
	RestoreWallSeconds float64 `json:"restore_wall_seconds,omitempty"`
	// Crash is RestoreCrash's restart.
	Crash   *Crash `json:"crash,omitempty"`
	Skipped string `json:"skipped,omitempty"`
	Error   string `json:"error,omitempty"`
	// Baseline compares a case that adds one thing to another case of the
	// same run: a dedup case to exactly-once (what the operator and its
	// store cost per record), the postgres sink to the at-least-once loop.
	Baseline *Baseline `json:"baseline,omitempty"`
	Workload
}

// Crash is what RestoreCrash measured of the restart after a SIGKILL, on
// the same state directory: medians, with the worst run's.
type Crash struct {
	// Restored is the changelog records the restarted instance restored
	// (Stats.Restored); RestoredShare, that over RestoreKeys.
	Restored      float64 `json:"restored"`
	RestoredMax   float64 `json:"restored_max"`
	RestoredShare float64 `json:"restored_share"`
	// CommitSeconds runs from the restarted process's start until every
	// record fed after the crash was counted and read committed.
	CommitSeconds    float64 `json:"commit_seconds"`
	CommitSecondsMax float64 `json:"commit_seconds_max"`
}

// Target is one of the project's throughput goals for exactly-once,
// judged on this bench's medians.
type Target struct {
	Against  string  `json:"against"`
	Ratio    float64 `json:"ratio"`     // exactly-once records/s over the other's
	Want     float64 `json:"want"`      // the ratio the goal asks for
	P99MS    float64 `json:"p99_ms"`    // exactly-once's p99
	OtherP99 float64 `json:"other_p99"` // the other case's p99
	Met      bool    `json:"met"`
	// CPURatio is the other's CPU per record over exactly-once's: the
	// throughput ratio to expect when CPU is the bound. Other processes'
	// load sways records/s far more than it sways CPU per record, so on a
	// shared machine this is the steadier of the two.
	CPURatio float64 `json:"cpu_ratio"`
}

// Baseline is a case measured against the case it adds one thing to, in
// the same run, so that the cost of that thing can be read per record.
type Baseline struct {
	Against string  `json:"against"`
	Ratio   float64 `json:"ratio"` // this case's records/s over the other's
	// MicrosPerRecordAdded is the time per record this case adds at its
	// throughput (1/records/s, minus the other's): where a record waits
	// on a server, as on Redis, more than its CPU shows.
	MicrosPerRecordAdded float64 `json:"us_per_record_added"`
	// CPUMicrosPerRecordAdded is the CPU per record of the process under
	// test that this case adds.
	CPUMicrosPerRecordAdded float64 `json:"cpu_us_per_record_added"`
}

// baselines names, for each case that adds one thing to another, that
// other case.
var baselines = map[string]string{
	DedupMemoryCase:     ExactlyOnce,
	DedupRedisCase:      ExactlyOnce,
	DedupBloomCase:      ExactlyOnce,
	PostgresExactlyOnce: PostgresAtLeastOnce,
}

// Report is a whole bench: one Result per case, in run order.
type Report struct {
	Workload
	Results []Result
}

// caseSpec is one case to run.
type caseSpec struct {
	name      string
	kind      string // one of Cases()
	engine    string
	guarantee string
	commit    time.Duration
	streams   *streamsApp
	skipped   string
	pipeline  string
	state     string // engine of a count case: StateMemory or StatePebble
	final     bool   // a windowed case emitting final results only
	cache     int64  // Kafka Streams' statestore.cache.max.bytes; -1: its default
	restore   bool   // a restore case
	crash     bool   // a restore case killed and restarted (isCrash)
	txnStores bool   // Kafka Streams with KIP-892's transactional state stores
	metrics   bool   // serve and scrape metrics (ExactlyOnceMetrics)
	traced    bool   // eos.Tracing (ExactlyOnceTraced)
	adaptive  bool   // adaptive_commit (ExactlyOnceAdaptive)
	dedup     string // the dedup store in front of the upper-casing: DedupMemory, DedupRedis or DedupBloom
	workers   int    // workers (Kafka Streams: threads); 0 or 1: one
	tuned     bool   // Kafka Streams with the Go side's batching, a thread per core unless workers says
	base      string // the case's name before the worker count was added to it
}

func (o *Options) plan() []caseSpec {
	var cs []caseSpec
	for _, k := range o.Cases {
		c := caseSpec{name: k, kind: k, commit: o.CommitInterval, engine: EngineFramework, guarantee: k, pipeline: o.Pipeline, cache: -1}
		switch k {
		case RawFranzGo:
			c.engine, c.guarantee = EngineFranzGo, ExactlyOnce
		case ExactlyOnceMetrics:
			c.kind, c.guarantee, c.metrics = ExactlyOnce, ExactlyOnce, true
		case ExactlyOnceAdaptive:
			c.kind, c.guarantee, c.adaptive = ExactlyOnce, ExactlyOnce, true
		case ExactlyOnceTraced:
			c.kind, c.guarantee, c.traced = ExactlyOnce, ExactlyOnce, true
		case DedupMemoryCase:
			c.kind, c.guarantee, c.dedup = ExactlyOnce, ExactlyOnce, DedupMemory
		case DedupRedisCase:
			c.kind, c.guarantee, c.dedup = ExactlyOnce, ExactlyOnce, DedupRedis
		case DedupBloomCase:
			c.kind, c.guarantee, c.dedup = ExactlyOnce, ExactlyOnce, DedupBloom
		case PostgresExactlyOnce:
			c.engine, c.guarantee, c.commit = EnginePgsink, ExactlyOnce, 0
		case PostgresAtLeastOnce:
			c.engine, c.guarantee, c.commit = EngineFranzGo, AtLeastOnce, 0
		case KafkaStreams, KafkaStreamsCached, KafkaStreamsFinal, KafkaStreamsTuned, KafkaStreamsCrash, KafkaStreamsCrashTxn:
			c.kind, c.engine, c.guarantee = KafkaStreams, EngineStreams, "exactly_once_v2"
			c.tuned = k == KafkaStreamsTuned
			c.txnStores = k == KafkaStreamsCrashTxn
			if stateful(o.Pipeline) && k != KafkaStreamsCached {
				c.cache = 0
			}
		case CountMemory, RestoreMemory, FinalMemory:
			c.kind, c.guarantee, c.state = ExactlyOnce, ExactlyOnce, StateMemory
		case CountPebble, RestorePebble, RestoreCrash, FinalPebble:
			c.kind, c.guarantee, c.state = ExactlyOnce, ExactlyOnce, StatePebble
		}
		c.final = k == FinalMemory || k == FinalPebble || k == KafkaStreamsFinal
		c.restore = isRestore(k)
		c.crash = isCrash(k)
		cs = append(cs, c)
	}
	for _, d := range o.Sweep {
		c := caseSpec{name: ExactlyOnce + "@" + d.String(), kind: ExactlyOnce, engine: EngineFramework, guarantee: ExactlyOnce, commit: d, pipeline: o.Pipeline, cache: -1}
		if stateful(o.Pipeline) {
			c.name, c.state = CountMemory+"@"+d.String(), StateMemory
		}
		cs = append(cs, c)
	}
	for i := range cs {
		cs[i].base = cs[i].name
	}
	if !o.expandWorkers() {
		return cs
	}
	var out []caseSpec
	for _, c := range cs {
		for _, n := range o.Workers {
			e := c
			e.workers = n
			suffix := workersSuffix
			if c.engine == EngineStreams {
				suffix = threadsSuffix
			}
			e.name = c.name + suffix + strconv.Itoa(n)
			out = append(out, e)
		}
	}
	return out
}

// Run seeds, runs and measures every case Repeat times, interleaving the
// cases so that drift on a shared machine spreads over all of them. A case
// that fails keeps its error in its Result; Run itself fails only when the
// broker cannot be reached or ctx ends.
func Run(ctx context.Context, o Options) (*Report, error) {
	o.defaults()
	if err := o.validate(); err != nil {
		return nil, err
	}
	h := &harness{o: &o}
	cfg := config.Default()
	if o.Base != nil {
		cfg = *o.Base
	}
	embedded := len(o.Brokers) == 0
	if embedded {
		c, err := kfake.NewCluster(kfake.NumBrokers(1))
		if err != nil {
			return nil, fmt.Errorf("bench: starting the embedded broker: %w", err)
		}
		defer c.Close()
		o.Brokers = c.ListenAddrs()
		h.broker = "embedded kfake " + o.Brokers[0]
	} else {
		h.broker = strings.Join(o.Brokers, ",")
	}
	cfg.Brokers = o.Brokers
	h.cfg = cfg
	conn, err := kafkautil.Connect(cfg, kgo.ProducerLinger(5*time.Millisecond))
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	h.base, h.cl, h.adm = conn.Opts, conn.Client, conn.Admin
	pctx, cancel := context.WithTimeout(ctx, max(cfg.ConnectTimeout, 5*time.Second))
	err = h.cl.Ping(pctx)
	cancel()
	if err != nil {
		return nil, fmt.Errorf("bench: no answer from %s: %w; check --brokers and that Kafka is running", h.broker, err)
	}

	cases := o.plan()
	for i := range cases {
		if cases[i].crash && cases[i].engine == EngineFramework && len(o.Worker) == 0 {
			cases[i].skipped = "a crash needs the pipeline in a worker process to SIGKILL; run without --in-process"
			progressf(o.Progress, "%s skipped: %s", cases[i].name, cases[i].skipped)
			continue
		}
		if cases[i].kind != KafkaStreams {
			continue
		}
		if stateful(o.Pipeline) && embedded {
			// Kafka Streams describes the configs of its internal topics
			// and fails on kfake's answer (a config source of -1).
			cases[i].skipped = "Kafka Streams' state store setup fails on the embedded broker (it cannot read kfake's topic config answers); give --brokers of an Apache Kafka"
			progressf(o.Progress, "%s skipped: %s", cases[i].name, cases[i].skipped)
			continue
		}
		app, err := findStreams(ctx, &o)
		if err != nil {
			if !errors.Is(err, errSkipped) {
				return nil, err
			}
			cases[i].skipped = strings.TrimPrefix(err.Error(), errSkipped.Error()+": ")
			progressf(o.Progress, "%s skipped: %s", cases[i].name, cases[i].skipped)
			continue
		}
		cases[i].streams = app
	}

	runs := make([][]runResult, len(cases))
	errs := make([]error, len(cases))
	records := make([]int, len(cases))
	for i := range records {
		records[i] = o.Records
	}
	for rep := range o.Repeat {
		for _, i := range runOrder(len(cases), rep) {
			c := cases[i]
			if c.skipped != "" {
				continue
			}
			run := h.runOnce
			switch {
			case c.restore:
				run = h.runRestore
			case c.pipeline == PipelinePostgres:
				run = h.runPostgres
			}
			calibrate := rep == 0 && o.MinWindow > 0 && !c.restore && c.pipeline != PipelinePostgres
			r, err := runResult{}, error(nil)
			for try := 1; ; try++ {
				h.records = records[i]
				h.calibrate = calibrate && try < MaxCalibrations && records[i] < o.MaxRecords
				r, err = run(ctx, c, rep)
				if err != nil || !r.short {
					break
				}
				records[i] = grownBacklog(records[i], r.rate, o.MinWindow, o.Warmup, o.MaxRecords)
				why := fmt.Sprintf("is shorter than %s", o.MinWindow)
				if r.window >= o.MinWindow {
					why = fmt.Sprintf("saw %d commits, fewer than %d", r.bursts, minBursts)
				}
				progressf(o.Progress, "run %d/%d %s: measured window %s %s; running it again with %d records",
					rep+1, o.Repeat, c.name, r.window.Round(time.Millisecond), why, records[i])
			}
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			if err != nil {
				errs[i] = err
				progressf(o.Progress, "run %d/%d %s: failed: %v", rep+1, o.Repeat, c.name, err)
				continue
			}
			runs[i] = append(runs[i], r)
			if c.restore {
				progressf(o.Progress, "run %d/%d %s: %d changelog records restored in %s (%.0f records/s), %s from start, cpu %.2fs",
					rep+1, o.Repeat, c.name, o.RestoreKeys, r.restoreTook.Round(time.Millisecond), r.rate, r.restoreWall.Round(time.Millisecond), r.cpu.Seconds())
				continue
			}
			if c.pipeline == PipelinePostgres {
				progressf(o.Progress, "run %d/%d %s: %.0f rows/s, cpu %.2fs", rep+1, o.Repeat, c.name, r.rate, r.cpu.Seconds())
				continue
			}
			progressf(o.Progress, "run %d/%d %s: %.0f records/s over %s, p50 %s p99 %s, cpu %.2fs",
				rep+1, o.Repeat, c.name, r.rate, r.window.Round(10*time.Millisecond), fmtDur(r.p50), fmtDur(r.p99), r.cpu.Seconds())
		}
	}
	return h.report(cases, runs, errs, records), nil
}

// runOrder is the order of n cases in round rep: as listed in even
// rounds, backwards in odd ones. A case run right after another ran on
// a broker the other had just warmed: in a fixed order, exactly-once
// came out at 0.90× the raw loop's records/s over five rounds when run
// first, and at 0.98× over three when run second.
func runOrder(n, rep int) []int {
	order := make([]int, n)
	for i := range order {
		order[i] = i
		if rep%2 == 1 {
			order[i] = n - 1 - i
		}
	}
	return order
}

// minBursts is the fewest output polls that must see records inside a
// throughput window for its rate to count: with fewer, the window times
// the gap between a handful of commits.
const minBursts = 10

// members is how many consumer group members case c runs: its workers
// (the raw loop's sessions, Kafka Streams' stream threads), else one.
func (c caseSpec) members() int {
	if c.engine == EngineStreams {
		return c.streamThreads()
	}
	return max(c.workers, 1)
}

// awaitGroup calls stable once group is stable with want members, each
// holding partitions, or after groupWait if it never says so (the
// warm-up share alone then keeps the join out of the window), or never
// once ctx ends.
func (h *harness) awaitGroup(ctx context.Context, group string, want int, stable func()) {
	deadline := time.Now().Add(groupWait)
	for ctx.Err() == nil && time.Now().Before(deadline) {
		gs, err := h.adm.DescribeGroups(ctx, group)
		if err == nil {
			if g, ok := gs[group]; ok && g.Err == nil && g.State == "Stable" && len(g.Members) == want && allAssigned(g) {
				stable()
				return
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(50 * time.Millisecond):
		}
	}
	if ctx.Err() == nil {
		progressf(h.o.Progress, "group %s not seen stable with %d members within %s; measuring from the warm-up share alone", group, want, groupWait)
		stable()
	}
}

// groupWait bounds awaitGroup.
const groupWait = time.Minute

// allAssigned says whether every member of g holds a partition.
func allAssigned(g kadm.DescribedGroup) bool {
	for _, m := range g.Members {
		a, ok := m.Assigned.AsConsumer()
		if !ok || a == nil || len(a.Topics) == 0 {
			return false
		}
	}
	return true
}

// MaxCalibrations bounds the runs of a case that may come out too short
// for Options.MinWindow: the last one is measured whatever its window.
const MaxCalibrations = 3

// grownBacklog is the backlog whose throughput window lasts about 1.2
// times want at rate records/s once the warm-up share is left out, in
// whole thousands, at most limit. It grows n at least twice and at most
// ten times: a rate timed over a few milliseconds can be far off either
// way, and the next run times it again.
func grownBacklog(n int, rate float64, want time.Duration, warmup float64, limit int) int {
	grown := rate * 1.2 * want.Seconds() / (1 - warmup)
	grown = math.Ceil(min(max(grown, 2*float64(n)), 10*float64(n))/1000) * 1000
	return int(min(grown, float64(limit)))
}

// harness is one bench's shared state.
type harness struct {
	o      *Options
	cfg    config.Config
	base   []kgo.Opt
	broker string
	cl     *kgo.Client
	adm    *kadm.Client
	// eventBase is the current run's event time of record 0 (unix ms);
	// 0: records carry the time they are produced.
	eventBase int64
	// records is the current run's throughput-phase backlog: Options.Records,
	// or what Options.MinWindow grew it to for the case.
	records int
	// calibrate makes the current run stop after its throughput phase
	// when its window is shorter than Options.MinWindow.
	calibrate bool
}

// runResult is one run of one case.
type runResult struct {
	rate           float64
	cpu            time.Duration
	cpuPerRecord   time.Duration
	peakRSS        int64
	p50, p99, p999 time.Duration
	samples        int
	missing, dups  int
	invalid        int // outputs that are no input's right transform
	measured       string
	// window is the throughput phase's measured window, bursts the polls
	// of the output reader that saw records in it; short says the run
	// stopped there because it fell below Options.MinWindow or
	// minBursts.
	window time.Duration
	bursts int
	short  bool
	// A restore case's: time the runtime spent restoring, and from the
	// instance's start to its stores caught up.
	restoreTook, restoreWall time.Duration
	// RestoreCrash's: changelog records the restarted instance restored,
	// and the time from its start until it committed again.
	crashRestored uint64
	crashCommit   time.Duration
}

func (h *harness) latencyRecords() int {
	if h.o.LatencyDuration < 0 {
		return 0
	}
	return max(int(float64(h.o.Rate)*h.o.LatencyDuration.Seconds()), 1)
}

func (h *harness) runOnce(ctx context.Context, c caseSpec, rep int) (runResult, error) {
	o := h.o
	n := h.records
	id := runID(c, rep)
	in, out := id+"-in", id+"-out"
	if err := h.createTopics(ctx, in, out); err != nil {
		return runResult{}, err
	}
	defer h.deleteTopics(in, out, topology.ChangelogTopic(id, CountStore), suppressChangelog(id), topology.OffsetsTopic(id))
	if c.dedup == DedupRedis || c.dedup == DedupBloom {
		defer h.dropRedisKeys(id)
	}
	if c.state != "" {
		if err := h.createChangelog(ctx, id); err != nil {
			return runResult{}, err
		}
	}
	stateDir, err := h.stateDir(c)
	if err != nil {
		return runResult{}, err
	}
	defer os.RemoveAll(stateDir)
	h.eventBase = 0
	lat := h.latencyRecords()
	if c.pipeline == PipelineWindowed {
		h.eventBase = eventBase(time.Now(), n+lat, o.Window)
	}
	if err := h.seed(ctx, in, n); err != nil {
		return runResult{}, fmt.Errorf("seeding %s: %w", in, err)
	}

	// The process under test is known only once started; the observer
	// samples its CPU when the warm-up ends and when the phase is done.
	var (
		pid        atomic.Int64
		cpuMu      sync.Mutex
		cpu0, cpu1 time.Duration
	)
	sample := func(dst *time.Duration) func() {
		return func() {
			t, _, _ := procStats(int(pid.Load()))
			cpuMu.Lock()
			*dst = t
			cpuMu.Unlock()
		}
	}
	var acct accountant
	switch c.pipeline {
	case PipelineCount:
		acct = newCountAccount(o.Keys, n, lat, 0)
	case PipelineWindowed:
		acct = newWindowAccount(windowPlan{
			keys: o.Keys, phase1: n, total: n + lat, base: h.eventBase,
			window: o.Window.Milliseconds(), grace: o.Grace.Milliseconds(), final: c.final,
			partitions: int(o.Partitions),
		})
	case PipelineCPU:
		size, rounds := o.RecordSize, o.CPURounds
		acct = newIDAccount(n+lat, parseCPUValue, func(id int, v []byte) bool { return checkCPUOutput(id, v, size, rounds) })
	}
	obs, err := newObserver(h.base, out, n, lat, o.Warmup, acct, sample(&cpu0), sample(&cpu1))
	if err != nil {
		return runResult{}, err
	}
	octx, stopObs := context.WithCancel(ctx)
	go obs.run(octx)
	defer func() { stopObs(); obs.close() }()

	p, measured, err := h.start(ctx, c, id, in, out, stateDir, 0)
	if err != nil {
		return runResult{}, err
	}
	pid.Store(int64(p.pid()))
	go h.awaitGroup(octx, id, c.members(), obs.setGroupStable)
	stopped := false
	defer func() {
		if !stopped {
			_ = p.stop()
		}
	}()
	started := time.Now()
	if err := h.awaitReady(ctx, p, c.name); err != nil {
		return runResult{}, err
	}
	readyCPU, _, _ := procStats(p.pid())
	if err := h.await(ctx, p, obs.phase1Ch, obs, c.name, n); err != nil {
		return runResult{}, err
	}
	if h.calibrate {
		obs.mu.Lock()
		w, counted, bursts := obs.phase1At.Sub(obs.warmAt), obs.want1-obs.warmCount, obs.bursts
		if counted <= 0 || w <= 0 || obs.warmAt.IsZero() {
			// All at once: the time from the start bounds the rate.
			w, counted = obs.phase1At.Sub(started), obs.want1
		}
		obs.mu.Unlock()
		if w < o.MinWindow || bursts < minBursts {
			// Too short to measure: the caller redoes the run with a
			// bigger backlog, so the latency phase is not worth waiting.
			return runResult{window: w, bursts: bursts, rate: float64(counted) / max(w, time.Millisecond).Seconds(), short: true}, nil
		}
	}
	if lat > 0 {
		errc := make(chan error, 1)
		go func() { errc <- h.pace(ctx, in, n, lat, obs.sent) }()
		if err := h.await(ctx, p, obs.doneCh, obs, c.name, n+lat); err != nil {
			return runResult{}, err
		}
		if err := <-errc; err != nil {
			return runResult{}, fmt.Errorf("latency phase: %w", err)
		}
	}
	_, rss, _ := procStats(p.pid())
	stopped = true
	if err := p.stop(); err != nil {
		return runResult{}, err
	}

	obs.mu.Lock()
	defer obs.mu.Unlock()
	cpuMu.Lock()
	defer cpuMu.Unlock()
	r := runResult{peakRSS: rss, dups: obs.dups, missing: obs.want - obs.distinct, invalid: obs.unknown, measured: measured}
	window := obs.phase1At.Sub(obs.warmAt)
	counted := obs.want1 - obs.warmCount
	r.bursts = obs.bursts
	if counted <= 0 || window <= 0 || obs.warmAt.IsZero() {
		// Everything became visible at once (a tiny bench): measure from
		// the start instead, group join included.
		window, counted, cpu0 = obs.phase1At.Sub(started), obs.want1, readyCPU
	}
	r.window = window
	r.rate = float64(counted) / window.Seconds()
	r.cpu = max(cpu1-cpu0, 0)
	r.cpuPerRecord = r.cpu / time.Duration(counted)
	r.samples = len(obs.lat)
	r.p50, r.p99, r.p999 = latencyPercentiles(obs.lat)
	return r, nil
}

// streamsArgv is the command line of Kafka Streams case c.
func (h *harness) streamsArgv(c caseSpec, appID, in, out, stateDir string) []string {
	argv := c.streams.argv(h.o.Brokers, in, out, appID, c.guarantee, c.commit)
	if t := c.streamThreads(); t > 1 {
		argv = append(argv, "--threads", strconv.Itoa(t))
	}
	if c.tuned {
		argv = append(argv, "--tuned")
	}
	if c.pipeline == PipelineCPU {
		argv = append(argv, "--topology", PipelineCPU, "--rounds", strconv.Itoa(h.o.CPURounds))
	}
	if c.crash {
		argv = append(argv, "--instance-id", appID)
	}
	if c.txnStores {
		argv = append(argv, "--transactional-stores")
	}
	if stateful(c.pipeline) {
		argv = append(argv, "--topology", c.pipeline, "--state-dir", stateDir)
		if c.cache >= 0 {
			argv = append(argv, "--cache-max-bytes", strconv.FormatInt(c.cache, 10))
		}
	}
	if c.pipeline == PipelineWindowed {
		argv = append(argv, "--window-ms", strconv.FormatInt(h.o.Window.Milliseconds(), 10),
			"--grace-ms", strconv.FormatInt(h.o.Grace.Milliseconds(), 10))
		if c.final {
			argv = append(argv, "--suppress")
		}
	}
	return argv
}

// streamThreads is a Kafka Streams case's num.stream.threads: its worker
// count, else one per core when tuned, else one.
func (c caseSpec) streamThreads() int {
	switch {
	case c.workers > 0:
		return c.workers
	case c.tuned:
		return runtime.NumCPU()
	}
	return 1
}

// runID names a run's topics, consumer group and transactional ids.
func runID(c caseSpec, rep int) string {
	slug := strings.NewReplacer("@", "-", ".", "_", "/", "-").Replace(c.name)
	return fmt.Sprintf("eosbench-%s-%d-%06x", slug, rep+1, rand.Uint32()&0xffffff)
}

// stateDir is a fresh directory for the state of case c, which the caller
// removes; "" when c keeps no state on disk.
func (h *harness) stateDir(c caseSpec) (string, error) {
	if c.state != StatePebble && (c.engine != EngineStreams || !stateful(c.pipeline)) {
		return "", nil
	}
	dir, err := os.MkdirTemp("", "eosbench-state-")
	if err != nil {
		return "", fmt.Errorf("a state directory for %s: %w; set TMPDIR to a writable directory", c.name, err)
	}
	return dir, nil
}

// awaitReady waits for a started pipeline to say it runs.
func (h *harness) awaitReady(ctx context.Context, p pipeline, name string) error {
	readyWait := 2 * time.Minute
	select {
	case <-p.ready():
		return nil
	case <-p.exited():
		return stoppedEarly(p, name)
	case <-time.After(readyWait):
		return fmt.Errorf("%s did not start within %s", name, readyWait)
	case <-ctx.Done():
		return ctx.Err()
	}
}

// await waits until done is closed, failing if the pipeline exits, ctx
// ends or RunTimeout passes.
func (h *harness) await(ctx context.Context, p pipeline, done <-chan struct{}, obs *observer, name string, want int) error {
	t := time.NewTimer(h.o.RunTimeout)
	defer t.Stop()
	select {
	case <-done:
		return nil
	case <-p.exited():
		return stoppedEarly(p, name)
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		got, _ := obs.progress()
		return fmt.Errorf("%s: a read_committed consumer saw %d of %d records within %s", name, got, want, h.o.RunTimeout)
	}
}

// stoppedEarly explains a pipeline that ended before its work was done.
func stoppedEarly(p pipeline, name string) error {
	if err := p.stop(); err != nil {
		return err
	}
	return fmt.Errorf("%s stopped before its output was complete", name)
}

// start launches case c's pipeline on topics in and out, its state (if
// any) in stateDir; restore > 0 makes a worker report when its stores
// restored that many changelog records.
func (h *harness) start(ctx context.Context, c caseSpec, appID, in, out, stateDir string, restore int) (pipeline, string, error) {
	if c.engine == EngineStreams {
		argv := h.streamsArgv(c, appID, in, out, stateDir)
		if restore > 0 {
			argv = append(argv, "--restore-records", strconv.Itoa(restore))
		}
		ch, err := startChild(c.name, argv, nil)
		return ch, "child process (JVM)", err
	}
	spec := WorkerSpec{
		Case: c.kind, Brokers: h.o.Brokers, TLS: h.cfg.TLS,
		SASLMechanism: h.cfg.SASL.Mechanism, SASLUser: h.cfg.SASL.Username,
		Input: in, Output: out, AppID: appID,
		CommitInterval: c.commit, BatchRecords: h.o.BatchRecords, MaxMemory: h.o.MaxMemory,
		Pipeline: c.pipeline, State: c.state, StateDir: stateDir, RestoreRecords: restore,
		Metrics: c.metrics, Traced: c.traced, Workers: c.workers, Adaptive: c.adaptive,
	}
	if c.pipeline == PipelineCPU {
		spec.Rounds = h.o.CPURounds
	}
	if c.pipeline == PipelineWindowed {
		spec.Window, spec.Grace, spec.Final = h.o.Window, h.o.Grace, c.final
	}
	if c.dedup != "" {
		// The run's id names its ids in Redis, so that no run sees
		// another's.
		spec.Dedup, spec.DedupName, spec.DedupEntries = c.dedup, appID, h.records+h.latencyRecords()
		spec.RedisURL = h.o.RedisURL
	}
	if c.pipeline == PipelinePostgres {
		spec.Case, spec.Table, spec.PostgresURL = c.name, pgTable(appID), h.o.PostgresURL
	}
	if len(h.o.Worker) == 0 {
		resetPeakRSS()
		return startInProcess(ctx, spec), "whole process: pipeline, load generator, output reader" + h.brokerNote(), nil
	}
	js, err := specJSON(spec)
	if err != nil {
		return nil, "", err
	}
	argv := append(append([]string(nil), h.o.Worker...), "--spec", js)
	var env []string
	if h.cfg.SASL.Password != "" {
		env = append(env, EnvSASLPassword+"="+h.cfg.SASL.Password)
	}
	if spec.RedisURL != "" {
		env = append(env, EnvRedisURL+"="+spec.RedisURL)
	}
	if spec.PostgresURL != "" {
		env = append(env, EnvPostgresURL+"="+spec.PostgresURL)
	}
	ch, err := startChild(c.name, argv, env)
	return ch, "child process", err
}

func (h *harness) brokerNote() string {
	if strings.HasPrefix(h.broker, "embedded") {
		return ", embedded broker"
	}
	return ""
}

func (h *harness) createTopics(ctx context.Context, topics ...string) error {
	cctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	if err := kafkautil.CreateTopics(cctx, h.adm, h.o.Partitions, -1, nil, topics...); err != nil {
		return fmt.Errorf("creating topics %v: %w", topics, err)
	}
	return nil
}

func (h *harness) deleteTopics(topics ...string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, _ = h.adm.DeleteTopics(ctx, topics...)
}

func key(id, keys int) []byte { return []byte("k" + strconv.Itoa(id%keys)) }

// seed produces records 0..n-1 as fast as the broker takes them.
func (h *harness) seed(ctx context.Context, topic string, n int) error {
	return kafkautil.ProduceAll(ctx, h.cl, n, func(id int) *kgo.Record {
		return &kgo.Record{Topic: topic, Key: key(id, h.o.Keys), Value: h.value(id, time.Time{}), Timestamp: h.eventTime(id)}
	})
}

// value is input record id's value, carrying sent unless it is zero: JSON
// for the cpu pipeline, id=<n>;... otherwise.
func (h *harness) value(id int, sent time.Time) []byte {
	if h.o.Pipeline == PipelineCPU {
		return cpuValue(id, sent, h.o.RecordSize)
	}
	return value(id, sent, h.o.RecordSize)
}

// eventTime is record id's timestamp: the run's event base plus id ms, or
// zero (the time it is produced) when the run has no event base.
func (h *harness) eventTime(id int) time.Time {
	if h.eventBase == 0 {
		return time.Time{}
	}
	return time.UnixMilli(h.eventBase + int64(id))
}

// eventBase is the event time (unix ms) of record 0 of a run of n records
// starting now: a multiple of window, so that windows hold whole runs of
// ids, and far enough back that every record's event time is past, as a
// broker checking timestamps against its clock expects.
func eventBase(now time.Time, n int, window time.Duration) int64 {
	w := window.Milliseconds()
	b := now.UnixMilli() - int64(n) - w
	return b - b%w
}

// suppressChangelog is the changelog Kafka Streams gives the buffer of the
// windowed pipeline's final results (Suppressed.withName("final")).
func suppressChangelog(appID string) string { return appID + "-final-store-changelog" }

// pace produces n latency-phase records, ids from first on, at Rate per
// second, each carrying its send time (also told to noteSent), with its own
// client so that no batching delay of the seeding client is counted.
func (h *harness) pace(ctx context.Context, topic string, first, n int, noteSent func(id int, t time.Time)) error {
	cl, err := kgo.NewClient(append(append([]kgo.Opt(nil), h.base...), kgo.ProducerLinger(0))...)
	if err != nil {
		return err
	}
	defer cl.Close()
	var failed kafkautil.FirstError
	promise := failed.Promise
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	start := time.Now()
	sent := 0
	for sent < n {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
		due := min(n, int(time.Since(start).Seconds()*float64(h.o.Rate))+1)
		for ; sent < due; sent++ {
			id := first + sent
			now := time.Now()
			noteSent(id, now)
			ts := now
			if h.eventBase != 0 {
				ts = h.eventTime(id)
			}
			cl.Produce(ctx, &kgo.Record{Topic: topic, Key: key(id, h.o.Keys), Value: h.value(id, now), Timestamp: ts}, promise)
		}
	}
	if err := cl.Flush(ctx); err != nil {
		return err
	}
	return failed.Take()
}
