package kafkautil

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

func TestAuthenticationFailures(t *testing.T) {
	for _, tc := range []struct {
		name      string
		err       error
		sasl, tls bool
	}{
		{"wrong password", fmt.Errorf("ping: %w", kerr.SaslAuthenticationFailed), true, false},
		{"unknown mechanism", kerr.UnsupportedSaslMechanism, true, false},
		{"untrusted CA", fmt.Errorf("unable to dial: %w", &tls.CertificateVerificationError{Err: x509.UnknownAuthorityError{}}), false, true},
		{"wrong host name", fmt.Errorf("unable to dial: %w", x509.HostnameError{Host: "kafka"}), false, true},
		{"expired", x509.CertificateInvalidError{Reason: x509.Expired}, false, true},
		{"connection refused", fmt.Errorf("unable to dial: %w", io.EOF), false, false},
		{"missing ACL", kerr.TopicAuthorizationFailed, false, false},
		{"other", errors.New("boom"), false, false},
	} {
		if got := IsSASLFailure(tc.err); got != tc.sasl {
			t.Errorf("%s: IsSASLFailure = %v, want %v", tc.name, got, tc.sasl)
		}
		if got := IsTLSFailure(tc.err); got != tc.tls {
			t.Errorf("%s: IsTLSFailure = %v, want %v", tc.name, got, tc.tls)
		}
	}
}

// alertText stands in for crypto/tls's unexported alert type: the error
// a TLS connection returns carries the alert the peer sent.
type alertText string

func (a alertText) Error() string { return string(a) }

// remoteAlert is how crypto/tls reports an alert the server sent.
func remoteAlert(text string) error {
	return &net.OpError{Op: "remote error", Err: alertText(text)}
}

func TestClientCertRefused(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"Java broker, untrusted or missing certificate", fmt.Errorf("ping: %w", remoteAlert("tls: bad certificate")), true},
		{"Java broker under TLS 1.2, untrusted certificate", remoteAlert("tls: unknown certificate"), true},
		{"Go server, no certificate (TLS 1.3)", remoteAlert("tls: certificate required"), true},
		{"Go server, untrusted certificate", remoteAlert("tls: unknown certificate authority"), true},
		{"expired client certificate", remoteAlert("tls: expired certificate"), true},
		{"revoked client certificate", remoteAlert("tls: revoked certificate"), true},
		{"access denied", remoteAlert("tls: access denied"), true},
		{"wrapped in a dial error", &net.OpError{Op: "dial", Err: remoteAlert("tls: bad certificate")}, true},
		{"no common cipher or version", remoteAlert("tls: handshake failure"), false},
		{"protocol version", remoteAlert("tls: protocol version not supported"), false},
		{"broker certificate untrusted by the client", &tls.CertificateVerificationError{Err: x509.UnknownAuthorityError{}}, false},
		{"connection refused", &net.OpError{Op: "dial", Err: syscall.ECONNREFUSED}, false},
		{"reset", &net.OpError{Op: "read", Err: syscall.ECONNRESET}, false},
		{"EOF", io.EOF, false},
		{"wrong password", kerr.SaslAuthenticationFailed, false},
		{"nil", nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := IsClientCertRefused(tc.err); got != tc.want {
				t.Errorf("IsClientCertRefused(%v) = %v, want %v", tc.err, got, tc.want)
			}
			if tc.want && (IsTLSFailure(tc.err) || IsSASLFailure(tc.err)) {
				t.Errorf("%v is also classed as the client refusing the server or a SASL failure", tc.err)
			}
		})
	}
}

// TestClientCertRefusedHandshake meets the real errors: a TLS 1.3 server
// that requires a client certificate signed by its CA refuses a client
// without one and a client whose certificate another CA signed. (Under TLS
// 1.2 a Go server answers both with "handshake failure", which also means
// no common cipher, so it is not counted; Java's brokers say "bad
// certificate" and "unknown certificate" there.)
func TestClientCertRefusedHandshake(t *testing.T) {
	ca, caKey := testCA(t, "test CA")
	other, otherKey := testCA(t, "other CA")
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	server := leafCert(t, ca, caKey, "localhost", x509.ExtKeyUsageServerAuth)
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{
		Certificates: []tls.Certificate{server},
		ClientCAs:    pool,
		ClientAuth:   tls.RequireAndVerifyClientCert,
		MinVersion:   tls.VersionTLS13,
	})
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
			go func() {
				defer c.Close()
				_ = c.(*tls.Conn).Handshake()
				_, _ = io.Copy(io.Discard, c)
			}()
		}
	}()
	for _, tc := range []struct {
		name  string
		certs []tls.Certificate
		want  bool
	}{
		{"trusted client certificate", []tls.Certificate{leafCert(t, ca, caKey, "app", x509.ExtKeyUsageClientAuth)}, false},
		{"no client certificate", nil, true},
		{"client certificate of another CA", []tls.Certificate{leafCert(t, other, otherKey, "app", x509.ExtKeyUsageClientAuth)}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := dialAndRead(ln.Addr().String(), &tls.Config{
				RootCAs: pool, ServerName: "localhost", Certificates: tc.certs, MinVersion: tls.VersionTLS13,
			})
			if got := IsClientCertRefused(err); got != tc.want {
				t.Errorf("IsClientCertRefused(%v) = %v, want %v", err, got, tc.want)
			}
		})
	}
}

// dialAndRead does what a Kafka client does first: handshake, send a
// request and read the answer. Under TLS 1.3 the server checks the client
// certificate after the client's handshake is done, so its alert comes
// with the first read. A deadline stands in for the answer of a server
// that accepted the certificate.
func dialAndRead(addr string, cfg *tls.Config) error {
	c, err := tls.Dial("tcp", addr, cfg)
	if err != nil {
		return err
	}
	defer c.Close()
	if _, err := c.Write([]byte("ping")); err != nil {
		return err
	}
	if err := c.SetReadDeadline(time.Now().Add(time.Second)); err != nil {
		return err
	}
	_, err = c.Read(make([]byte, 1))
	return err
}

func testCA(t *testing.T, name string) (*x509.Certificate, *ecdsa.PrivateKey) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return cert, key
}

func leafCert(t *testing.T, ca *x509.Certificate, caKey *ecdsa.PrivateKey, cn string, usage x509.ExtKeyUsage) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: cn}, DNSNames: []string{cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}
