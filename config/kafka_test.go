package config

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
	"io/fs"
	"math/big"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
)

// testPKI is a throw-away CA with one server and one client certificate.
type testPKI struct {
	caFile, certFile, keyFile string
	server                    tls.Certificate
	clientCAs                 *x509.CertPool
}

func newTestPKI(t *testing.T) testPKI {
	t.Helper()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	caTmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "eosflow test CA"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		IsCA:                  true,
		KeyUsage:              x509.KeyUsageCertSign,
		BasicConstraintsValid: true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caCert, _ := x509.ParseCertificate(caDER)
	issue := func(serial int64, usage x509.ExtKeyUsage) ([]byte, []byte, tls.Certificate) {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		tmpl := &x509.Certificate{
			SerialNumber: big.NewInt(serial),
			Subject:      pkix.Name{CommonName: "127.0.0.1"},
			NotBefore:    time.Now().Add(-time.Hour),
			NotAfter:     time.Now().Add(time.Hour),
			KeyUsage:     x509.KeyUsageDigitalSignature,
			ExtKeyUsage:  []x509.ExtKeyUsage{usage},
			IPAddresses:  []net.IP{net.ParseIP("127.0.0.1")},
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &key.PublicKey, caKey)
		if err != nil {
			t.Fatal(err)
		}
		keyDER, err := x509.MarshalECPrivateKey(key)
		if err != nil {
			t.Fatal(err)
		}
		certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
		keyPEM := pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})
		pair, err := tls.X509KeyPair(certPEM, keyPEM)
		if err != nil {
			t.Fatal(err)
		}
		return certPEM, keyPEM, pair
	}
	_, _, server := issue(2, x509.ExtKeyUsageServerAuth)
	clientCert, clientKey, _ := issue(3, x509.ExtKeyUsageClientAuth)
	pool := x509.NewCertPool()
	pool.AddCert(caCert)
	return testPKI{
		caFile:    writeFile(t, "ca.pem", string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}))),
		certFile:  writeFile(t, "client.pem", string(clientCert)),
		keyFile:   writeFile(t, "client.key", string(clientKey)),
		server:    server,
		clientCAs: pool,
	}
}

