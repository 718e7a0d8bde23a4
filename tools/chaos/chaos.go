// Package chaos runs a sample pipeline as separate worker processes in one
// consumer group, injects faults while they work — SIGKILLs in the middle
// of transactions, SIGTERMs, processing errors that abort transactions,
// workers added and removed, hard broker restarts — and judges the output
// read_committed, during the run and after it. It is the engine behind
// `eosctl verify`, modelled on Apache Kafka's transactions_test.py.
//
// The stateless pipeline upper-cases each record and is judged record by
// record; the counting pipeline counts each key in a state store and is
// judged key by key: its output must be 1, 2, … n_k and its changelog must
// end at n_k. The event-time pipelines, a windowed count with final
// results only, a stream-stream join and an outer join, are judged window
// by window, pair by pair and lonely record by lonely record against
// results computed from the seed in plain Go. The
// dedup pipeline runs a side effect in Redis behind topology.Dedup and is
// judged by how often each record's effect ran, within one repeated
// (mark-after) or lost (mark-before) effect per SIGKILL.
//
// A verifier that cannot fail proves nothing: under at-least-once the same
// chaos must show duplicates (repeated or lost counts, for the counting
// pipeline), and under at-most-once missing records.
package chaos

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/eosflow/eosflow/config"
	"github.com/eosflow/eosflow/tools/verdict"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Options shape one verification run. Zero values take the defaults
