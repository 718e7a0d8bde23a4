package eos_test

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/eosflow/eosflow/codec"
	"github.com/eosflow/eosflow/config"
	"github.com/eosflow/eosflow/eos"
	"github.com/eosflow/eosflow/processor"
	"github.com/eosflow/eosflow/state/pebble"
	"github.com/eosflow/eosflow/tools/conformance"
	"github.com/eosflow/eosflow/tools/kafkatest"
	"github.com/eosflow/eosflow/tools/leak"
	"github.com/eosflow/eosflow/tools/verdict"
	"github.com/eosflow/eosflow/topology"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// The SASL password is never printed: these tests run pipelines on a
// SASL broker with a password found nowhere else and grep everything the
// runtime puts out for it (see package leak for the forms looked for):
// its debug log, Run's error with every wrapped error and panic stack,
// Stats, /metrics, /readyz and /healthz, and the dead letters of records
// that failed or panicked, headers included.

// logBuffer collects a logger's output; safe for the runtime's goroutines.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) Sync() error { return nil }

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// debugLogger logs every level as JSON and as console lines, each with
// its caller and, from warnings up, a stack trace: every encoding a
// deployment might choose.
func debugLogger(buf *logBuffer) *zap.Logger {
	enc := zap.NewDevelopmentEncoderConfig()
	core := zapcore.NewTee(
		zapcore.NewCore(zapcore.NewJSONEncoder(enc), buf, zap.DebugLevel),
		zapcore.NewCore(zapcore.NewConsoleEncoder(enc), buf, zap.DebugLevel))
	return zap.New(core, zap.AddCaller(), zap.AddStacktrace(zap.WarnLevel))
}

