package config

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"
)

func TestValidate(t *testing.T) {
	tests := []struct {
		name    string
		change  func(*Config)
		field   string
		mention string // a word the message must contain: the allowed values or the fix
	}{
		{"no brokers", func(c *Config) { c.Brokers = nil }, "brokers", "EOS_BROKERS"},
		{"broker without port", func(c *Config) { c.Brokers = []string{"kafka-1"} }, "brokers", "host:port"},
		{"broker without host", func(c *Config) { c.Brokers = []string{":9092"} }, "brokers", "host:port"},
		{"broker bad port", func(c *Config) { c.Brokers = []string{"kafka-1:http"} }, "brokers", "65535"},
		{"broker port out of range", func(c *Config) { c.Brokers = []string{"ok:9092", "kafka-1:70000"} }, "brokers", "65535"},
		{"no app_id", func(c *Config) { c.AppID = "" }, "app_id", "EOS_APP_ID"},
		{"app_id illegal", func(c *Config) { c.AppID = "orders app" }, "app_id", "letters, digits"},
		{"app_id slash", func(c *Config) { c.AppID = "a/b" }, "app_id", "letters, digits"},
		{"no instance_id", func(c *Config) { c.InstanceID = "" }, "instance_id", "EOS_INSTANCE_ID"},
		{"instance_id illegal", func(c *Config) { c.InstanceID = "pod#1" }, "instance_id", "letters, digits"},
		{"unknown guarantee", func(c *Config) { c.Guarantee = "exactly_once" }, "guarantee", "exactly-once, idempotent, at-least-once, at-most-once"},
		{"empty guarantee", func(c *Config) { c.Guarantee = "" }, "guarantee", "exactly-once"},
		{"zero commit_interval", func(c *Config) { c.CommitInterval = 0 }, "commit_interval", "greater than 0"},
		{"negative commit_interval", func(c *Config) { c.CommitInterval = -time.Second }, "commit_interval", "greater than 0"},
		{"zero max_batch_records", func(c *Config) { c.MaxBatchRecords = 0 }, "max_batch_records", "at least 1"},
		{"zero transaction_timeout", func(c *Config) { c.TransactionTimeout = 0 }, "transaction_timeout", "greater than 0"},
		{"transaction_timeout below commit_interval", func(c *Config) { c.TransactionTimeout = 50 * time.Millisecond }, "transaction_timeout", "greater than commit_interval (100ms)"},
		{"transaction_timeout equal commit_interval", func(c *Config) { c.TransactionTimeout = c.CommitInterval }, "transaction_timeout", "lower commit_interval"},
		{"transaction_timeout above broker max", func(c *Config) { c.TransactionTimeout = 16 * time.Minute }, "transaction_timeout", "transaction.max.timeout.ms"},
		{"zero session_timeout", func(c *Config) { c.SessionTimeout = 0 }, "session_timeout", "group.min.session.timeout.ms"},
		{"session_timeout below broker min", func(c *Config) { c.SessionTimeout = 4 * time.Second }, "session_timeout", "at least 6s, the default of the broker setting group.min.session.timeout.ms"},
		{"session_timeout just below broker min", func(c *Config) { c.SessionTimeout = 5999 * time.Millisecond }, "session_timeout", "eosctl doctor"},
		{"session_timeout above broker max", func(c *Config) { c.SessionTimeout = 31 * time.Minute }, "session_timeout", "at most 30m, the default of the broker setting group.max.session.timeout.ms"},
		{"zero rebalance_timeout", func(c *Config) { c.RebalanceTimeout = 0 }, "rebalance_timeout", "at least 100ms"},
		{"rebalance_timeout below client min", func(c *Config) { c.RebalanceTimeout = 50 * time.Millisecond }, "rebalance_timeout", "at least 100ms"},
		{"rebalance_timeout past the wire field", func(c *Config) { c.RebalanceTimeout = 25 * 24 * time.Hour }, "rebalance_timeout", "int32"},
		{"zero connect_timeout", func(c *Config) { c.ConnectTimeout = 0 }, "connect_timeout", "greater than 0"},
		{"zero recovery_timeout", func(c *Config) { c.RecoveryTimeout = 0 }, "recovery_timeout", "greater than 0"},
		{"recovery_timeout below connect_timeout", func(c *Config) { c.RecoveryTimeout = 5 * time.Second }, "recovery_timeout", "connect_timeout (10s)"},
		{"instance_id too long", func(c *Config) { c.InstanceID = strings.Repeat("w", 250) }, "instance_id", "at most 249"},
		{"instance_id dot", func(c *Config) { c.InstanceID = "." }, "instance_id", "group.instance.id"},
		{"instance_id dot dot", func(c *Config) { c.InstanceID = ".." }, "instance_id", "group.instance.id"},
		{"app_id too long", func(c *Config) { c.AppID = strings.Repeat("a", 257) }, "app_id", "at most 256"},
		{"max_batch_records beyond int32", func(c *Config) { c.MaxBatchRecords = math.MaxInt32 + 1 }, "max_batch_records", "at most 2147483647"},
		{"max_batch_records overflowing", func(c *Config) { c.MaxBatchRecords = math.MaxInt }, "max_batch_records", "MaxBufferedRecords"},
		{"unknown log_level", func(c *Config) { c.LogLevel = "verbose" }, "log_level", "debug, info, warn, error"},
		{"metrics_addr without port", func(c *Config) { c.MetricsAddr = "localhost" }, "metrics_addr", "host:port"},
		{"metrics_addr bad port", func(c *Config) { c.MetricsAddr = "127.0.0.1:prom" }, "metrics_addr", "0 to 65535"},
		{"metrics_addr port out of range", func(c *Config) { c.MetricsAddr = ":70000" }, "metrics_addr", "0 to 65535"},
		{"metrics_serve_queries without metrics_addr", func(c *Config) { c.MetricsServeQueries = true }, "metrics_serve_queries", "metrics_addr"},
		{"unknown sasl mechanism", func(c *Config) { c.SASL = SASL{Mechanism: "GSSAPI", Username: "u", Password: "p"} }, "sasl.mechanism", "PLAIN, SCRAM-SHA-256, SCRAM-SHA-512"},
		{"sasl without username", func(c *Config) { c.SASL = SASL{Mechanism: SASLPlain, Password: "p"} }, "sasl.username", "EOS_SASL_USERNAME"},
		{"sasl without password", func(c *Config) { c.SASL = SASL{Mechanism: SASLScramSHA512, Username: "u"} }, "sasl.password", "EOS_SASL_PASSWORD"},
		{"sasl credentials without mechanism", func(c *Config) { c.SASL = SASL{Username: "u", Password: "p"} }, "sasl.mechanism", "PLAIN"},
		{"tls cert without key", func(c *Config) { c.TLS = TLS{Enabled: true, CertFile: "c.pem"} }, "tls.key_file", "tls.cert_file"},
		{"tls key without cert", func(c *Config) { c.TLS = TLS{Enabled: true, KeyFile: "k.pem"} }, "tls.cert_file", "tls.key_file"},
		{"tls settings while disabled", func(c *Config) { c.TLS = TLS{CAFile: "ca.pem"} }, "tls.enabled", "EOS_TLS_ENABLED"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := valid()
			tt.change(&c)
			err := c.Validate()
			if err == nil {
				t.Fatal("Validate: no error")
			}
			if !errors.Is(err, ErrInvalid) {
				t.Errorf("error %v does not match ErrInvalid", err)
			}
			var fe *FieldError
			if !errors.As(err, &fe) || fe.Field != tt.field {
				t.Fatalf("error %v: want a *FieldError for %s", err, tt.field)
			}
			msg := err.Error()
			if !strings.HasPrefix(msg, "config: "+tt.field) || !strings.Contains(msg, tt.mention) {
				t.Fatalf("error %q: want it to start with the field %s and mention %q", msg, tt.field, tt.mention)
			}
			if strings.Count(msg, "\n") != 0 {
				t.Errorf("one change produced several errors: %q", msg)
			}
		})
	}
}