func TestKgoOptsErrors(t *testing.T) {
	pki := newTestPKI(t)
	notPEM := writeFile(t, "notpem.txt", "hello")
	tests := []struct {
		name    string
		change  func(*Config)
		field   string
		mention string
	}{
		{"no brokers", func(c *Config) { c.Brokers = nil }, "brokers", "EOS_BROKERS"},
		{"missing CA file", func(c *Config) { c.TLS = TLS{Enabled: true, CAFile: "/nonexistent/ca.pem"} }, "tls.ca_file", "/nonexistent/ca.pem"},
		{"CA file without PEM", func(c *Config) { c.TLS = TLS{Enabled: true, CAFile: notPEM} }, "tls.ca_file", notPEM},
		{"missing cert file", func(c *Config) { c.TLS = TLS{Enabled: true, CertFile: "/nonexistent/c.pem", KeyFile: pki.keyFile} }, "tls.cert_file", "/nonexistent/c.pem"},
		{"missing key file", func(c *Config) { c.TLS = TLS{Enabled: true, CertFile: pki.certFile, KeyFile: "/nonexistent/c.key"} }, "tls.key_file", "/nonexistent/c.key"},
		{"mismatched pair", func(c *Config) { c.TLS = TLS{Enabled: true, CertFile: pki.certFile, KeyFile: pki.caFile} }, "tls.cert_file", "belong together"},
		{"cert without key", func(c *Config) { c.TLS = TLS{Enabled: true, CertFile: pki.certFile} }, "tls.key_file", "tls.cert_file"},
		{"tls files with tls off", func(c *Config) { c.TLS = TLS{CAFile: pki.caFile} }, "tls.enabled", "true"},
		{"unknown sasl", func(c *Config) { c.SASL = SASL{Mechanism: "OAUTHBEARER", Username: "u", Password: "p"} }, "sasl.mechanism", "SCRAM-SHA-512"},
		{"sasl without password", func(c *Config) { c.SASL = SASL{Mechanism: SASLPlain, Username: "u"} }, "sasl.password", "EOS_SASL_PASSWORD"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := valid()
			tt.change(&c)
			opts, err := c.KgoOpts()
			if err == nil {
				t.Fatalf("KgoOpts: no error, %d options", len(opts))
			}
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

func TestKgoOptsMissingFileUnwraps(t *testing.T) {
	c := valid()
	c.TLS = TLS{Enabled: true, CAFile: "/nonexistent/ca.pem"}
	_, err := c.KgoOpts()
	if !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("error %v does not unwrap to fs.ErrNotExist", err)
	}
}

func TestKgoOptsClientSettings(t *testing.T) {
	tests := []struct {
		name         string
		change       func(*Config)
		clientID     string
		dialTimeout  time.Duration
		seedBrokerN  int
		wantTLS      bool
		wantSASLName string
	}{
		{"defaults", func(*Config) {}, "orders", 10 * time.Second, 1, false, ""},
		{"no app id", func(c *Config) { c.AppID = "" }, "eosflow", 10 * time.Second, 1, false, ""},
		{"short connect timeout", func(c *Config) { c.ConnectTimeout = 2 * time.Second }, "orders", 2 * time.Second, 1, false, ""},
		{"long connect timeout capped", func(c *Config) { c.ConnectTimeout = time.Minute }, "orders", 10 * time.Second, 1, false, ""},
		{"two brokers", func(c *Config) { c.Brokers = []string{"a:1", "b:2"} }, "orders", 10 * time.Second, 2, false, ""},
		{"plain", func(c *Config) { c.SASL = SASL{Mechanism: SASLPlain, Username: "u", Password: "p"} }, "orders", 10 * time.Second, 1, false, "PLAIN"},
		{"scram-256", func(c *Config) { c.SASL = SASL{Mechanism: SASLScramSHA256, Username: "u", Password: "p"} }, "orders", 10 * time.Second, 1, false, "SCRAM-SHA-256"},
		{"scram-512 over tls", func(c *Config) {
			c.TLS.Enabled = true
			c.SASL = SASL{Mechanism: SASLScramSHA512, Username: "u", Password: "p"}
		}, "orders", 10 * time.Second, 1, true, "SCRAM-SHA-512"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := valid()
			tt.change(&c)
			opts, err := c.KgoOpts()
			if err != nil {
				t.Fatal(err)
			}
			cl, err := kgo.NewClient(opts...)
			if err != nil {
				t.Fatalf("kgo.NewClient: %v", err)
			}
			defer cl.Close()
			if got := cl.OptValue(kgo.ClientID); got != tt.clientID {
				t.Errorf("ClientID = %v, want %s", got, tt.clientID)
			}
			if got := cl.OptValue(kgo.DialTimeout); got != tt.dialTimeout {
				t.Errorf("DialTimeout = %v, want %s", got, tt.dialTimeout)
			}
			if got := cl.OptValue(kgo.SeedBrokers).([]string); len(got) != tt.seedBrokerN {
				t.Errorf("SeedBrokers = %v, want %d", got, tt.seedBrokerN)
			}
			if got := cl.OptValue(kgo.DialTLSConfig).(*tls.Config); (got != nil) != tt.wantTLS {
				t.Errorf("DialTLSConfig = %v, want TLS %v", got, tt.wantTLS)
			}
			var sasls []string
			if v, ok := cl.OptValue(kgo.SASL).([]sasl.Mechanism); ok {
				for _, m := range v {
					sasls = append(sasls, m.Name())
				}
			}
			if got := strings.Join(sasls, ","); got != tt.wantSASLName {
				t.Errorf("SASL mechanisms = %q, want %q", got, tt.wantSASLName)
			}
		})
	}
}

// TestKgoOptsConnect proves the options reach a broker that demands mutual
// TLS and SCRAM, and that the wrong password is refused.
func TestKgoOptsConnect(t *testing.T) {
	pki := newTestPKI(t)
	cluster, err := kfake.NewCluster(
		kfake.NumBrokers(1),
		kfake.EnableSASL(),
		kfake.Superuser(SASLScramSHA512, "svc", "s3cret"),
		kfake.TLS(&tls.Config{
			Certificates: []tls.Certificate{pki.server},
			ClientCAs:    pki.clientCAs,
			ClientAuth:   tls.RequireAndVerifyClientCert,
			MinVersion:   tls.VersionTLS12,
		}),
	)
	if err != nil {
		t.Fatal(err)
	}
	defer cluster.Close()

	ping := func(password string) error {
		c := valid()
		c.Brokers = cluster.ListenAddrs()
		c.ConnectTimeout = 5 * time.Second
		c.TLS = TLS{Enabled: true, CAFile: pki.caFile, CertFile: pki.certFile, KeyFile: pki.keyFile}
		c.SASL = SASL{Mechanism: SASLScramSHA512, Username: "svc", Password: password}
		if err := c.Validate(); err != nil {
			t.Fatal(err)
		}
		opts, err := c.KgoOpts()
		if err != nil {
			t.Fatal(err)
		}
		cl, err := kgo.NewClient(append(opts, kgo.RetryTimeout(2*time.Second))...)
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		return cl.Ping(ctx)
	}
	if err := ping("s3cret"); err != nil {
		t.Fatalf("Ping with the right password over mutual TLS: %v", err)
	}
	if err := ping("wrong"); err == nil {
		t.Fatal("Ping with the wrong password succeeded")
	}
}
