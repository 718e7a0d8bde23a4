package config

import (
	"errors"
	"io/fs"
	"reflect"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"
)

const fullYAML = `
brokers: [kafka-1:9092, kafka-2:9092]
app_id: orders
instance_id: worker-3
guarantee: at-least-once
commit_interval: 250ms
max_batch_records: 500
transaction_timeout: 30s
session_timeout: 20s
rebalance_timeout: 40s
connect_timeout: 5s
recovery_timeout: 2m
log_level: debug
metrics_addr: 127.0.0.1:9464
tls:
  enabled: true
  ca_file: /etc/ca.pem
  cert_file: /etc/client.pem
  key_file: /etc/client.key
  insecure_skip_verify: true
sasl:
  mechanism: SCRAM-SHA-256
  username: svc
  password: pw
`

func TestLoadYAML(t *testing.T) {
	clearEnv(t)
	got, err := Load(writeFile(t, "app.yaml", fullYAML))
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	want := Config{
		Brokers:            []string{"kafka-1:9092", "kafka-2:9092"},
		AppID:              "orders",
		InstanceID:         "worker-3",
		Guarantee:          AtLeastOnce,
		CommitInterval:     250 * time.Millisecond,
		MaxBatchRecords:    500,
		TransactionTimeout: 30 * time.Second,
		SessionTimeout:     20 * time.Second,
		RebalanceTimeout:   40 * time.Second,
		ConnectTimeout:     5 * time.Second,
		RecoveryTimeout:    2 * time.Minute,
		LogLevel:           "debug",
		MetricsAddr:        "127.0.0.1:9464",
		TLS:                TLS{Enabled: true, CAFile: "/etc/ca.pem", CertFile: "/etc/client.pem", KeyFile: "/etc/client.key", InsecureSkipVerify: true},
		SASL:               SASL{Mechanism: SASLScramSHA256, Username: "svc", Password: "pw"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Load =\n%+v\nwant\n%+v", got, want)
	}
}

func TestLoadKeepsDefaultsForMissingKeys(t *testing.T) {
	clearEnv(t)
	tests := []struct {
		name, yaml string
	}{
		{"empty file", ""},
		{"only comments", "# nothing here\n"},
		{"null document", "~\n"},
		{"empty tls section", "tls:\n"},
		{"no path", "-"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := ""
			if tt.yaml != "-" {
				path = writeFile(t, "app.yaml", tt.yaml)
			}
			got, err := Load(path)
			if err != nil {
				t.Fatalf("Load: %v", err)
			}
			if want := Default(); !reflect.DeepEqual(got, want) {
				t.Fatalf("Load = %v, want defaults %v", got, want)
			}
		})
	}
}

func TestLoadBrokersAsCommaString(t *testing.T) {
	clearEnv(t)
	c, err := Load(writeFile(t, "app.yaml", "brokers: a:9092, b:9092\n"))
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"a:9092", "b:9092"}; !reflect.DeepEqual(c.Brokers, want) {
		t.Fatalf("Brokers = %q, want %q", c.Brokers, want)
	}
}