func TestValidateAccepts(t *testing.T) {
	tests := []struct {
		name   string
		change func(*Config)
	}{
		{"defaults", func(*Config) {}},
		{"several brokers", func(c *Config) { c.Brokers = []string{"a:9092", "b.example.com:9093", "[::1]:9094"} }},
		{"every guarantee", func(c *Config) { c.Guarantee = AtMostOnce }},
		{"transaction_timeout at broker max", func(c *Config) { c.TransactionTimeout = 15 * time.Minute }},
		{"slow commits without transactions", func(c *Config) {
			c.Guarantee = AtLeastOnce
			c.CommitInterval = time.Minute
		}},
		{"each log level", func(c *Config) { c.LogLevel = "error" }},
		{"session_timeout at broker min", func(c *Config) { c.SessionTimeout = 6 * time.Second }},
		{"session_timeout at broker max", func(c *Config) { c.SessionTimeout = 30 * time.Minute }},
		{"rebalance_timeout below session_timeout", func(c *Config) { c.RebalanceTimeout = 100 * time.Millisecond }},
		{"recovery_timeout equal connect_timeout", func(c *Config) { c.RecoveryTimeout = c.ConnectTimeout }},
		{"instance_id of 249 characters", func(c *Config) { c.InstanceID = strings.Repeat("w", 249) }},
		{"instance_id of three dots", func(c *Config) { c.InstanceID = "..." }},
		{"app_id of 256 characters", func(c *Config) { c.AppID = strings.Repeat("a", 256) }},
		{"max_batch_records at int32 max", func(c *Config) { c.MaxBatchRecords = math.MaxInt32 }},
		{"metrics on every interface", func(c *Config) { c.MetricsAddr = ":9464" }},
		{"metrics on a free loopback port", func(c *Config) { c.MetricsAddr = "127.0.0.1:0" }},
		{"leave group on close", func(c *Config) { c.LeaveGroupOnClose = true }},
		{"mutual tls", func(c *Config) { c.TLS = TLS{Enabled: true, CAFile: "ca", CertFile: "c", KeyFile: "k"} }},
		{"scram", func(c *Config) { c.SASL = SASL{Mechanism: SASLScramSHA256, Username: "u", Password: "p"} }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := valid()
			tt.change(&c)
			if err := c.Validate(); err != nil {
				t.Fatalf("Validate: %v", err)
			}
		})
	}
}