// named on each field.
type Options struct {
	// Exe is the eosctl binary: workers run as `Exe verify worker`, the
	// embedded broker as `Exe dev broker`. Required.
	Exe string
	// WorkerArgs are extra flags for every worker (TLS, SASL, --config).
	WorkerArgs []string
	// WorkerEnv is extra environment for every worker (e.g. a password).
	WorkerEnv []string
	// Brokers is the cluster to run against; empty starts an embedded
	// broker as a child process, which allows no BrokerRestarts (see
	// ErrEmbeddedRestarts).
	Brokers []string
	// BrokerRestartCmd hard-restarts the cluster in Brokers through sh
	// and returns once it serves again. Needed for BrokerRestarts with
	// Brokers.
	BrokerRestartCmd string
	// BrokerRestartDir is where BrokerRestartCmd and NetClusterCmd run;
	// default the current directory.
	BrokerRestartDir string
	// NetClusterCmd is the network-namespace harness that runs the
	// cluster in Brokers, integration/kafka/netcluster.sh, as a command
	// line that bash runs with the harness's arguments appended, e.g.
	// "EOS_KAFKA_PORT=29800 /src/integration/kafka/netcluster.sh".
	// NetCuts, Pauses and CoordinatorCuts need it (see ErrNoNetCluster).
	NetClusterCmd string
	// Base holds TLS, SASL and timeouts for the verifier's own clients;
	// its Brokers are ignored.
	Base config.Config
	// Guarantee the workers run with; default exactly-once.
	Guarantee config.Guarantee
	// Pipeline the workers run; default PipelineUpper.
	Pipeline PipelineKind
	// State is the store engine of the stateful pipelines (PipelineCount,
	// PipelineWindowed, PipelineJoin, PipelineOuterJoin, PipelineGlobalJoin); default
	// StateMemory.
	// Each worker keeps its stores in its own directory under the run's
	// log directory, across its restarts; the run removes them at its end.
	State StateKind
	// GroupBy is what PipelineCount counts by; default GroupingKey, the
	// input's key. GroupingValue seeds every record under a key of its
	// own with the counting key as its value, so that a key's records are
	// spread over all input partitions, and the workers count through a
	// repartition topic (GroupedCountPipeline).
	GroupBy Grouping
	// TableLag is how long after the global table's last update became
	// readable PipelineGlobalJoin's probe orders may still join an older
	// row; a wave of them produced later must come out current (see
	// ProblemGlobalStale). Default the runtime's documented bound for the
	// workers' settings, max(connect_timeout, the stall bound): 30s with
	// the defaults.
	TableLag time.Duration
	// TableSnapshot has PipelineGlobalJoin's workers join a copy of the
	// table read once at their start, never kept current
	// (GlobalSnapshotPipeline): the negative control of the probe
	// phase, which must fail with ProblemGlobalStale.
	TableSnapshot bool
	// RedisURL is the Redis of PipelineDedup: its dedup store and the
	// hash its effects count in. The workers get it in their environment
	// (EnvRedisURL), not on their command line. Required by PipelineDedup.
	RedisURL string
	// DedupMode is when PipelineDedup marks ids; default DedupAfter.
	DedupMode DedupMode
	// Records to seed; default 100,000.
	Records int
	// Partitions of the input and output topics; default 6.
	Partitions int32
	// Keys the records are spread over; default 1,000. PipelineWindowed
	// seeds Records-Partitions records over them and one per partition
	// that closes every window; PipelineJoin seeds Records orders and
	// payments in all; PipelineOuterJoin Records-Partitions of them and
	// one closing record per partition.
	Keys int
	// Workers in the group at the start; default 3.
	Workers int
	// ProcessWorkers is workers: N of each worker process (EOS_WORKERS):
	// each process runs that many sessions, members of the group as
	// <id>-0 … <id>-N-1, and its Rate is shared by them. Default 1.
	ProcessWorkers int
	// GroupProtocol is the workers' group_protocol (EOS_GROUP_PROTOCOL);
	// default classic.
	GroupProtocol config.GroupProtocol
	// Scale, when set, runs waves of worker processes instead of the
	// fault plan, e.g. 1, 6, 2: the run starts Scale[0] processes, and
	// each time a step has settled (the group holds every input partition
	// over exactly that step's members, and every partition committed
	// again) and run for ScaleDwell, starts or SIGTERMs processes (the
	// newest first) to reach the next count. Processes leave the group
	// when they stop (leave_group_on_close). Result.Steps has each step's
	// timings. Faults and injected aborts cannot be combined with it.
	Scale []int
	// ScaleDwell is how long a settled step runs before the next; default
	// 5s. A scale run's batches are capped at the runtime's
	// max_batch_records unless BatchRecords says otherwise, since no
	// fault needs to land inside them.
	ScaleDwell time.Duration
	// SettleTimeout bounds each step of Scale: a step not settled by then
	// fails the run and the next begins; default 2m.
	SettleTimeout time.Duration
	// InputRate is how many records per second a scale run writes to the
	// input while its steps run, a live stream that keeps every
	// partition busy; the workers run unpaced, and Records caps the
	// input. Default 1000.
	InputRate int
	// Kills is how many times a worker is SIGKILLed mid-batch and
	// restarted under the same instance id.
	Kills int
	// Terms is how many times a worker is SIGTERMed and restarted.
	Terms int
	// BrokerRestarts is how many hard restarts of the cluster in Brokers
	// happen, through BrokerRestartCmd; none on the embedded broker.
	BrokerRestarts int
	// Rebalances is how many times a worker is added or removed, in turn.
	Rebalances int
	// NetCuts is how many times one broker, chosen at random, is cut off
	// for CutFor and then healed, through NetClusterCmd: in turn from the
	// clients (cut-clients), from the other brokers (cut-peers) and from
	// everything (isolate: its link down).
	NetCuts int
	// Pauses is how many times one broker, chosen at random, is stopped
	// with SIGSTOP for PauseFor and then continued (SIGCONT), through
	// NetClusterCmd: a long garbage-collection pause.
	Pauses int
	// CoordinatorCuts is how many times, through NetClusterCmd, the
	// broker that coordinates the group's transactions (those of a
	// running worker's transactional id) or the group itself, in turn, is
	// cut from the clients for CutFor and then healed.
	CoordinatorCuts int
	// CutFor is how long a network cut or coordinator cut holds before
	// it is healed; default 12s.
	CutFor time.Duration
	// PauseFor is how long a paused broker stays stopped; default the
	// longer of SessionTimeout and the workers' transaction timeout
	// (config.DefaultTransactionTimeout), plus 5s, so that a pause
	// outlasts both.
	PauseFor time.Duration
	// AbortRate is the probability that a batch fails with an injected
	// processing error; the worker then stops and is restarted.
	AbortRate float64
	// Rate is each worker's pace in records per second; 0 picks one that
	// leaves about two seconds of processing between faults.
	Rate int
	// CommitDelay is how long a worker pauses before each batch ends, its
	// outputs produced; default 20ms.
	CommitDelay time.Duration
	// BatchRecords caps the records in one batch; default 500.
	BatchRecords int
	// SessionTimeout is the workers' group session timeout; default 6s.
	SessionTimeout time.Duration
	// Duration bounds the whole run; default 15m.
	Duration time.Duration
	// DrainTimeout bounds each read of the output (and of a changelog)
	// after the workers stop; past it the run fails naming what the read
	// waited for, overriding the default 2m.
	DrainTimeout time.Duration
	// Seed makes the fault plan repeatable; 0 picks one at random.
	Seed uint64
	// KeepTopics keeps the topics and the group on the cluster afterwards.
	KeepTopics bool
	// LogDir receives the workers' and the broker's logs; empty uses a
	// temporary directory, removed when the run passes.
	LogDir string
	// Progress is called about ten times a second while workers run.
	// Progress and Events may be called from different goroutines, but
	// never at once: a callback needs no lock of its own, even one that
	// draws on the same terminal as the other.
	Progress func(Progress)
	// Events receives one line per fault and notable event; see Progress
	// for when it is called.
	Events func(string)
}

