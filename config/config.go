package config

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"
)

// Guarantee is the delivery guarantee a pipeline runs with; it decides whether
// the runtime uses transactions, an idempotent producer, or plain commits.
type Guarantee string

// The delivery guarantees, strongest first.
const (
	// ExactlyOnce commits input offsets and output records in one Kafka
	// transaction: every input record affects the output exactly once.
	ExactlyOnce Guarantee = "exactly-once"
	// Idempotent uses an idempotent producer and commits offsets after the
	// output is acknowledged; redelivered input must be deduplicated by the
	// sink.
	Idempotent Guarantee = "idempotent"
	// AtLeastOnce commits offsets after the output is acknowledged; a crash
	// can duplicate output.
	AtLeastOnce Guarantee = "at-least-once"
	// AtMostOnce commits offsets before processing; a crash can lose output.
	AtMostOnce Guarantee = "at-most-once"
)

// Valid reports whether g is one of the four guarantees, so a typo is caught
// before any client is built.
func (g Guarantee) Valid() bool {
	for _, v := range Guarantees() {
		if g == v {
			return true
		}
	}
	return false
}

// Guarantees lists every guarantee, strongest first, for help text and error
// messages.
func Guarantees() []Guarantee {
	return []Guarantee{ExactlyOnce, Idempotent, AtLeastOnce, AtMostOnce}
}

// Defaults applied by Default; documented here so users and other packages can
// refer to them by name.
const (
	// DefaultGuarantee is the guarantee used unless configured otherwise.
	DefaultGuarantee = ExactlyOnce
	// DefaultCommitInterval is how often a transaction is committed, as in
	// Kafka Streams with exactly-once.
	DefaultCommitInterval = 100 * time.Millisecond
	// DefaultMaxBatchRecords caps the records in one transaction. It is
	// high enough that at 500,000 records/s the commit interval, not the
	// cap, ends a batch: each commit costs round trips, so fewer, larger
	// transactions keep exactly-once close to at-least-once throughput.
	DefaultMaxBatchRecords = 50000
	// DefaultTransactionTimeout is the broker-side transaction timeout, as in
	// Kafka Streams with exactly-once v2.
	DefaultTransactionTimeout = 10 * time.Second
	// DefaultSessionTimeout is the consumer group session timeout.
	DefaultSessionTimeout = 45 * time.Second
	// DefaultRebalanceTimeout is how long a rebalance may take.
	DefaultRebalanceTimeout = 60 * time.Second
	// DefaultConnectTimeout is how long start-up waits for a broker.
	DefaultConnectTimeout = 10 * time.Second
	// DefaultRecoveryTimeout is how long Run keeps rebuilding a failing
	// client before it gives up, as Kafka Streams' task.timeout.ms: long
	// enough to ride out a broker restart or a leader election.
	DefaultRecoveryTimeout = 5 * time.Minute
	// DefaultLogLevel is the log level.
	DefaultLogLevel = "info"
	// MaxTransactionTimeout is the broker default transaction.max.timeout.ms
	// (15 minutes); a larger transaction_timeout is refused by such a broker
	// when the producer initialises.
	MaxTransactionTimeout = 15 * time.Minute
	// MinSessionTimeout is the broker default group.min.session.timeout.ms
	// (6 seconds); such a broker refuses a shorter session_timeout with
	// INVALID_SESSION_TIMEOUT every time the consumer tries to join.
	MinSessionTimeout = 6 * time.Second
	// MaxSessionTimeout is the broker default group.max.session.timeout.ms
	// (30 minutes); such a broker refuses a longer session_timeout the same
	// way.
	MaxSessionTimeout = 30 * time.Minute
)