func TestEnvOverridesYAML(t *testing.T) {
	clearEnv(t)
	path := writeFile(t, "app.yaml", fullYAML)
	env := map[string]string{
		"EOS_BROKERS":                  " x:1 , y:2 ,",
		"EOS_APP_ID":                   "payments",
		"EOS_INSTANCE_ID":              "pod-7",
		"EOS_GUARANTEE":                "exactly-once",
		"EOS_COMMIT_INTERVAL":          "1s",
		"EOS_MAX_BATCH_RECORDS":        "42",
		"EOS_TRANSACTION_TIMEOUT":      "1m",
		"EOS_SESSION_TIMEOUT":          "11s",
		"EOS_REBALANCE_TIMEOUT":        "12s",
		"EOS_CONNECT_TIMEOUT":          "13s",
		"EOS_RECOVERY_TIMEOUT":         "30s",
		"EOS_LOG_LEVEL":                "warn",
		"EOS_METRICS_ADDR":             ":0",
		"EOS_METRICS_SERVE_QUERIES":    "true",
		"EOS_TLS_ENABLED":              "false",
		"EOS_TLS_CA_FILE":              "/ca2",
		"EOS_TLS_CERT_FILE":            "/cert2",
		"EOS_TLS_KEY_FILE":             "/key2",
		"EOS_TLS_INSECURE_SKIP_VERIFY": "0",
		"EOS_SASL_MECHANISM":           "PLAIN",
		"EOS_SASL_USERNAME":            "u2",
		"EOS_SASL_PASSWORD":            "p2",
	}
	for k, v := range env {
		t.Setenv(k, v)
	}
	got, err := Load(path)
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	want := Config{
		Brokers:             []string{"x:1", "y:2"},
		AppID:               "payments",
		InstanceID:          "pod-7",
		Guarantee:           ExactlyOnce,
		CommitInterval:      time.Second,
		MaxBatchRecords:     42,
		TransactionTimeout:  time.Minute,
		SessionTimeout:      11 * time.Second,
		RebalanceTimeout:    12 * time.Second,
		ConnectTimeout:      13 * time.Second,
		RecoveryTimeout:     30 * time.Second,
		LogLevel:            "warn",
		MetricsAddr:         ":0",
		MetricsServeQueries: true,
		TLS:                 TLS{CAFile: "/ca2", CertFile: "/cert2", KeyFile: "/key2"},
		SASL:                SASL{Mechanism: SASLPlain, Username: "u2", Password: "p2"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Load =\n%+v\nwant\n%+v", got, want)
	}
}

func TestEnvPartialOverride(t *testing.T) {
	clearEnv(t)
	t.Setenv("EOS_APP_ID", "payments")
	t.Setenv("EOS_KAFKA_BROKERS", "ignored:9092") // not a Config setting
	got, err := Load(writeFile(t, "app.yaml", fullYAML))
	if err != nil {
		t.Fatal(err)
	}
	if got.AppID != "payments" || got.InstanceID != "worker-3" || got.Brokers[0] != "kafka-1:9092" {
		t.Fatalf("Load = %v, want only app_id overridden", got)
	}
}

func TestMalformedEnv(t *testing.T) {
	tests := []struct{ env, value string }{
		{"EOS_COMMIT_INTERVAL", "100"},
		{"EOS_TRANSACTION_TIMEOUT", "ten seconds"},
		{"EOS_SESSION_TIMEOUT", "45"},
		{"EOS_REBALANCE_TIMEOUT", "1h-"},
		{"EOS_CONNECT_TIMEOUT", "x"},
		{"EOS_MAX_BATCH_RECORDS", "1e4"},
		{"EOS_RECOVERY_TIMEOUT", "five"},
		{"EOS_TLS_ENABLED", "yes"},
		{"EOS_TLS_INSECURE_SKIP_VERIFY", "maybe"},
	}
	for _, tt := range tests {
		t.Run(tt.env, func(t *testing.T) {
			clearEnv(t)
			t.Setenv(tt.env, tt.value)
			_, err := Load("")
			if err == nil {
				t.Fatalf("Load with %s=%q: no error", tt.env, tt.value)
			}
			var fe *FieldError
			if !errors.As(err, &fe) || fe.Field != tt.env || fe.Value != tt.value {
				t.Fatalf("error %v: want a *FieldError for %s", err, tt.env)
			}
			if !strings.Contains(err.Error(), tt.env) || !errors.Is(err, ErrInvalid) {
				t.Fatalf("error %q does not name %s or match ErrInvalid", err, tt.env)
			}
		})
	}
}

func TestFromEnvReportsEveryBadVariable(t *testing.T) {
	clearEnv(t)
	t.Setenv("EOS_COMMIT_INTERVAL", "soon")
	t.Setenv("EOS_RECOVERY_TIMEOUT", "many")
	_, err := FromEnv(Default())
	for _, name := range []string{"EOS_COMMIT_INTERVAL", "EOS_RECOVERY_TIMEOUT"} {
		if err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("error %v does not name %s", err, name)
		}
	}
}