// Progress is a snapshot of a running verification.
type Progress struct {
	Records        int           // seeded
	Consumed       int           // input offsets the group committed
	LiveRead       int           // output records the live reader saw
	Kills          int           // worker SIGKILLs so far
	BrokerRestarts int           // broker restarts so far
	Faults         int           // faults injected so far
	FaultsPlanned  int           // faults planned in all
	Elapsed        time.Duration // since the workers started
}

// Result is the verdict of a run and what was injected to get it.
type Result struct {
	verdict.Verdict
	// Counts is the key-by-key verdict of PipelineCount; nil for
	// PipelineUpper, whose ids Verdict judges instead.
	*verdict.Counts
	// WindowVerdict is the window-by-window verdict of PipelineWindowed;
	// nil for the other pipelines.
	*WindowVerdict
	// JoinVerdict is the pair-by-pair verdict of PipelineJoin; nil for
	// the other pipelines.
	*JoinVerdict
	// LonelyVerdict is the verdict of PipelineOuterJoin's records emitted
	// alone (its pairs are in JoinVerdict); nil for the other pipelines.
	*LonelyVerdict
	// GlobalVerdict is the order-by-order verdict of PipelineGlobalJoin;
	// nil for the other pipelines.
	*GlobalVerdict
	// DedupVerdict is the id-by-id verdict of PipelineDedup's effects;
	// nil for the other pipelines, whose output alone is judged.
	*DedupVerdict
	Pipeline string `json:"pipeline"`
	State    string `json:"state,omitempty"` // the store engine of the counting pipeline
	// GroupBy is what the counting pipeline counted by: "key" (the input
	// key) or "value" (through Repartition).
	GroupBy string `json:"group_by,omitempty"`
	// Pass is true when the output is the input exactly once, in order
	// per key (for the counting pipeline: every key's counts are 1, 2, …
	// n_k and its changelog ends at n_k), the live reader saw no duplicate,
	// every planned fault was injected in time, and no worker stopped on
	// its own.
	Pass     bool     `json:"pass"`
	Problems []string `json:"problems,omitempty"` // why Pass is false, in words
	// Failed names the checks behind Problems, one per entry, so scripts
	// and tests can match a check without parsing its wording.
	Failed    []Problem `json:"failed,omitempty"`
	Guarantee string    `json:"guarantee"`
	Broker    string    `json:"broker"`
	Input     string    `json:"input_topic"`
	Output    string    `json:"output_topic"`
	Changelog string    `json:"changelog_topic,omitempty"` // the counting pipeline's store changelog
	Workers   int       `json:"workers"`
	// Repartition is the topic the count by value goes through between
	// its two sub-topologies.
	Repartition string `json:"repartition_topic,omitempty"`

	WorkerKills    int `json:"worker_kills"`
	WorkerTerms    int `json:"worker_terms"`
	WorkersAdded   int `json:"workers_added"`
	WorkersRemoved int `json:"workers_removed"`
	BrokerRestarts int `json:"broker_restarts"`
	// WedgeRestarts counts broker restarts the verifier added, beyond the
	// planned ones, to end a coordinator wedge (see wedgeWatch).
	WedgeRestarts int `json:"wedge_restarts,omitempty"`
	// NetCuts, Pauses and CoordinatorCuts count the network faults that
	// fired (NetFault.Fired) of each kind.
	NetCuts         int `json:"net_cuts"`
	Pauses          int `json:"pauses"`
	CoordinatorCuts int `json:"coordinator_cuts"`
	// NetFaults lists every network fault made, in order, with the
	// evidence that it held and the group's recovery after it.
	NetFaults []NetFault `json:"net_faults,omitempty"`
	// Recovery sums up NetFaults by action.
	Recovery       []Recovery `json:"recovery,omitempty"`
	InjectedAborts int        `json:"injected_aborts"` // workers stopped by an injected processing error
	// WorkerCrashes counts the worker processes that stopped for a
	// reason the verifier did not inject (e.g. the broker was down too
	// long, or the worker was fenced); each is in WorkerFailures and
	// fails the run. They are restarted all the same, so the run ends.
	WorkerCrashes int `json:"worker_crashes"`
	WorkerStarts  int `json:"worker_starts"` // worker processes started, restarts included
	// WorkerFailures names each worker stop counted in WorkerCrashes,
	// with its error.
	WorkerFailures []WorkerFailure `json:"worker_failures,omitempty"`
	// RestartToFirstCommit is how long the workers restarted after each
	// SIGKILL took from their process start to their first committed
	// batch.
	RestartToFirstCommit RestartLatency `json:"restart_to_first_commit"`

	// AbortedTransactions adds up the aborted batches that workers
	// reported when they exited on their own (SIGTERM, injected errors,
	// crashes). A SIGKILLed worker reports nothing: its open transaction
	// is aborted by the broker when its successor starts, and counts in
	// AbortedRecords instead.
	AbortedTransactions uint64 `json:"aborted_transactions"`
	// AbortedRecords is how many output records are in the log but hidden
	// from read_committed: written by aborted transactions (exactly-once
	// only; -1 when not measured).
	AbortedRecords int `json:"aborted_records"`

	LiveRead       int `json:"live_read"`       // records the concurrent read_committed reader saw
	LiveDuplicates int `json:"live_duplicates"` // ... of which it had seen before

	FaultsPlanned     int  `json:"faults_planned"`
	FaultsNotInjected int  `json:"faults_not_injected"`
	TimedOut          bool `json:"timed_out"`
	// UnservedGroup, when the run timed out, says that the group's
	// coordinator served no offset fetch at the end: a broker fault.
	UnservedGroup string  `json:"unserved_group,omitempty"`
	Rate          int     `json:"rate"` // per worker, records per second; 0 unlimited
	Seed          uint64  `json:"seed"`
	Seconds       float64 `json:"seconds"` // seeding to verdict
	LogDir        string  `json:"log_dir,omitempty"`

	// Payments is the second input of PipelineJoin; Input holds the
	// orders.
	Payments string `json:"payments_topic,omitempty"`
	// Table is the topic of PipelineGlobalJoin's global table, which the
	// verifier updates while the workers run.
	Table string `json:"table_topic,omitempty"`

	// ProcessWorkers is the sessions each worker process ran, and
	// GroupProtocol their group protocol.
	ProcessWorkers int    `json:"process_workers"`
	GroupProtocol  string `json:"group_protocol,omitempty"`
	// GroupProtocolSeen is the protocol a scale run saw the group run
	// (the API that described it), which tells a broker that fell back to
	// the classic protocol from one that did not.
	GroupProtocolSeen string `json:"group_protocol_seen,omitempty"`
	// ScalePlan is Options.Scale, and Steps the steps of the scale run
	// that began, in order.
	ScalePlan []int       `json:"scale,omitempty"`
	InputRate int         `json:"input_rate,omitempty"` // records per second written during a scale run
	Steps     []ScaleStep `json:"scale_steps,omitempty"`
}

