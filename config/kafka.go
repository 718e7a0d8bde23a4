package config

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// defaultClientID names clients of a Config without an AppID, such as
// eosctl's admin commands.
const defaultClientID = "eosflow"

// KgoOpts returns the franz-go options every eosflow client shares, so the
// runtime and the CLI reach the brokers the same way: seed brokers, a dial
// timeout of ConnectTimeout capped at 10s (so start-up can retry within its
// budget), the client id (AppID, or "eosflow"), TLS with the configured CA
// and client certificate, and SASL. It adds no group or transaction options;
// callers append those. It reads the TLS files and returns a *FieldError
// naming the file when one is unreadable; it does not run Validate.
func (c Config) KgoOpts() ([]kgo.Opt, error) {
	if len(c.Brokers) == 0 {
		return nil, &FieldError{Field: "brokers", Problem: "must not be empty; set brokers or EOS_BROKERS, e.g. 127.0.0.1:9092"}
	}
	clientID := c.AppID
	if clientID == "" {
		clientID = defaultClientID
	}
	opts := []kgo.Opt{
		kgo.SeedBrokers(c.Brokers...),
		kgo.ClientID(clientID),
	}
	if c.ConnectTimeout > 0 {
		opts = append(opts, kgo.DialTimeout(min(c.ConnectTimeout, DefaultConnectTimeout)))
	}
	if errs := c.TLS.validate(); len(errs) > 0 {
		return nil, errors.Join(errs...) // e.g. a CA file with TLS off: never fall back to plaintext silently
	}
	if c.TLS.Enabled {
		tc, err := c.TLS.config()
		if err != nil {
			return nil, err
		}
		opts = append(opts, kgo.DialTLSConfig(tc))
	}
	if c.SASL.Mechanism != "" {
		m, err := c.SASL.mechanism()
		if err != nil {
			return nil, err
		}
		opts = append(opts, kgo.SASL(m))
	}
	return opts, nil
}

// config builds the *tls.Config: the CA bundle replaces the system pool when
// set, and the client certificate enables mutual TLS.
func (t TLS) config() (*tls.Config, error) {
	tc := &tls.Config{
		MinVersion:         tls.VersionTLS12,
		InsecureSkipVerify: t.InsecureSkipVerify, //nolint:gosec // opt-in for test clusters, documented on the field
	}
	if t.CAFile != "" {
		pem, err := readFile("tls.ca_file", t.CAFile)
		if err != nil {
			return nil, err
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, &FieldError{Field: "tls.ca_file", Value: t.CAFile, Problem: "contains no PEM certificate; point it at a PEM-encoded CA bundle"}
		}
		tc.RootCAs = pool
	}
	if t.CertFile != "" {
		certPEM, err := readFile("tls.cert_file", t.CertFile)
		if err != nil {
			return nil, err
		}
		keyPEM, err := readFile("tls.key_file", t.KeyFile)
		if err != nil {
			return nil, err
		}
		cert, err := tls.X509KeyPair(certPEM, keyPEM)
		if err != nil {
			return nil, &FieldError{Field: "tls.cert_file", Value: t.CertFile, Err: err,
				Problem: fmt.Sprintf("cannot be used with tls.key_file %q: %v; check both are PEM and belong together", t.KeyFile, err)}
		}
		tc.Certificates = []tls.Certificate{cert}
	}
	return tc, nil
}

// readFile reads a file named by setting field, naming both on failure.
func readFile(field, path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, &FieldError{Field: field, Value: path, Err: err,
			Problem: fmt.Sprintf("cannot read: %v; check the path and its permissions", err)}
	}
	return b, nil
}

// mechanism builds the franz-go SASL mechanism.
func (s SASL) mechanism() (sasl.Mechanism, error) {
	if errs := s.validate(); len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	switch s.Mechanism {
	case SASLPlain:
		return plain.Auth{User: s.Username, Pass: s.Password}.AsMechanism(), nil
	case SASLScramSHA256:
		return scram.Auth{User: s.Username, Pass: s.Password}.AsSha256Mechanism(), nil
	case SASLScramSHA512:
		return scram.Auth{User: s.Username, Pass: s.Password}.AsSha512Mechanism(), nil
	}
	// validate rejects every other mechanism; kept for safety.
	return nil, &FieldError{Field: "sasl.mechanism", Value: s.Mechanism, Problem: "unknown SASL mechanism; use one of " + strings.Join(saslMechanisms, ", ")}
}
