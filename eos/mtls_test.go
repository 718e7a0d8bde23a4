package eos_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/eosflow/eosflow/config"
	"github.com/eosflow/eosflow/eos"
	"github.com/eosflow/eosflow/tools/conformance"
	"github.com/eosflow/eosflow/tools/kafkatest"
	"github.com/twmb/franz-go/pkg/kfake"
)

// A broker that requires a client certificate (mutual TLS) refuses a
// client without one and a client whose certificate another CA signed
// with a TLS alert. Run reports both at once as eos.ErrAuthentication
// naming tls.cert_file, not as unreachable brokers; with a certificate of
// the broker's CA the same pipeline runs. (The real broker's alerts are
// tested in integration/secure_mtls_test.go.)
func TestClientCertificateRefusedIsAuthentication(t *testing.T) {
	dir := t.TempDir()
	ca, caKey, caFile, caKeyFile := writeCA(t, dir, "ca", "eosflow test CA")
	_, _, otherCA, otherKey := writeCA(t, dir, "other", "other test CA")
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	env := kafkatest.Fake(t, kfake.TLS(&tls.Config{
		Certificates: []tls.Certificate{serverCert(t, ca, caKey)},
		ClientCAs:    pool,
		ClientAuth:   tls.RequireAndVerifyClientCert,
		MinVersion:   tls.VersionTLS13,
	}))
	good, err := kafkatest.SignClientCert(dir, caFile, caKeyFile, "app")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "untrusted"), 0o700); err != nil {
		t.Fatal(err)
	}
	untrusted, err := kafkatest.SignClientCert(filepath.Join(dir, "untrusted"), otherCA, otherKey, "app")
	if err != nil {
		t.Fatal(err)
	}
	env.TLS = config.TLS{Enabled: true, CAFile: caFile}
	for _, tc := range []struct {
		name string
		cert kafkatest.ClientCert
		want []string // in Run's error; nil: Run works
	}{
		{"trusted certificate", good, nil},
		{"no certificate", kafkatest.ClientCert{}, []string{"require a client certificate", "tls.cert_file", "EOS_TLS_CERT_FILE"}},
		{"certificate of another CA", untrusted, []string{"refused the client certificate", untrusted.CertFile, "tls.cert_file", "EOS_TLS_CERT_FILE"}},
	} {
		t.Run(strings.ReplaceAll(tc.name, " ", "_"), func(t *testing.T) {
			e := env.WithClientCert(tc.cert)
			cfg := e.Config("app", "1", config.ExactlyOnce)
			if tc.want == nil {
				e.WithClientCert(good).CreateTopics(t, 1, "in", "out")
				conformance.Seed(t, e, "in", 10)
				x := conformance.Start(t, cfg, conformance.Upper("in", "out", nil))
				x.WaitCommitted(t, 10, 30*time.Second)
				conformance.ExactlyOnce(t, e, "out", 10)
				return
			}
			r, err := eos.New(cfg, conformance.Upper("in", "out", nil))
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			begin := time.Now()
			err = r.Run(ctx)
			took := time.Since(begin)
			if !errors.Is(err, eos.ErrAuthentication) || errors.Is(err, eos.ErrUnreachable) {
				t.Fatalf("Run = %v, want eos.ErrAuthentication only", err)
			}
			if took > cfg.ConnectTimeout {
				t.Errorf("Run took %s to fail, want at most the connect timeout %s", took, cfg.ConnectTimeout)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("the error does not contain %q: %v", w, err)
				}
			}
		})
	}
}

// writeCA writes a self-signed CA certificate and its key to dir as
// name.pem and name.key.
func writeCA(t *testing.T, dir, name, cn string) (*x509.Certificate, *ecdsa.PrivateKey, string, string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile := filepath.Join(dir, name+".pem"), filepath.Join(dir, name+".key")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return cert, key, certFile, keyFile
}

// serverCert is a broker certificate for 127.0.0.1 signed by ca.
func serverCert(t *testing.T, ca *x509.Certificate, caKey *ecdsa.PrivateKey) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "127.0.0.1"},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		NotBefore:   time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}