// WorkerFailure is one worker process that stopped for a reason the
// verifier did not inject: not its SIGKILL, not a clean stop after its
// SIGTERM, not an injected processing error. Any of them fails the run,
// because a pipeline that stops by itself needs a human.
type WorkerFailure struct {
	Worker    string     `json:"worker"`
	Pid       int        `json:"pid"`
	Exit      int        `json:"exit"`             // exit status; -1 when a signal ended it
	Signal    string     `json:"signal,omitempty"` // that signal
	Stopped   StopReason `json:"stopped,omitempty"`
	Error     string     `json:"error"`      // its error, or what the verifier saw
	AtSeconds float64    `json:"at_seconds"` // since the workers started
}

// stopGrace is how long workers get to stop after the run's SIGTERM
// before they are SIGKILLed, which fails the run.
const stopGrace = 30 * time.Second

// Validate checks the options; errors name the flag of `eosctl verify`.
func (o Options) Validate() error {
	switch {
	case o.Exe == "":
		return fmt.Errorf("chaos: no eosctl binary to run workers with")
	case o.Records < 0, o.Partitions < 0, o.Keys < 0, o.Workers < 0, o.Rate < 0, o.BatchRecords < 0:
		return fmt.Errorf("--records, --partitions, --keys, --workers, --rate and --batch-records must not be negative")
	case o.Kills < 0, o.Terms < 0, o.BrokerRestarts < 0, o.Rebalances < 0:
		return fmt.Errorf("--kills, --terms, --broker-restarts and --rebalances must not be negative")
	case o.NetCuts < 0, o.Pauses < 0, o.CoordinatorCuts < 0, o.CutFor < 0, o.PauseFor < 0:
		return fmt.Errorf("--net-cuts, --pauses, --coordinator-cuts, --cut-for and --pause-for must not be negative")
	case o.counts().network() > 0 && (o.NetClusterCmd == "" || len(o.Brokers) == 0):
		return ErrNoNetCluster
	case o.AbortRate < 0 || o.AbortRate > 1:
		return fmt.Errorf("--abort-rate %v is a probability per batch; give a value from 0 to 1", o.AbortRate)
	case o.Guarantee != "" && !o.Guarantee.Valid():
		return fmt.Errorf("--guarantee must be one of %v, got %q", config.Guarantees(), o.Guarantee)
	case len(o.Brokers) == 0 && o.BrokerRestarts > 0:
		return ErrEmbeddedRestarts
	case len(o.Brokers) > 0 && o.BrokerRestarts > 0 && o.BrokerRestartCmd == "":
		return fmt.Errorf("--broker-restarts against --brokers needs --broker-restart-cmd, e.g. \"integration/kafka/kafka.sh restart --hard\"")
	case o.CommitDelay < 0, o.SessionTimeout < 0, o.Duration < 0, o.DrainTimeout < 0:
		return fmt.Errorf("--commit-delay, --session-timeout, --duration and --drain-timeout must not be negative")
	case o.Pipeline != "" && !o.Pipeline.known():
		return fmt.Errorf("--pipeline must be one of %v, got %q", pipelines, o.Pipeline)
	case o.State != "" && o.State != StateMemory && o.State != StatePebble:
		return fmt.Errorf("--state must be %s or %s, got %q", StateMemory, StatePebble, o.State)
	case o.State != "" && !o.Pipeline.stateful():
		return fmt.Errorf("--state %s needs --pipeline %s, %s, %s, %s or %s: the %s pipeline keeps no state",
			o.State, PipelineCount, PipelineWindowed, PipelineJoin, PipelineOuterJoin, PipelineGlobalJoin, o.Pipeline)
	case o.GroupBy != "" && o.GroupBy != GroupingKey && o.GroupBy != GroupingValue:
		return fmt.Errorf("--group-by must be %s (count by the input key) or %s (count by value, through a repartition topic), got %q",
			GroupingKey, GroupingValue, o.GroupBy)
	case o.GroupBy != "" && o.Pipeline != PipelineCount:
		return fmt.Errorf("--group-by %s needs --pipeline %s: the %s pipeline groups nothing", o.GroupBy, PipelineCount, o.Pipeline)
	case o.Pipeline == PipelineDedup && o.RedisURL == "":
		return fmt.Errorf("--sink redis-dedup needs --redis-url (or %s), e.g. $(integration/redis/redis.sh url) after integration/redis/redis.sh start", EnvRedisURL)
	case o.DedupMode != "" && !o.DedupMode.valid():
		return fmt.Errorf("--dedup-mode must be one of %v, got %q", dedupModes, o.DedupMode)
	case o.DedupMode != "" && o.Pipeline != PipelineDedup:
		return fmt.Errorf("--dedup-mode %s needs --sink redis-dedup", o.DedupMode)
	case o.TableLag < 0:
		return fmt.Errorf("--table-lag must not be negative")
	case (o.TableLag != 0 || o.TableSnapshot) && o.Pipeline != PipelineGlobalJoin:
		return fmt.Errorf("--table-lag and --table-snapshot need --pipeline %s: only it joins a global table", PipelineGlobalJoin)
	case o.Pipeline.stateful() && o.Guarantee == config.AtMostOnce:
		return fmt.Errorf("--pipeline %s keeps state, which the runtime refuses under %s (its changelog must commit with its input offsets); use exactly-once or at-least-once",
			o.Pipeline, config.AtMostOnce)
	}
	if err := o.validateScale(); err != nil {
		return err
	}
	return o.validateEvents()
}

