package main

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// runCLI runs eosctl in-process with args and returns stdout, stderr and
// the exit code. stdin may be nil.
func runCLI(t *testing.T, stdin io.Reader, args ...string) (string, string, int) {
	t.Helper()
	if stdin == nil {
		stdin = strings.NewReader("")
	}
	var out, errOut bytes.Buffer
	code := run(context.Background(), args, stdin, &out, &errOut)
	return out.String(), errOut.String(), code
}

// newCluster starts a one-broker kfake cluster with the given options and
// returns it with its address.
func newCluster(t *testing.T, opts ...kfake.Opt) (*kfake.Cluster, string) {
	t.Helper()
	c, err := kfake.NewCluster(append([]kfake.Opt{kfake.NumBrokers(1)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c, c.ListenAddrs()[0]
}

// newClient builds a franz-go client for test setup against addr.
func newClient(t *testing.T, addr string, opts ...kgo.Opt) *kgo.Client {
	t.Helper()
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(addr)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return cl
}

// newAdmin is an admin client on newClient, closed when t ends.
func newAdmin(t *testing.T, addr string) *kadm.Client {
	t.Helper()
	return kadm.NewClient(newClient(t, addr))
}

// syncBuffer is a bytes.Buffer safe to read while a command writes to it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func TestUnreachableBrokerFailsFast(t *testing.T) {
	start := time.Now()
	_, errOut, code := runCLI(t, nil, "--brokers", "127.0.0.1:1", "txn", "list")
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("took %s, want < 10s", took)
	}
	if code != exitFailure {
		t.Errorf("exit %d, want %d", code, exitFailure)
	}
	for _, want := range []string{"cannot reach broker(s) 127.0.0.1:1:", "check --brokers"} {
		if !strings.Contains(errOut, want) {
			t.Errorf("stderr lacks %q: %s", want, errOut)
		}
	}
}

func TestBrokersFromEnv(t *testing.T) {
	t.Setenv("EOS_BROKERS", "127.0.0.1:1")
	_, errOut, code := runCLI(t, nil, "txn", "list")
	if code != exitFailure || !strings.Contains(errOut, "127.0.0.1:1") {
		t.Errorf("exit %d, stderr %s: want the EOS_BROKERS address to be used", code, errOut)
	}
}

func TestUsageErrorsExit2(t *testing.T) {
	for _, args := range [][]string{
		{"no-such-command"},
		{"txn", "no-such-command"},
		{"--no-such-flag"},
		{"-o", "yaml", "dedup", "size", "--rate", "1", "--window", "1s", "--id-bytes", "1"},
		{"--timeout", "0s", "txn", "list"},
		{"txn", "describe"},
		{"txn", "producers"},
		{"txn", "hanging", "--topic", "a", "--broker", "1"},
		{"txn", "abort", "--topic", "a"},
		{"group", "lag"},
		{"completion", "powershell"},
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			_, errOut, code := runCLI(t, nil, args...)
			if code != exitUsage {
				t.Errorf("exit %d, want %d; stderr %s", code, exitUsage, errOut)
			}
			if !strings.Contains(errOut, "--help") {
				t.Errorf("stderr does not point at --help: %s", errOut)
			}
		})
	}
}

func TestHelpExitsZero(t *testing.T) {
	out, _, code := runCLI(t, nil)
	if code != exitOK || !strings.Contains(out, "txn") || !strings.Contains(out, "doctor") {
		t.Errorf("exit %d, output %s", code, out)
	}
	out, _, code = runCLI(t, nil, "txn", "--help")
	if code != exitOK || !strings.Contains(out, "hanging") {
		t.Errorf("exit %d, output %s", code, out)
	}
}

func TestCompletion(t *testing.T) {
	for _, shell := range []string{"bash", "zsh", "fish"} {
		out, errOut, code := runCLI(t, nil, "completion", shell)
		if code != exitOK || !strings.Contains(out, "eosctl") {
			t.Errorf("%s: exit %d, stderr %s", shell, code, errOut)
		}
	}
}

func TestExitCode(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want int
	}{
		{nil, exitOK},
		{errFindings, exitFailure},
		{usageErrorf("x"), exitUsage},
		{io.EOF, exitFailure},
	} {
		if got := exitCode(tc.err); got != tc.want {
			t.Errorf("exitCode(%v) = %d, want %d", tc.err, got, tc.want)
		}
	}
}

