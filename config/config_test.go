package config

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.yaml.in/yaml/v3"
)

func TestDefault(t *testing.T) {
	c := Default()
	host, _ := os.Hostname()
	tests := []struct {
		name      string
		got, want any
	}{
		{"brokers", len(c.Brokers), 0},
		{"app_id", c.AppID, ""},
		{"instance_id", c.InstanceID, host},
		{"guarantee", c.Guarantee, ExactlyOnce},
		{"commit_interval", c.CommitInterval, 100 * time.Millisecond},
		{"max_batch_records", c.MaxBatchRecords, 50000},
		{"transaction_timeout", c.TransactionTimeout, 10 * time.Second},
		{"session_timeout", c.SessionTimeout, 45 * time.Second},
		{"rebalance_timeout", c.RebalanceTimeout, 60 * time.Second},
		{"connect_timeout", c.ConnectTimeout, 10 * time.Second},
		{"recovery_timeout", c.RecoveryTimeout, 5 * time.Minute},
		{"max_task_idle", c.MaxTaskIdle, time.Duration(0)},
		{"leave_group_on_close", c.LeaveGroupOnClose, false},
		{"state_dir", c.StateDir, ""},
		{"log_level", c.LogLevel, "info"},
		{"metrics_addr", c.MetricsAddr, ""},
		{"tls", c.TLS, TLS{}},
		{"sasl", c.SASL, SASL{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.got != tt.want {
				t.Errorf("got %v, want %v", tt.got, tt.want)
			}
		})
	}
}

func TestDefaultIsValidOnceRequiredFieldsAreSet(t *testing.T) {
	if err := valid().Validate(); err != nil {
		t.Fatalf("Validate: %v", err)
	}
}

func TestGuarantees(t *testing.T) {
	want := []Guarantee{ExactlyOnce, Idempotent, AtLeastOnce, AtMostOnce}
	if got := Guarantees(); !reflect.DeepEqual(got, want) {
		t.Fatalf("Guarantees() = %v, want %v", got, want)
	}
	for _, g := range want {
		if !g.Valid() {
			t.Errorf("%s.Valid() = false", g)
		}
	}
	for _, g := range []Guarantee{"", "exactly_once", "EXACTLY-ONCE"} {
		if g.Valid() {
			t.Errorf("%q.Valid() = true", g)
		}
	}
}

// The separator of the transactional.id lies outside the names' alphabet,
// or "orders-eu" + "1" and "orders" + "eu-1" could share one.
func TestTransactionalIDSeparatorOutsideNames(t *testing.T) {
	if validName.MatchString(TransactionalIDSeparator) {
		t.Errorf("separator %q is a valid name character", TransactionalIDSeparator)
	}
}

const secret = "hunter2-do-not-print"

func withSecret() Config {
	c := valid()
	c.SASL = SASL{Mechanism: SASLScramSHA512, Username: "svc", Password: secret}
	return c
}

func TestPasswordNeverPrinted(t *testing.T) {
	c := withSecret()
	var zapBuf bytes.Buffer
	logger := zap.New(zapcore.NewCore(zapcore.NewJSONEncoder(zap.NewProductionEncoderConfig()), zapcore.AddSync(&zapBuf), zap.DebugLevel))
	logger.Info("start", zap.Any("config", c), zap.Any("sasl", c.SASL), zap.Object("obj", c))
	_ = logger.Sync()
	yamlOut, err := yaml.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	jsonOut, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}

	outputs := map[string]string{
		"String":       c.String(),
		"%v":           fmt.Sprintf("%v", c),
		"%+v":          fmt.Sprintf("%+v", c),
		"%#v":          fmt.Sprintf("%#v", c),
		"%s":           fmt.Sprintf("%s", c),
		"pointer %v":   fmt.Sprintf("%v", &c),
		"sasl %+v":     fmt.Sprintf("%+v", c.SASL),
		"sasl %#v":     fmt.Sprintf("%#v", c.SASL),
		"yaml":         string(yamlOut),
		"json":         string(jsonOut),
		"zap":          zapBuf.String(),
		"FieldErrors":  fmt.Sprint(c.Validate()),
		"bad env echo": fmt.Sprint(withSecretAndBadSASL().Validate()),
	}
	for name, out := range outputs {
		t.Run(name, func(t *testing.T) {
			if strings.Contains(out, secret) {
				t.Fatalf("output contains the password: %s", out)
			}
		})
	}
	for _, name := range []string{"String", "yaml", "json", "zap", "sasl %+v"} {
		if !strings.Contains(outputs[name], redacted) {
			t.Errorf("%s output does not show %s: %s", name, redacted, outputs[name])
		}
	}
}

func withSecretAndBadSASL() Config {
	c := withSecret()
	c.SASL.Mechanism = "GSSAPI"
	return c
}

func TestStringShape(t *testing.T) {
	c := valid()
	got := c.String()
	want := "brokers=127.0.0.1:9092 app_id=orders instance_id=worker-0 guarantee=exactly-once commit_interval=100ms max_batch_records=50000 transaction_timeout=10s session_timeout=45s rebalance_timeout=1m0s connect_timeout=10s recovery_timeout=5m0s leave_group_on_close=false state_dir=\"\" log_level=info metrics_addr=\"\""
	if got != want {
		t.Fatalf("String() =\n%s\nwant\n%s", got, want)
	}
	c.TLS.Enabled = true
	c.InstanceID = ""
	if got := c.String(); !strings.Contains(got, "tls.enabled=true") || !strings.Contains(got, `instance_id=""`) {
		t.Fatalf("String() = %s, want tls.enabled=true and an empty quoted instance_id", got)
	}
}

func TestZapFieldsTyped(t *testing.T) {
	enc := zapcore.NewMapObjectEncoder()
	if err := withSecret().MarshalLogObject(enc); err != nil {
		t.Fatal(err)
	}
	if got := enc.Fields["commit_interval"]; got != 100*time.Millisecond {
		t.Errorf("commit_interval = %#v, want a duration", got)
	}
	if got := enc.Fields["max_batch_records"]; got != 50000 {
		t.Errorf("max_batch_records = %#v, want 50000", got)
	}
	if got := enc.Fields["sasl.password"]; got != redacted {
		t.Errorf("sasl.password = %#v, want %s", got, redacted)
	}
	if _, ok := enc.Fields["tls.ca_file"]; ok {
		t.Errorf("unset tls.ca_file logged")
	}
}

// TestDocListsEveryVariable keeps the table in doc.go in step with Config.
func TestDocListsEveryVariable(t *testing.T) {
	doc, err := os.ReadFile("doc.go")
	if err != nil {
		t.Fatal(err)
	}
	c := Default()
	walk(reflect.ValueOf(&c).Elem(), "", func(f field) {
		if !bytes.Contains(doc, []byte(f.env)) || !bytes.Contains(doc, []byte(f.path)) {
			t.Errorf("doc.go does not list %s / %s", f.path, f.env)
		}
	})
}