func (o *Options) defaults() {
	o.scaleDefaults()
	if o.Guarantee == "" {
		o.Guarantee = config.ExactlyOnce
	}
	if o.Pipeline == "" {
		o.Pipeline = PipelineUpper
	}
	if o.Pipeline.stateful() && o.State == "" {
		o.State = StateMemory
	}
	if o.Pipeline == PipelineDedup && o.DedupMode == "" {
		o.DedupMode = DedupAfter
	}
	if o.Pipeline == PipelineCount && o.GroupBy == "" {
		o.GroupBy = GroupingKey
	}
	if o.Records == 0 {
		o.Records = 100_000
	}
	if o.Partitions == 0 {
		o.Partitions = 6
	}
	if o.Keys == 0 {
		o.Keys = 1000
	}
	if o.Workers == 0 {
		o.Workers = 3
	}
	if o.CommitDelay == 0 {
		o.CommitDelay = 20 * time.Millisecond
	}
	if o.BatchRecords == 0 {
		o.BatchRecords = 500
	}
	if o.SessionTimeout == 0 {
		o.SessionTimeout = 6 * time.Second
	}
	if o.Duration == 0 {
		o.Duration = 15 * time.Minute
	}
	if o.DrainTimeout == 0 {
		o.DrainTimeout = 2 * time.Minute
	}
	if o.TableLag == 0 && o.Pipeline == PipelineGlobalJoin {
		o.TableLag = tableLagBound(o.Base, o.SessionTimeout)
	}
	if o.Seed == 0 {
		o.Seed = rand.Uint64()
	}
	o.NetDefaults()
	if o.Events == nil {
		o.Events = func(string) {}
	}
}

