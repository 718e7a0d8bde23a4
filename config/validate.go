package config

import (
	"errors"
	"fmt"
	"math"
	"net"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// validName is the alphabet of app_id and instance_id: they end up in group
// ids, transactional ids and (later) topic names. instance_id may not
// contain WorkerSeparator besides.
var validName = regexp.MustCompile(`^[A-Za-z0-9._-]+$`)

// Length and size limits that the brokers or franz-go enforce.
const (
	// maxAppIDLen is franz-go's client id limit; app_id is the client id.
	maxAppIDLen = 256
	// maxInstanceIDLen is the group.instance.id limit of Kafka's Java
	// clients (the topic name limit); the broker does not check it, but a
	// longer id is one those clients and tools cannot use.
	maxInstanceIDLen = 249
	// minRebalanceTimeout is the least franz-go accepts.
	minRebalanceTimeout = 100 * time.Millisecond
	// maxWireTimeout is the longest timeout the int32 milliseconds of
	// JoinGroup can carry; franz-go refuses longer ones.
	maxWireTimeout = time.Duration(math.MaxInt32) * time.Millisecond
	// maxBatchRecordsLimit bounds max_batch_records so that the producer
	// buffer the runtime derives from it cannot overflow.
	maxBatchRecordsLimit = math.MaxInt32
)

// Validate checks every setting and returns nil or an errors.Join of one
// *FieldError per problem, each naming the field, the allowed values and a
// fix. It also rejects what would otherwise fail only once the pipeline
// runs: values a broker with Kafka's default settings refuses (naming the
// broker setting and its default) and values franz-go refuses. The
// transaction_timeout bounds relative to commit_interval and the broker
// maximum apply only to exactly-once, the one guarantee that uses
// transactions.
func (c Config) Validate() error {
	var p problems
	c.checkIdentity(&p)
	c.checkWorkers(&p)
	c.checkBatches(&p)
	c.checkTimeouts(&p)
	c.checkLogging(&p)
	p = append(p, c.memoryErrors()...)
	p = append(p, c.validateGroupProtocol()...)
	p = append(p, c.TLS.validate()...)
	p = append(p, c.SASL.validate()...)
	return errors.Join(p...)
}

// problems collects what Validate finds wrong.
type problems []error

// add reports field's value and its problem.
func (p *problems) add(field, value, problem string) {
	*p = append(*p, &FieldError{Field: field, Value: value, Problem: problem})
}

// positive reports a duration field that is not above zero.
func (p *problems) positive(field string, d time.Duration, example string) {
	if d <= 0 {
		p.add(field, d.String(), "must be greater than 0, e.g. "+example)
	}
}

// checkIdentity checks the brokers and the names the instance goes by.
func (c Config) checkIdentity(p *problems) {
	if len(c.Brokers) == 0 {
		p.add("brokers", "", "must not be empty; set brokers or EOS_BROKERS, e.g. 127.0.0.1:9092")
	}
	for _, b := range c.Brokers {
		if problem := brokerProblem(b); problem != "" {
			p.add("brokers", b, problem)
		}
	}

	switch {
	case c.AppID == "":
		p.add("app_id", "", "must not be empty; set app_id or EOS_APP_ID to a name for this application, e.g. orders-enricher (it becomes the consumer group id)")
	case !validName.MatchString(c.AppID):
		p.add("app_id", c.AppID, "may contain only letters, digits, '.', '_' and '-', because it becomes the consumer group id and transactional.id prefix; rename it")
	case len(c.AppID) > maxAppIDLen:
		p.add("app_id", c.AppID, fmt.Sprintf("must be at most %d characters, not %d: it is also the client id, and franz-go refuses a longer one; shorten it", maxAppIDLen, len(c.AppID)))
	}
	switch {
	case c.InstanceID == "":
		p.add("instance_id", "", "must not be empty; set instance_id or EOS_INSTANCE_ID to a name that stays the same across restarts of this instance, e.g. worker-0")
	case !validName.MatchString(c.InstanceID):
		p.add("instance_id", c.InstanceID, "may contain only letters, digits, '.' and '-' ('_' joins the workers' ids), because it becomes part of the transactional.id and the group.instance.id; rename it")
	case strings.Contains(c.InstanceID, WorkerSeparator):
		p.add("instance_id", c.InstanceID, fmt.Sprintf("must not contain %q, which joins instance_id and a worker's index in the workers' ids (pod with workers: 2 runs pod%[1]s0 and pod%[1]s1), so an instance with it could take another instance's worker's transactional.id, group.instance.id and state directory; rename it, e.g. %[2]s (a renamed instance starts with a new transactional.id, group member and state directory)", WorkerSeparator, strings.ReplaceAll(c.InstanceID, WorkerSeparator, "-")))
	case c.InstanceID == "." || c.InstanceID == "..":
		p.add("instance_id", c.InstanceID, `must not be "." or "..", which Kafka's Java clients refuse as a group.instance.id (the runtime's static group membership); rename it, e.g. worker-0`)
	case len(c.InstanceID) > maxInstanceIDLen:
		p.add("instance_id", c.InstanceID, fmt.Sprintf("must be at most %d characters, not %d, the limit Kafka's Java clients enforce for a group.instance.id (the runtime's static group membership); shorten it", maxInstanceIDLen, len(c.InstanceID)))
	}
}

// checkWorkers checks the worker count, and the ids it makes.
func (c Config) checkWorkers(p *problems) {
	switch {
	case c.Workers < WorkersAuto:
		p.add("workers", c.Workers.String(), fmt.Sprintf("must be a number from 1 to %d, or auto for one per core (GOMAXPROCS); use e.g. 4, or 1 to run one session per process", MaxWorkers))
	case c.Workers > MaxWorkers:
		p.add("workers", c.Workers.String(), fmt.Sprintf("must be at most %d: each worker is a Kafka client and group member of its own; lower it (auto gives one per core), or run more processes", MaxWorkers))
	case c.workerCount() > 1 && validName.MatchString(c.InstanceID) && len(c.workerInstanceID(c.workerCount()-1)) > maxInstanceIDLen:
		p.add("instance_id", c.InstanceID, fmt.Sprintf("must be short enough for the workers' instance ids (%s): at most %d characters, the limit Kafka's Java clients enforce for a group.instance.id; shorten it", c.workerInstanceID(c.workerCount()-1), maxInstanceIDLen))
	}
}

// checkBatches checks the guarantee and what sizes its batches and
// transactions.
func (c Config) checkBatches(p *problems) {
	if !c.Guarantee.Valid() {
		names := make([]string, 0, 4)
		for _, g := range Guarantees() {
			names = append(names, string(g))
		}
		p.add("guarantee", string(c.Guarantee), "unknown guarantee; use one of "+strings.Join(names, ", "))
	}

	p.positive("commit_interval", c.CommitInterval, "100ms")
	switch {
	case c.MaxBatchRecords < 1:
		p.add("max_batch_records", strconv.Itoa(c.MaxBatchRecords), fmt.Sprintf("must be at least 1; the default is %d", DefaultMaxBatchRecords))
	case c.MaxBatchRecords > maxBatchRecordsLimit:
		p.add("max_batch_records", strconv.Itoa(c.MaxBatchRecords), fmt.Sprintf("must be at most %d: the runtime sizes franz-go's MaxBufferedRecords from it (about two batches), and franz-go refuses a size that overflows; lower it, e.g. to the default %d", maxBatchRecordsLimit, DefaultMaxBatchRecords))
	}
	switch {
	case c.TransactionTimeout <= 0:
		p.add("transaction_timeout", c.TransactionTimeout.String(), "must be greater than 0, e.g. 10s")
	case c.Guarantee != ExactlyOnce:
	case c.CommitInterval > 0 && c.TransactionTimeout <= c.CommitInterval:
		p.add("transaction_timeout", c.TransactionTimeout.String(), fmt.Sprintf("must be greater than commit_interval (%s); raise it or lower commit_interval", c.CommitInterval))
	case c.TransactionTimeout > MaxTransactionTimeout:
		p.add("transaction_timeout", c.TransactionTimeout.String(), fmt.Sprintf("must be at most %s, the broker default transaction.max.timeout.ms (900000), or the broker refuses the producer; lower it", MaxTransactionTimeout))
	}
}

// checkTimeouts checks the group's and the connections' timeouts.
func (c Config) checkTimeouts(p *problems) {
	// A broker compares the session timeout in whole milliseconds, as sent.
	const brokerMayDiffer = "(brokers may be set differently: eosctl doctor --config checks their actual limits)"
	switch sessionMs := c.SessionTimeout.Milliseconds(); {
	case sessionMs < MinSessionTimeout.Milliseconds():
		p.add("session_timeout", c.SessionTimeout.String(), fmt.Sprintf("must be at least %s, the default of the broker setting group.min.session.timeout.ms: a broker refuses a shorter one with INVALID_SESSION_TIMEOUT on every join; raise it, e.g. to the default 45s %s", MinSessionTimeout, brokerMayDiffer))
	case sessionMs > MaxSessionTimeout.Milliseconds():
		p.add("session_timeout", c.SessionTimeout.String(), fmt.Sprintf("must be at most %s, the default of the broker setting group.max.session.timeout.ms: a broker refuses a longer one with INVALID_SESSION_TIMEOUT on every join; lower it, e.g. to the default 45s %s", fmtDuration(MaxSessionTimeout), brokerMayDiffer))
	}
	switch {
	case c.RebalanceTimeout < minRebalanceTimeout:
		p.add("rebalance_timeout", c.RebalanceTimeout.String(), fmt.Sprintf("must be at least %s, the least franz-go accepts; raise it, e.g. to the default 60s", minRebalanceTimeout))
	case c.RebalanceTimeout > maxWireTimeout:
		p.add("rebalance_timeout", c.RebalanceTimeout.String(), fmt.Sprintf("must be at most about 24 days (%s), the int32 milliseconds JoinGroup carries, or franz-go refuses it; lower it, e.g. to the default 60s", maxWireTimeout))
	}
	p.positive("connect_timeout", c.ConnectTimeout, "10s")
	switch {
	case c.RecoveryTimeout <= 0:
		p.add("recovery_timeout", c.RecoveryTimeout.String(), "must be greater than 0, e.g. 5m")
	case c.ConnectTimeout > 0 && c.RecoveryTimeout < c.ConnectTimeout:
		p.add("recovery_timeout", c.RecoveryTimeout.String(), fmt.Sprintf("must be at least connect_timeout (%s), or Run gives up before one reconnection can finish; raise it, e.g. to the default 5m, or lower connect_timeout", c.ConnectTimeout))
	}
}

// checkLogging checks the log level and the metrics address.
func (c Config) checkLogging(p *problems) {
	if !slices.Contains(logLevels, c.LogLevel) {
		p.add("log_level", c.LogLevel, "unknown log level; use one of "+strings.Join(logLevels, ", "))
	}
	if c.MetricsAddr != "" {
		if problem := listenAddrProblem(c.MetricsAddr); problem != "" {
			p.add("metrics_addr", c.MetricsAddr, problem)
		}
	}
	if c.MetricsServeQueries && c.MetricsAddr == "" {
		p.add("metrics_serve_queries", "true", "serves queries on metrics_addr, which is empty; set metrics_addr, or mount eos.Runner.QueryHandler on a server of your own")
	}
}

// fmtDuration prints whole minutes as a user writes them: "30m", not
// "30m0s".
func fmtDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		return strings.TrimSuffix(s, "0s")
	}
	return s
}