// Config is everything an eosflow application needs to reach Kafka and run
// its pipeline. Build it with Default or Load, adjust it, then call Validate.
// Each field can be set in YAML (the tag) or with the EOS_* variable named in
// its comment; see the package documentation for the precedence.
type Config struct {
	// Brokers are the seed brokers as host:port. EOS_BROKERS (comma
	// separated). Required.
	Brokers []string `yaml:"brokers"`
	// AppID names the application: it is the consumer group id, the client
	// id and the transactional.id prefix (app_id:instance_id). EOS_APP_ID.
	// Required; letters, digits, '.', '_' and '-', at most 256 characters
	// (franz-go's client id limit).
	AppID string `yaml:"app_id"`
	// InstanceID names this instance and must stay the same across its
	// restarts, so that a restarted instance fences its previous incarnation
	// and takes its place in the group: it is the transactional.id suffix
	// and the consumer's group.instance.id (static membership). It follows
	// Kafka's rule for group.instance.id (letters, digits, '.', '_' and '-',
	// at most 249 characters, not "." or ".."), except that '_' is
	// reserved for the workers' ids (WorkerSeparator). EOS_INSTANCE_ID.
	// Default: the host name.
	InstanceID string `yaml:"instance_id"`
	// Guarantee is the delivery guarantee. EOS_GUARANTEE. Default:
	// exactly-once.
	Guarantee Guarantee `yaml:"guarantee"`
	// CommitInterval is how often the current batch is committed.
	// EOS_COMMIT_INTERVAL. Default: 100ms (as Kafka Streams).
	CommitInterval time.Duration `yaml:"commit_interval"`
	// AdaptiveCommit ends a batch as soon as the records at hand are
	// processed, instead of when CommitInterval runs out, which then
	// only bounds a batch. Records that arrive while a transaction
	// commits make the next batch, so batches stay small (and latency
	// short) at low rates and grow with the load. A batch holding records
	// back for task idling still waits out the interval.
	// EOS_ADAPTIVE_COMMIT. Default: false.
	AdaptiveCommit bool `yaml:"adaptive_commit"`
	// MaxBatchRecords is the most records one transaction holds; a batch
	// commits early when it reaches it. EOS_MAX_BATCH_RECORDS. Default: 50000;
	// at most 2147483647.
	MaxBatchRecords int `yaml:"max_batch_records"`
	// TransactionTimeout is how long the broker lets a transaction stay open
	// before aborting it. EOS_TRANSACTION_TIMEOUT. Default: 10s (as Kafka
	// Streams EOS v2). With exactly-once it must exceed CommitInterval and
	// be at most 15m.
	TransactionTimeout time.Duration `yaml:"transaction_timeout"`
	// SessionTimeout is the consumer group session timeout.
	// EOS_SESSION_TIMEOUT. Default: 45s. It must lie within the broker's
	// group.min.session.timeout.ms and group.max.session.timeout.ms; Validate
	// checks Kafka's defaults for them, 6s and 30m.
	SessionTimeout time.Duration `yaml:"session_timeout"`
	// RebalanceTimeout is how long members may take to rejoin during a
	// rebalance. EOS_REBALANCE_TIMEOUT. Default: 60s; at least 100ms
	// (franz-go's minimum). A revoke waits up to it for the record in
	// flight on a revoked partition, and cancels the record's context
	// half way.
	RebalanceTimeout time.Duration `yaml:"rebalance_timeout"`
	// GroupProtocol is the consumer group protocol: classic (members join
	// and their leader assigns partitions) or consumer (KIP-848: the
	// broker assigns them incrementally, and a rebalance pauses only the
	// partitions that move; needs Apache Kafka 4.0 or later, and the
	// brokers' group.consumer.session.timeout.ms and
	// group.consumer.heartbeat.interval.ms replace session_timeout).
	// EOS_GROUP_PROTOCOL. Default: classic (also when empty).
	GroupProtocol GroupProtocol `yaml:"group_protocol"`
	// ConnectTimeout is how long start-up may wait for an unreachable broker
	// before failing. EOS_CONNECT_TIMEOUT. Default: 10s.
	ConnectTimeout time.Duration `yaml:"connect_timeout"`
	// RecoveryTimeout is how long Run keeps rebuilding its client, with
	// capped exponential backoff, while no batch commits (brokers down, a
	// coordinator moving) before it returns the last error.
	// EOS_RECOVERY_TIMEOUT. Default: 5m; at least connect_timeout, so that
	// one reconnection can finish within it.
	RecoveryTimeout time.Duration `yaml:"recovery_timeout"`
	// MaxTaskIdle is how long a task whose inputs are co-partitioned (a
	// join's) holds back the records it has while one of its partitions
	// has none fetched, so that the join does not run one side ahead of
	// the other (Kafka Streams' max.task.idle.ms). 0 waits only while
	// that partition is known to have records on the broker that are not
	// polled yet, for at most commit_interval; a positive value also
	// waits that long for an empty partition; a negative one (-1ms)
	// never waits. EOS_MAX_TASK_IDLE. Default: 0.
	MaxTaskIdle time.Duration `yaml:"max_task_idle"`
	// LeaveGroupOnClose makes a clean shutdown leave the consumer group so
	// its partitions move to other instances at once; set it when scaling
	// down. Otherwise the instance stays a static member (its instance_id
	// is the group.instance.id) and a restart within session_timeout gets
	// its partitions back without a rebalance. EOS_LEAVE_GROUP_ON_CLOSE.
	// Default: false.
	LeaveGroupOnClose bool `yaml:"leave_group_on_close"`
	// StateDir is where persistent state stores keep their data, under
	// <app_id>/<instance_id>/, one directory per task and store.
	// EOS_STATE_DIR. Default: empty, which is <temp dir>/eosflow.
	StateDir string `yaml:"state_dir"`
	// LogLevel is one of debug, info, warn, error. EOS_LOG_LEVEL.
	// Default: info.
	LogLevel string `yaml:"log_level"`
	// Workers is how many sessions one process runs, each on its own
	// goroutine with its own client, so that a CPU-heavy pipeline uses
	// more than one core. Worker i is the instance <instance_id>_<i>,
	// with its own transactional.id, group.instance.id and state
	// directory; the consumer group spreads the partitions over the
	// workers as over processes. EOS_WORKERS.
	// Default: 1 (0, the zero value, counts as 1); "auto" (WorkersAuto)
	// is one per GOMAXPROCS; at most MaxWorkers.
	Workers Workers `yaml:"workers"`
	// MaxMemory is the memory the process aims to stay within: each
	// worker's share sizes its fetch and produce buffers and caps its
	// batches by bytes, and Run sets the Go soft memory limit to four
	// fifths of it unless GOMEMLIMIT or the program set one.
	// EOS_MAX_MEMORY, a size such as 128MiB, 512MB or 1GiB. Default:
	// 128MiB per worker (0, the zero value, counts as that); at least
	// 16MiB per worker.
	MaxMemory ByteSize `yaml:"max_memory"`
	// MetricsAddr is the host:port on which Run serves /metrics
	// (Prometheus), /healthz and /readyz, so that Prometheus and a
	// Kubernetes probe can watch the pipeline; port 0 picks a free port.
	// It serves state store contents only with MetricsServeQueries.
	// EOS_METRICS_ADDR. Default: empty, which serves nothing.
	MetricsAddr string `yaml:"metrics_addr"`
	// MetricsServeQueries makes metrics_addr also serve interactive
	// queries, GET /stores/{store}/keys/{key} (eos.Runner.QueryHandler),
	// for a metrics listener only trusted callers reach: whoever reaches
	// it reads any key. EOS_METRICS_SERVE_QUERIES. Default: false, which
	// leaves mounting QueryHandler to the program.
	MetricsServeQueries bool `yaml:"metrics_serve_queries"`
	// TLS configures encrypted connections to the brokers.
	TLS TLS `yaml:"tls"`
	// SASL configures broker authentication.
	SASL SASL `yaml:"sasl"`
}