// Run seeds the input, runs the workers under the planned faults until the
// group has consumed every record (or Duration passes), stops them, and
// judges the output. An error means the run could not be carried out; a
// run that found lost or repeated records returns a Result with Pass false.
func Run(ctx context.Context, o Options) (res Result, err error) {
	if err := o.Validate(); err != nil {
		return res, err
	}
	o.defaults()
	r := newRun(o)
	defer func() {
		r.cleanUp()
		if r.tempLogs && err == nil && r.res.Pass {
			os.RemoveAll(r.logDir)
			r.res.LogDir = ""
		}
		res = r.res
	}()
	err = r.execute(ctx)
	return r.res, err
}

// finalRead reads topic read_committed after the workers stopped, until
// it holds want records and every position readable when it started, at
// most o.DrainTimeout. It says what it waits for, and past the bound it
// fails the run with what it reached (a *verdict.UnfinishedError) rather
// than hold it: a log that cannot deliver what the live reader saw is a
// finding, not a reason to wait on.
func finalRead(ctx context.Context, o Options, base []kgo.Opt, topic string, want int, event func(string, ...any)) ([]*kgo.Record, error) {
	event("reading %s read_committed: at least %d records and every partition's last stable offset, at most %s", topic, want, o.DrainTimeout)
	recs, err := verdict.DrainWithin(ctx, base, topic, want, time.Second, o.DrainTimeout)
	if err != nil {
		return recs, fmt.Errorf("chaos: %w", err)
	}
	return recs, nil
}

