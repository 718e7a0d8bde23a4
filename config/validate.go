package config

import (
	"errors"
	"fmt"
	"net"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// validName is the alphabet of app_id and instance_id: they end up in group
// ids, transactional ids and (later) topic names.
var validName = regexp.MustCompile(`^[A-Za-z0-9._-]+$`)

// Validate checks every setting and returns nil or an errors.Join of one
// *FieldError per problem, each naming the field, the allowed values and a
// fix. The transaction_timeout bounds relative to commit_interval and the
// broker maximum apply only to exactly-once, the one guarantee that uses
// transactions.
func (c Config) Validate() error {
	var errs []error
	add := func(field, value, problem string) {
		errs = append(errs, &FieldError{Field: field, Value: value, Problem: problem})
	}
	positive := func(field string, d time.Duration, example string) {
		if d <= 0 {
			add(field, d.String(), "must be greater than 0, e.g. "+example)
		}
	}

	if len(c.Brokers) == 0 {
		add("brokers", "", "must not be empty; set brokers or EOS_BROKERS, e.g. 127.0.0.1:9092")
	}
	for _, b := range c.Brokers {
		if problem := brokerProblem(b); problem != "" {
			add("brokers", b, problem)
		}
	}

	switch {
	case c.AppID == "":
		add("app_id", "", "must not be empty; set app_id or EOS_APP_ID to a name for this application, e.g. orders-enricher (it becomes the consumer group id)")
	case !validName.MatchString(c.AppID):
		add("app_id", c.AppID, "may contain only letters, digits, '.', '_' and '-', because it becomes the consumer group id and transactional.id prefix; rename it")
	}
	switch {
	case c.InstanceID == "":
		add("instance_id", "", "must not be empty; set instance_id or EOS_INSTANCE_ID to a name that stays the same across restarts of this instance, e.g. worker-0")
	case !validName.MatchString(c.InstanceID):
		add("instance_id", c.InstanceID, "may contain only letters, digits, '.', '_' and '-', because it becomes part of the transactional.id; rename it")
	}

	if !c.Guarantee.Valid() {
		names := make([]string, 0, 4)
		for _, g := range Guarantees() {
			names = append(names, string(g))
		}
		add("guarantee", string(c.Guarantee), "unknown guarantee; use one of "+strings.Join(names, ", "))
	}

	positive("commit_interval", c.CommitInterval, "100ms")
	if c.MaxBatchRecords < 1 {
		add("max_batch_records", strconv.Itoa(c.MaxBatchRecords), fmt.Sprintf("must be at least 1; the default is %d", DefaultMaxBatchRecords))
	}
	switch {
	case c.TransactionTimeout <= 0:
		add("transaction_timeout", c.TransactionTimeout.String(), "must be greater than 0, e.g. 10s")
	case c.Guarantee != ExactlyOnce:
	case c.CommitInterval > 0 && c.TransactionTimeout <= c.CommitInterval:
		add("transaction_timeout", c.TransactionTimeout.String(), fmt.Sprintf("must be greater than commit_interval (%s); raise it or lower commit_interval", c.CommitInterval))
	case c.TransactionTimeout > MaxTransactionTimeout:
		add("transaction_timeout", c.TransactionTimeout.String(), fmt.Sprintf("must be at most %s, the broker default transaction.max.timeout.ms (900000), or the broker refuses the producer; lower it", MaxTransactionTimeout))
	}
	positive("session_timeout", c.SessionTimeout, "45s")
	positive("rebalance_timeout", c.RebalanceTimeout, "60s")
	positive("connect_timeout", c.ConnectTimeout, "10s")
	positive("recovery_timeout", c.RecoveryTimeout, "5m")
	if !slices.Contains(logLevels, c.LogLevel) {
		add("log_level", c.LogLevel, "unknown log level; use one of "+strings.Join(logLevels, ", "))
	}

	errs = append(errs, c.TLS.validate()...)
	errs = append(errs, c.SASL.validate()...)
	return errors.Join(errs...)
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