// TLS configures encrypted connections to the brokers.
type TLS struct {
	// Enabled turns TLS on. EOS_TLS_ENABLED.
	Enabled bool `yaml:"enabled"`
	// CAFile is a PEM bundle of CAs to trust instead of the system pool.
	// EOS_TLS_CA_FILE.
	CAFile string `yaml:"ca_file"`
	// CertFile is the PEM client certificate for mutual TLS; needs KeyFile.
	// EOS_TLS_CERT_FILE.
	CertFile string `yaml:"cert_file"`
	// KeyFile is the PEM private key for CertFile. EOS_TLS_KEY_FILE.
	KeyFile string `yaml:"key_file"`
	// InsecureSkipVerify disables server certificate verification; for
	// tests only. EOS_TLS_INSECURE_SKIP_VERIFY.
	InsecureSkipVerify bool `yaml:"insecure_skip_verify"`
}

// SASL configures broker authentication. The password is never printed:
// String, GoString, MarshalYAML, MarshalJSON and the zap marshaler redact it.
type SASL struct {
	// Mechanism is "" (no SASL), PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512.
	// EOS_SASL_MECHANISM.
	Mechanism string `yaml:"mechanism"`
	// Username to authenticate as. EOS_SASL_USERNAME.
	Username string `yaml:"username"`
	// Password for Username. EOS_SASL_PASSWORD.
	Password string `yaml:"password" secret:"true"`
}