// Problem names one check a run can fail. The names are stable; the
// words in Result.Problems may change.
type Problem string

// The checks of a run, named as they appear in Result.Failed and in the
// "failed" list of `eosctl verify -o json`.
const (
	// ProblemMissing: input records never reached the output. Expected of
	// the at-most-once control, a failure under every other guarantee.
	ProblemMissing Problem = "missing"
	// ProblemDuplicates: output records are repeated. Expected of the
	// at-least-once control, a failure under exactly-once.
	ProblemDuplicates Problem = "duplicates"
	// ProblemAtMostOnceRepeated: a run under at-most-once repeated a
	// record. That guarantee may lose records but never repeat one, so
	// this is a broken guarantee, not the control's expected failure.
	ProblemAtMostOnceRepeated Problem = "at_most_once_repeated"
	// ProblemCountGaps: a key's counts skipped a value, a lost update
	// (counting pipeline).
	ProblemCountGaps Problem = "count_gaps"
	// ProblemCountRepeats: a key's count was emitted again, or an input
	// was counted twice (counting pipeline).
	ProblemCountRepeats Problem = "count_repeats"
	// ProblemCountFinalMismatch: a key's last count is not its number of
	// input records (counting pipeline).
	ProblemCountFinalMismatch Problem = "count_final_mismatch"
	// ProblemChangelogMismatch: a key's last value in the store's
	// changelog is not its number of input records (counting pipeline).
	ProblemChangelogMismatch Problem = "changelog_mismatch"
	// ProblemOutOfOrder: a key's records reached the output out of order.
	ProblemOutOfOrder Problem = "out_of_order"
	// ProblemUnknown: output records carry no seeded id.
	ProblemUnknown Problem = "unknown_records"
	// ProblemLiveDuplicates: the live read_committed reader saw a record
	// twice, repeated or from an aborted transaction.
	ProblemLiveDuplicates Problem = "live_duplicates"
	// ProblemLiveUnknown: the live reader saw records with no seeded id.
	ProblemLiveUnknown Problem = "live_unknown_records"
	// ProblemTimedOut: the group did not consume the input in time.
	ProblemTimedOut Problem = "timed_out"
	// ProblemFaultsNotInjected: the input ran out before every planned
	// fault fired, so the run proves less than it was asked to.
	ProblemFaultsNotInjected Problem = "faults_not_injected"
	// ProblemWorkerStopped: a worker stopped for a reason the verifier
	// did not inject (see Result.WorkerFailures).
	ProblemWorkerStopped Problem = "worker_stopped"
	// ProblemNetFaultFailed: a network fault did not take, hold or heal
	// as the harness's status showed it (see NetFault.Error).
	ProblemNetFaultFailed Problem = "net_fault_failed"
)

// Fails reports whether the run failed check p, for tests and callers
// that expect one failure (a negative control) and no other.
func (r Result) Fails(p Problem) bool { return slices.Contains(r.Failed, p) }