// errorText is err as every format verb prints it, with each error it
// wraps and the stack of a recovered panic.
func errorText(err error) string {
	if err == nil {
		return ""
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%v\n%+v\n%#v\n%s\n", err, err, err, err)
	for queue := []error{err}; len(queue) > 0; queue = queue[1:] {
		e := queue[0]
		fmt.Fprintf(&b, "%T: %v\n", e, e)
		var ne *topology.NodeError
		if errors.As(e, &ne) && ne.Stack != nil {
			b.Write(ne.Stack)
		}
		switch u := e.(type) {
		case interface{ Unwrap() error }:
			if w := u.Unwrap(); w != nil {
				queue = append(queue, w)
			}
		case interface{ Unwrap() []error }:
			queue = append(queue, u.Unwrap()...)
		}
	}
	return b.String()
}

// secureFake is a kfake cluster with SASL and ACLs on, where the user
// "app" logs in with pw over PLAIN or SCRAM-SHA-512 as a super user, and
// "limited" with the same password holds no ACL. The test's own helpers
// connect as app.
func secureFake(t *testing.T, pw string) *kafkatest.Env {
	t.Helper()
	env := kafkatest.Fake(t, kfake.EnableSASL(), kfake.EnableACLs(),
		kfake.Superuser(config.SASLPlain, "app", pw),
		kfake.Superuser(config.SASLScramSHA512, "app", pw),
		kfake.User(config.SASLScramSHA512, "limited", pw))
	env.SASL = config.SASL{Mechanism: config.SASLScramSHA512, Username: "app", Password: pw}
	return env
}

// failingTopology is in → work → out, where work panics on records whose
// id ends in 7 and, when fail is set, returns an error for those ending
// in 3, under policy.
func failingTopology(in, out string, policy topology.ErrorPolicy, fail bool) *topology.Topology {
	top := topology.New()
	src := topology.Source(top, in, codec.Bytes(), topology.Named("in"))
	work := topology.MapValues(src, "work", func(_ context.Context, v []byte) ([]byte, error) {
		id, _ := verdict.ID(v)
		switch {
		case fail && id%10 == 3:
			return nil, fmt.Errorf("record %d: injected failure", id)
		case id%10 == 7:
			panic(fmt.Sprintf("record %d: injected panic", id))
		}
		return bytes.ToUpper(v), nil
	})
	topology.To(work, out, codec.Bytes(), topology.Named("out"))
	top.OnError("work", policy)
	return top
}

// fetch fetches url and returns the status line and body.
func fetch(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	return resp.Status + "\n" + string(body)
}

// recordText is a record as a consumer sees it: key, value and headers.
func recordText(r *kgo.Record) string {
	var b strings.Builder
	fmt.Fprintf(&b, "key=%s value=%s\n", r.Key, r.Value)
	for _, h := range r.Headers {
		fmt.Fprintf(&b, "%s=%s\n", h.Key, h.Value)
	}
	return b.String()
}

// A healthy exactly-once pipeline over SASL PLAIN (which sends the
// password itself), whose records fail or panic into a dead-letter
// topic, and a stateful one over SCRAM with a repartition topic and a
// changelog, both logging at debug level and serving metrics: nothing
// they print, serve or write holds the password.
func TestPasswordNeverLeaksFromPipelines(t *testing.T) {
	pw := leak.Secret(t)
	env := secureFake(t, pw)
	env.CreateTopics(t, 2, "in", "out", "dlq", "words", "counts")
	const n = 40
	conformance.Seed(t, env, "in", n)
	conformance.SeedValues(t, env, "words", 0, n)

	t.Run("dead letters", func(t *testing.T) {
		var logs logBuffer
		cfg := env.Config("secrets-dlq", "1", config.ExactlyOnce)
		cfg.SASL.Mechanism = config.SASLPlain
		cfg.LogLevel = "debug"
		cfg.MetricsAddr = "127.0.0.1:0"
		x := conformance.Start(t, cfg, failingTopology("in", "out", topology.DeadLetter("dlq"), true), eos.Logger(debugLogger(&logs)))
		x.WaitCommitted(t, n, 60*time.Second)
		base := "http://" + x.R.MetricsAddr()
		metrics := fetch(t, base+"/metrics")
		if !strings.Contains(metrics, "eosflow_") {
			t.Errorf("/metrics serves no eosflow metric:\n%s", metrics)
		}
		leak.Check(t, "/metrics", metrics, pw)
		leak.Check(t, "/readyz", fetch(t, base+"/readyz"), pw)
		leak.Check(t, "/healthz", fetch(t, base+"/healthz"), pw)
		x.Stop()
		err := x.Wait(t, 30*time.Second)
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
		stats := x.R.Stats()
		if stats.DeadLettered != 8 {
			t.Errorf("stats %+v, want 8 dead letters", stats)
		}
		leak.Check(t, "Stats", fmt.Sprintf("%v %+v %#v", stats, stats, stats), pw)

		dead := conformance.Drain(t, env, "dlq", 8)
		if len(dead) != 8 {
			t.Fatalf("%d dead letters, want 8", len(dead))
		}
		stacks := 0
		var all strings.Builder
		for _, r := range dead {
			dl, ok := processor.ParseDeadLetter(r.Headers)
			if !ok || dl.Error == "" {
				t.Errorf("not a dead letter: %s", recordText(r))
			}
			if dl.Stack != "" {
				stacks++
			}
			all.WriteString(recordText(r))
		}
		if stacks != 4 {
			t.Errorf("%d dead letters carry a stack, want the 4 of the panics", stacks)
		}
		leak.Check(t, "dead letters", all.String(), pw)

		out := logs.String()
		for _, want := range []string{`"L":"DEBUG"`, "record dead-lettered", "injected panic", `"N":"kgo"`} {
			if !strings.Contains(out, want) {
				t.Errorf("the debug log lacks %q, so it did not capture what it should:\n%s", want, out)
			}
		}
		leak.Check(t, "the debug log", out, pw)
	})

	t.Run("state and repartition", func(t *testing.T) {
		var logs logBuffer
		cfg := env.Config("secrets-count", "1", config.ExactlyOnce)
		cfg.LogLevel = "debug"
		cfg.StateDir = t.TempDir()
		reg := prometheus.NewRegistry()
		x := conformance.Start(t, cfg, conformance.GroupedCountTopology("words", "counts", pebble.New()),
			eos.Logger(debugLogger(&logs)), eos.Metrics(reg), eos.PurgeInterval(0))
		// Each record is read twice: from words, then from the
		// repartition topic.
		x.WaitCommitted(t, 2*n, 60*time.Second)
		families, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		var metrics strings.Builder
		for _, f := range families {
			metrics.WriteString(f.String() + "\n")
		}
		leak.Check(t, "the metrics registry", metrics.String(), pw)
		x.Stop()
		if err := x.Wait(t, 30*time.Second); err != nil {
			t.Fatalf("Run: %v", err)
		}
		changelog := conformance.Drain(t, env, topology.ChangelogTopic(cfg.AppID, "counts"), 1)
		if len(changelog) == 0 {
			t.Fatal("the changelog is empty")
		}
		var recs strings.Builder
		for _, r := range append(changelog, conformance.Drain(t, env, "counts", 1)...) {
			recs.WriteString(recordText(r))
		}
		leak.Check(t, "changelog and output records", recs.String(), pw)
		out := logs.String()
		if !strings.Contains(out, "created repartition topic") {
			t.Errorf("the debug log lacks the repartition topic's creation:\n%s", out)
		}
		leak.Check(t, "the debug log", out, pw)
	})
}

// Runs that fail (a panicking handler under the Fail policy, a wrong
// password, a principal without ACLs, an unreachable broker) and configs
// that fail validation while a password is set: no error, wrapped error,
// panic stack or log line holds the password.
func TestPasswordNeverLeaksFromFailures(t *testing.T) {
	pw, wrong := leak.Secret(t), leak.Secret(t)
	env := secureFake(t, pw)
	env.CreateTopics(t, 1, "in", "out")
	conformance.Seed(t, env, "in", 10)

	for _, tc := range []struct {
		name     string
		cfg      func(config.Config) config.Config
		check    func(t *testing.T, err error)
		wantLogs bool // the runtime logs on the way to this failure
	}{
		{
			name: "panic under the Fail policy",
			cfg:  func(c config.Config) config.Config { c.SASL.Mechanism = config.SASLPlain; return c },
			check: func(t *testing.T, err error) {
				var ne *topology.NodeError
				if !errors.As(err, &ne) || ne.Stack == nil || !strings.Contains(err.Error(), "injected panic") {
					t.Fatalf("Run = %v, want the recovered panic with its stack", err)
				}
			},
			wantLogs: true,
		},
		{
			name: "wrong password",
			cfg: func(c config.Config) config.Config {
				c.SASL.Password = wrong
				c.ConnectTimeout = 2 * time.Second
				return c
			},
			check: func(t *testing.T, err error) {
				if !errors.Is(err, eos.ErrAuthentication) && !errors.Is(err, eos.ErrUnreachable) {
					t.Fatalf("Run = %v, want an authentication failure (kfake drops the connection: unreachable)", err)
				}
			},
		},
		{
			name: "principal without ACLs",
			cfg:  func(c config.Config) config.Config { c.SASL.Username = "limited"; return c },
			check: func(t *testing.T, err error) {
				if !errors.Is(err, eos.ErrNotAuthorized) || !strings.Contains(err.Error(), "User:limited") {
					t.Fatalf("Run = %v, want an *eos.AuthorizationError for User:limited", err)
				}
			},
		},
		{
			name: "unreachable broker",
			cfg: func(c config.Config) config.Config {
				c.Brokers, c.ConnectTimeout = []string{"127.0.0.1:1"}, time.Second
				return c
			},
			check: func(t *testing.T, err error) {
				if !errors.Is(err, eos.ErrUnreachable) {
					t.Fatalf("Run = %v, want eos.ErrUnreachable", err)
				}
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var logs logBuffer
			cfg := tc.cfg(env.Config("secrets-"+strings.ReplaceAll(tc.name, " ", "-"), "1", config.ExactlyOnce))
			cfg.LogLevel = "debug"
			x := conformance.Start(t, cfg, failingTopology("in", "out", topology.Fail(), false), eos.Logger(debugLogger(&logs)))
			err := x.Wait(t, 60*time.Second)
			if err == nil {
				t.Fatal("Run returned nil")
			}
			t.Logf("Run: %v", leak.Mask(err.Error(), pw, wrong))
			tc.check(t, err)
			leak.Check(t, "Run's error", errorText(err), pw, wrong)
			if tc.wantLogs {
				leak.Check(t, "the debug log", logs.String(), pw, wrong)
			}
			checkIfAny(t, "the debug log", logs.String(), pw, wrong)
		})
	}

	t.Run("invalid config", func(t *testing.T) {
		valid := env.Config("secrets-invalid", "1", config.ExactlyOnce)
		for name, c := range map[string]func(*config.Config){
			"commit_interval 0":     func(c *config.Config) { c.CommitInterval = 0 },
			"unknown mechanism":     func(c *config.Config) { c.SASL.Mechanism = "SCRAM-SHA-1" },
			"password without SASL": func(c *config.Config) { c.SASL.Mechanism = "" },
			"bad instance_id":       func(c *config.Config) { c.InstanceID = "worker 0" },
			"many problems": func(c *config.Config) {
				c.Brokers, c.LogLevel, c.MetricsAddr, c.TLS.CAFile = []string{"nohost"}, "loud", "x", "/nonexistent"
			},
		} {
			cfg := valid
			c(&cfg)
			_, err := eos.New(cfg, failingTopology("in", "out", topology.Fail(), true))
			if !errors.Is(err, config.ErrInvalid) {
				t.Errorf("%s: New = %v, want config.ErrInvalid", name, err)
				continue
			}
			leak.Check(t, name+": New's error", errorText(err), pw)
			leak.Check(t, name+": the config", fmt.Sprintf("%v %+v %#v %s", cfg, cfg, cfg, cfg.SASL), pw)
		}
	})

	// A client key is never printed either: a key that does not belong
	// to the certificate, or the two files swapped, fail with errors that
	// name the files, not what is in them.
	t.Run("TLS key", func(t *testing.T) {
		certPEM, _ := keyPair(t)
		_, keyPEM := keyPair(t)
		dir := t.TempDir()
		certFile, keyFile := dir+"/client.pem", dir+"/client-key.pem"
		for path, body := range map[string][]byte{certFile: certPEM, keyFile: keyPEM} {
			if err := os.WriteFile(path, body, 0o600); err != nil {
				t.Fatal(err)
			}
		}
		block, _ := pem.Decode(keyPEM)
		body := base64.StdEncoding.EncodeToString(block.Bytes)
		secrets := []string{body[:64], body[len(body)-64:], hex.EncodeToString(block.Bytes[len(block.Bytes)-32:])}
		for name, files := range map[string][2]string{"mismatched": {certFile, keyFile}, "swapped": {keyFile, certFile}} {
			var logs logBuffer
			cfg := env.Config("secrets-tls", "1", config.ExactlyOnce)
			cfg.TLS = config.TLS{Enabled: true, CertFile: files[0], KeyFile: files[1]}
			cfg.LogLevel = "debug"
			x := conformance.Start(t, cfg, failingTopology("in", "out", topology.Fail(), false), eos.Logger(debugLogger(&logs)))
			err := x.Wait(t, 30*time.Second)
			if err == nil || !strings.Contains(err.Error(), "tls.") {
				t.Fatalf("%s: Run = %v, want an error naming the TLS settings", name, err)
			}
			leak.Check(t, name+": Run's error", errorText(err), append(secrets, pw)...)
			checkIfAny(t, name+": the debug log", logs.String(), append(secrets, pw)...)
		}
	})

	// The checker itself finds a password that a run did print.
	t.Run("negative control", func(t *testing.T) {
		leaky := errorText(fmt.Errorf("login: %w", &config.FieldError{Field: "sasl.password", Value: pw, Problem: "rejected"}))
		if leak.Find(leaky, pw) == nil {
			t.Fatalf("the checker misses the password in %q", leak.Mask(leaky, pw))
		}
		var logs logBuffer
		debugLogger(&logs).Warn("connecting", zap.String("auth", "PLAIN \x00app\x00"+pw))
		if leak.Find(logs.String(), pw) == nil {
			t.Fatal("the checker misses the password in a log line")
		}
	})
}

// checkIfAny is leak.Check for an output that may rightly be empty.
func checkIfAny(t *testing.T, what, out string, secrets ...string) {
	t.Helper()
	if out != "" {
		leak.Check(t, what, out, secrets...)
	}
}

// keyPair returns a self-signed certificate and its private key, as PEM.
func keyPair(t *testing.T) (certPEM, keyPEM []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "client"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	pkcs8, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: pkcs8})
}