// brokerProblem returns why b is not a usable host:port, or "".
func brokerProblem(b string) string {
	host, port, err := net.SplitHostPort(b)
	if err != nil || host == "" {
		return "must be host:port, e.g. 127.0.0.1:9092"
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return "port must be a number from 1 to 65535, e.g. 127.0.0.1:9092"
	}
	return ""
}

func (t TLS) validate() []error {
	var errs []error
	if !t.Enabled && (t.CAFile != "" || t.CertFile != "" || t.KeyFile != "" || t.InsecureSkipVerify) {
		errs = append(errs, &FieldError{Field: "tls.enabled", Value: "false", Problem: "must be true when other tls settings are set; set tls.enabled: true (EOS_TLS_ENABLED=true) or remove them"})
	}
	if t.CertFile != "" && t.KeyFile == "" {
		errs = append(errs, &FieldError{Field: "tls.key_file", Problem: "must be set when tls.cert_file is set; set it to the PEM private key of the client certificate"})
	}
	if t.KeyFile != "" && t.CertFile == "" {
		errs = append(errs, &FieldError{Field: "tls.cert_file", Problem: "must be set when tls.key_file is set; set it to the PEM client certificate"})
	}
	return errs
}

func (s SASL) validate() []error {
	var errs []error
	if s.Mechanism == "" {
		if s.Username != "" || s.Password != "" {
			errs = append(errs, &FieldError{Field: "sasl.mechanism", Problem: "must be set when sasl.username or sasl.password is set; use one of " + strings.Join(saslMechanisms, ", ")})
		}
		return errs
	}
	if !slices.Contains(saslMechanisms, s.Mechanism) {
		errs = append(errs, &FieldError{Field: "sasl.mechanism", Value: s.Mechanism, Problem: "unknown SASL mechanism; use one of " + strings.Join(saslMechanisms, ", ") + ", or leave it empty for no SASL"})
	}
	if s.Username == "" {
		errs = append(errs, &FieldError{Field: "sasl.username", Problem: "must be set when sasl.mechanism is set; set sasl.username or EOS_SASL_USERNAME"})
	}
	if s.Password == "" {
		errs = append(errs, &FieldError{Field: "sasl.password", Problem: "must be set when sasl.mechanism is set; set sasl.password or EOS_SASL_PASSWORD"})
	}
	return errs
}

// listenAddrProblem says what is wrong with addr as a host:port to listen
// on, or "" when nothing is.
func listenAddrProblem(addr string) string {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "must be host:port (e.g. 127.0.0.1:9464, or :9464 for every interface), or empty to serve no metrics"
	}
	if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		return "the port must be a number from 0 to 65535 (0 picks a free one)"
	}
	return ""
}