// problems names every check the run fails and says why in words.
func problems(r Result, liveUnknown int) ([]Problem, []string) {
	var (
		names []Problem
		words []string
	)
	add := func(cond bool, name Problem, format string, a ...any) {
		if cond {
			names = append(names, name)
			words = append(words, fmt.Sprintf(format, a...))
		}
	}
	add(r.Missing > 0, ProblemMissing, "%d input records never reached the output", r.Missing)
	add(r.Duplicates > 0, ProblemDuplicates, "%d output records are duplicates", r.Duplicates)
	add(r.Guarantee == string(config.AtMostOnce) && (r.Duplicates > 0 || r.LiveDuplicates > 0), ProblemAtMostOnceRepeated,
		"at-most-once repeated records (%d duplicates in the output, %d seen live): it may lose records but must never repeat one",
		r.Duplicates, r.LiveDuplicates)
	if c := r.Counts; c != nil {
		add(c.CountGaps > 0, ProblemCountGaps, "%d counts were skipped: lost updates", c.CountGaps)
		add(c.CountRepeats > 0, ProblemCountRepeats, "%d output counts repeat one their key had reached: double counts", c.CountRepeats)
		add(c.CountFinalMismatch > 0, ProblemCountFinalMismatch, "%d of %d keys end on a count other than their number of input records",
			c.CountFinalMismatch, c.CountKeys)
		add(c.ChangelogMismatch > 0, ProblemChangelogMismatch, "%d of %d keys end in the changelog %s on a value other than their number of input records",
			c.ChangelogMismatch, c.CountKeys, r.Changelog)
	}
	eventProblems(r, add)
	dedupProblems(r, add)
	add(r.OutOfOrder > 0, ProblemOutOfOrder, "%d output records came before an earlier record of their key", r.OutOfOrder)
	add(r.Unknown > 0, ProblemUnknown, "%d output records carry no seeded id", r.Unknown)
	add(r.LiveDuplicates > 0, ProblemLiveDuplicates, "the live read_committed reader saw %d duplicates (repeated or aborted records)", r.LiveDuplicates)
	add(liveUnknown > 0, ProblemLiveUnknown, "the live read_committed reader saw %d records with no seeded id", liveUnknown)
	add(r.TimedOut && r.UnservedGroup == "", ProblemTimedOut, "the group did not consume the input (and the repartition topic, when counting by value) within --duration; raise it or lower --records")
	add(r.TimedOut && r.UnservedGroup != "", ProblemTimedOut, "%s", r.UnservedGroup)
	add(r.FaultsNotInjected > 0, ProblemFaultsNotInjected, "only %d of %d planned faults were injected before the input ran out; lower --rate or raise --records",
		r.FaultsPlanned-r.FaultsNotInjected, r.FaultsPlanned)
	scaleProblems(r, add)
	netProblems(r, add)
	add(len(r.WorkerFailures) > 0, ProblemWorkerStopped, "%d worker processes stopped on their own, not by an injected fault: %s",
		len(r.WorkerFailures), describeFailures(r.WorkerFailures, 3))
	return names, words
}

// describeFailures names the first n failures with their errors, each cut
// to a readable length; worker_failures in the JSON result has them all.
func describeFailures(fs []WorkerFailure, n int) string {
	var parts []string
	for _, f := range fs[:min(n, len(fs))] {
		why := f.Error
		if len(why) > 300 {
			why = why[:300] + "…"
		}
		parts = append(parts, fmt.Sprintf("%s (pid %d, at %.1fs) %s", f.Worker, f.Pid, f.AtSeconds, why))
	}
	if len(fs) > n {
		parts = append(parts, fmt.Sprintf("and %d more (see worker_failures)", len(fs)-n))
	}
	return strings.Join(parts, "; ")
}

// workerNum is the number in a worker id, for ordering.
func workerNum(id string) int {
	n, _ := strconv.Atoi(strings.TrimPrefix(id, "worker-"))
	return n
}

// pollConsumed keeps consumed at the number of input records (of every
// topic in ends) whose offsets the group committed, until ctx ends. It
// never goes down, so a broker that is briefly unavailable does not look
// like lost progress.
func pollConsumed(ctx context.Context, adm *kadm.Client, group string, ends kadm.ListedOffsets, consumed *atomic.Int64) {
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		fctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		offs, err := adm.FetchOffsets(fctx, group)
		cancel()
		if err != nil {
			continue
		}
		var sum int64
		ends.Each(func(e kadm.ListedOffset) {
			if o, ok := offs.Lookup(e.Topic, e.Partition); ok && o.Err == nil && o.At > 0 {
				sum += min(o.At, e.Offset)
			}
		})
		if sum > consumed.Load() {
			consumed.Store(sum)
		}
	}
}

// traceCounts reads the output and the changelog again read_uncommitted
// and traces a few gaps and repeats to the transactions around them
// (verdict.TraceCounts); a read that fails says so instead.
func traceCounts(ctx context.Context, base []kgo.Opt, output, changelog string, out, log []*kgo.Record) []string {
	outAll, err := verdict.DrainAll(ctx, base, output, len(out), time.Second)
	if err != nil {
		return []string{"tracing the counts: reading the output read_uncommitted: " + err.Error()}
	}
	logAll, err := verdict.DrainAll(ctx, base, changelog, len(log), time.Second)
	if err != nil {
		return []string{"tracing the counts: reading the changelog read_uncommitted: " + err.Error()}
	}
	return verdict.TraceCounts(out, outAll, log, logAll, 5)
}