func TestValidateReportsEveryProblem(t *testing.T) {
	c := Default()
	c.InstanceID = "x"
	c.LogLevel = "loud"
	err := c.Validate()
	for _, field := range []string{"brokers", "app_id", "log_level"} {
		if err == nil || !strings.Contains(err.Error(), "config: "+field) {
			t.Errorf("error %v does not report %s", err, field)
		}
	}
}

func TestFieldErrorFormat(t *testing.T) {
	tests := []struct {
		err  *FieldError
		want string
	}{
		{&FieldError{Field: "transaction_timeout", Value: "50ms", Problem: "must be greater than commit_interval (100ms); raise it or lower commit_interval"},
			`config: transaction_timeout "50ms": must be greater than commit_interval (100ms); raise it or lower commit_interval`},
		{&FieldError{Field: "app_id", Problem: "must not be empty"}, "config: app_id: must not be empty"},
	}
	for _, tt := range tests {
		t.Run(tt.err.Field, func(t *testing.T) {
			if got := tt.err.Error(); got != tt.want {
				t.Fatalf("Error() = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestFmtDuration(t *testing.T) {
	for d, want := range map[time.Duration]string{
		30 * time.Minute:       "30m",
		90 * time.Second:       "1m30s",
		10 * time.Second:       "10s",
		time.Hour:              "1h0m",
		100 * time.Millisecond: "100ms",
	} {
		if got := fmtDuration(d); got != want {
			t.Errorf("fmtDuration(%s) = %q, want %q", d, got, want)
		}
	}
}