func TestBrokersFromConfigFile(t *testing.T) {
	_, addr := newCluster(t)
	cfg := filepath.Join(t.TempDir(), "p.yaml")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf("brokers: [%q]\n", addr)), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, errOut, code := runCLI(t, nil, "--config", cfg, "txn", "list"); code != exitOK {
		t.Errorf("brokers from --config: exit %d: %s", code, errOut)
	}
	// An explicit --brokers wins over the file.
	if _, errOut, code := runCLI(t, nil, "--config", cfg, "--brokers", "127.0.0.1:1", "txn", "list"); code != exitFailure || !strings.Contains(errOut, "127.0.0.1:1") {
		t.Errorf("--brokers over --config: exit %d: %s", code, errOut)
	}
	if _, errOut, code := runCLI(t, nil, "--config", filepath.Join(t.TempDir(), "missing.yaml"), "txn", "list"); code != exitFailure || !strings.Contains(errOut, "missing.yaml") {
		t.Errorf("missing --config: exit %d: %s", code, errOut)
	}
}

func TestTLSFlags(t *testing.T) {
	caPEM, srv := selfSignedTLS(t)
	_, addr := newCluster(t, kfake.TLS(srv))
	ca := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(ca, caPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, errOut, code := runCLI(t, nil, "--brokers", addr, "--tls-ca", ca, "txn", "list"); code != exitOK {
		t.Errorf("--tls-ca: exit %d: %s", code, errOut)
	}
	if _, errOut, code := runCLI(t, nil, "--brokers", addr, "--tls-insecure", "txn", "list"); code != exitOK {
		t.Errorf("--tls-insecure: exit %d: %s", code, errOut)
	}
	// Plaintext against a TLS listener names the likely fix.
	if _, errOut, code := runCLI(t, nil, "--brokers", addr, "--timeout", "2s", "txn", "list"); code != exitFailure || !strings.Contains(errOut, "check --tls") {
		t.Errorf("no --tls: exit %d: %s", code, errOut)
	}
}

func TestSASLFlagsAndEnvPassword(t *testing.T) {
	_, addr := newCluster(t, kfake.EnableSASL(), kfake.Superuser("SCRAM-SHA-512", "admin", "s3cret"))
	t.Setenv("EOS_SASL_PASSWORD", "s3cret")
	if _, errOut, code := runCLI(t, nil, "--brokers", addr, "--sasl-mechanism", "scram-sha-512", "--sasl-user", "admin", "txn", "list"); code != exitOK {
		t.Errorf("password from EOS_SASL_PASSWORD: exit %d: %s", code, errOut)
	}
	_, errOut, code := runCLI(t, nil, "--brokers", addr, "--sasl-mechanism", "SCRAM-SHA-512", "--sasl-user", "admin", "--sasl-password", "wrong", "txn", "list")
	if code != exitFailure || !strings.Contains(errOut, "--sasl") {
		t.Errorf("wrong password: exit %d: %s", code, errOut)
	}
	if strings.Contains(errOut, "wrong") {
		t.Errorf("the password leaked into the error: %s", errOut)
	}
}

// selfSignedTLS makes a certificate for 127.0.0.1 and returns it as a CA
// PEM and as the server's TLS config.
func selfSignedTLS(t *testing.T) ([]byte, *tls.Config) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "eosctl test"},
		IPAddresses:           []net.IP{net.ParseIP("127.0.0.1")},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		&tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}, MinVersion: tls.VersionTLS12}
}

func TestSilentBrokerTimesOut(t *testing.T) {
	// Accepts connections but never answers, like a wrong port or a
	// TLS listener without --tls.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			defer c.Close()
		}
	}()
	start := time.Now()
	_, errOut, code := runCLI(t, nil, "--brokers", ln.Addr().String(), "--timeout", "1s", "group", "lag", "g")
	if took := time.Since(start); took > 3*time.Second {
		t.Errorf("took %s with --timeout 1s", took)
	}
	if code != exitFailure || !strings.Contains(errOut, "do not answer Kafka requests") {
		t.Errorf("exit %d, stderr %s", code, errOut)
	}
}