func TestLoadYAMLErrors(t *testing.T) {
	tests := []struct {
		name, yaml, field, mention string
	}{
		{"unknown top-level key", "app_id: a\ncommit_intervall: 1s\n", "commit_intervall", "line 2"},
		{"unknown nested key", "tls:\n  enabled: true\n  ca_fil: /ca\n", "tls.ca_fil", "ca_file"},
		{"duplicate key", "app_id: a\napp_id: b\n", "app_id", "twice"},
		{"bad duration", "commit_interval: 100\n", "commit_interval", "100ms"},
		{"bad int", "max_batch_records: lots\n", "max_batch_records", "whole number"},
		{"bad bool", "tls:\n  enabled: sure\n", "tls.enabled", "true or false"},
		{"mapping for string", "app_id: {a: b}\n", "app_id", "app.yaml line 1"},
		{"section not a mapping", "tls: true\n", "tls", "mapping"},
		{"top level not a mapping", "- a\n- b\n", "(top level)", "mapping"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clearEnv(t)
			_, err := Load(writeFile(t, "app.yaml", tt.yaml))
			var fe *FieldError
			if !errors.As(err, &fe) || fe.Field != tt.field {
				t.Fatalf("error %v: want a *FieldError for %s", err, tt.field)
			}
			if !strings.Contains(err.Error(), tt.mention) || !errors.Is(err, ErrInvalid) {
				t.Fatalf("error %q does not mention %q or match ErrInvalid", err, tt.mention)
			}
		})
	}
}

func TestLoadFileErrors(t *testing.T) {
	clearEnv(t)
	_, err := Load("/does/not/exist.yaml")
	if !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), "/does/not/exist.yaml") {
		t.Errorf("missing file: %v", err)
	}
	_, err = Load(writeFile(t, "bad.yaml", "app_id: [unclosed\n"))
	if err == nil || !strings.Contains(err.Error(), "bad.yaml") || !strings.Contains(err.Error(), "syntax") {
		t.Errorf("bad syntax: %v", err)
	}
}

// TestYAMLRoundTrip shows that a marshalled Config (password aside) loads back
// unchanged, so a command can print the effective configuration as a file.
func TestYAMLRoundTrip(t *testing.T) {
	clearEnv(t)
	c := valid()
	c.TLS = TLS{Enabled: true, CAFile: "/ca.pem"}
	out, err := yaml.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	got, err := Load(writeFile(t, "out.yaml", string(out)))
	if err != nil {
		t.Fatalf("Load of marshalled config: %v\n%s", err, out)
	}
	if !reflect.DeepEqual(got, c) {
		t.Fatalf("round trip =\n%v\nwant\n%v", got, c)
	}
}

// max_task_idle takes Kafka Streams' -1 as a negative duration (never
// wait), and is printed only when set.
func TestMaxTaskIdleFromEnv(t *testing.T) {
	clearEnv(t)
	t.Setenv("EOS_MAX_TASK_IDLE", "-1ms")
	got, err := FromEnv(valid())
	if err != nil {
		t.Fatal(err)
	}
	if got.MaxTaskIdle != -time.Millisecond || got.Validate() != nil {
		t.Fatalf("max_task_idle = %s (%v), want -1ms, valid", got.MaxTaskIdle, got.Validate())
	}
	if !strings.Contains(got.String(), "max_task_idle=-1ms") || strings.Contains(valid().String(), "max_task_idle") {
		t.Fatalf("String() = %s; unset: %s", got.String(), valid().String())
	}
}