// SASL mechanism names accepted in SASL.Mechanism.
const (
	// SASLPlain sends the password in the clear; use it with TLS.
	SASLPlain = "PLAIN"
	// SASLScramSHA256 is SCRAM with SHA-256.
	SASLScramSHA256 = "SCRAM-SHA-256"
	// SASLScramSHA512 is SCRAM with SHA-512.
	SASLScramSHA512 = "SCRAM-SHA-512"
)

// Workers is the number of workers in one process; a type of its own so
// that YAML and EOS_WORKERS accept "auto" (WorkersAuto) beside a number.
type Workers int

const (
	// WorkersAuto runs one worker per GOMAXPROCS (by default, per core);
	// it is written "auto".
	WorkersAuto Workers = -1
	// MaxWorkers bounds workers: each worker is a Kafka client with its
	// own connections, transactional id and group member, and beyond a
	// few per core they add rebalance and broker load without adding
	// throughput; run more processes instead.
	MaxWorkers Workers = 256
)

// String gives "auto" for WorkersAuto and the number otherwise, as the
// setting is written.
func (w Workers) String() string {
	if w == WorkersAuto {
		return "auto"
	}
	return strconv.Itoa(int(w))
}

// UnmarshalText reads "auto" or a whole number, so that the YAML key and
// EOS_WORKERS take the same forms; Validate checks the range.
func (w *Workers) UnmarshalText(text []byte) error {
	s := strings.TrimSpace(string(text))
	if strings.EqualFold(s, "auto") {
		*w = WorkersAuto
		return nil
	}
	n, err := strconv.Atoi(s)
	if err != nil {
		return fmt.Errorf("workers %q: not a whole number or auto", s)
	}
	*w = Workers(n)
	return nil
}

// MarshalText writes the form UnmarshalText reads, so a Config written
// out as YAML or JSON loads back unchanged.
func (w Workers) MarshalText() ([]byte, error) { return []byte(w.String()), nil }

var (
	saslMechanisms = []string{SASLPlain, SASLScramSHA256, SASLScramSHA512}
	logLevels      = []string{"debug", "info", "warn", "error"}
)

// Default returns a Config with every default filled in. Brokers and AppID
// are left empty because no default is right for them; InstanceID is the
// host name, or empty if it cannot be determined.
func Default() Config {
	host, _ := os.Hostname()
	return Config{
		InstanceID:         host,
		Guarantee:          DefaultGuarantee,
		CommitInterval:     DefaultCommitInterval,
		MaxBatchRecords:    DefaultMaxBatchRecords,
		TransactionTimeout: DefaultTransactionTimeout,
		SessionTimeout:     DefaultSessionTimeout,
		RebalanceTimeout:   DefaultRebalanceTimeout,
		ConnectTimeout:     DefaultConnectTimeout,
		RecoveryTimeout:    DefaultRecoveryTimeout,
		LogLevel:           DefaultLogLevel,
	}
}

// TransactionalIDSeparator joins AppID and InstanceID in the
// transactional.id, app_id:instance_id. It lies outside the names'
// alphabet, so no two (app, instance) pairs share a transactional.id:
// "orders-eu" + "1" and "orders" + "eu-1" would both be "orders-eu-1" with
// '-'. Kafka accepts any characters in a transactional.id. An ACL on the
// prefix AppID + TransactionalIDSeparator covers every instance of the
// application.
const TransactionalIDSeparator = ":"

// WorkerSeparator joins InstanceID and a worker's index in a worker's
// instance id under workers > 1, e.g. pod-3_0. Validate keeps it out of
// instance_id, so a worker's id is never another instance's id nor
// another instance's worker's id: with '-', instance "pod" with two
// workers and instance "pod-1" would both be "pod-1" and fence each other.
// It is in Kafka's alphabet for a group.instance.id and safe in a
// directory name, and no host name (RFC 1123) or Kubernetes pod name
// contains it, so the default instance_id never does.
const WorkerSeparator = "_"

// workerCount is how many workers Workers asks for, as
// runcfg.WorkerCount gives it; Validate needs it for the workers' ids and
// memory shares.
func (c Config) workerCount() int {
	switch {
	case c.Workers == WorkersAuto:
		return runtime.GOMAXPROCS(0)
	case c.Workers < 1:
		return 1
	}
	return int(c.Workers)
}

// workerInstanceID is worker i's instance id, as runcfg.WorkerInstanceID
// gives it; Validate checks the longest one's length.
func (c Config) workerInstanceID(i int) string {
	return c.InstanceID + WorkerSeparator + strconv.Itoa(i)
}
