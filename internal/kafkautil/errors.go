package kafkautil

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net"

	"github.com/twmb/franz-go/pkg/kerr"
)

// IsFatal reports whether err is an authorization failure. The broker
// refuses these credentials the same way on every attempt, so neither a
// retry nor a new client can fix it: the caller should stop and name the
// missing ACL instead of trying again.
func IsFatal(err error) bool {
	return errors.Is(err, kerr.TransactionalIDAuthorizationFailed) ||
		errors.Is(err, kerr.TopicAuthorizationFailed) ||
		errors.Is(err, kerr.GroupAuthorizationFailed) ||
		errors.Is(err, kerr.ClusterAuthorizationFailed)
}

// IsSASLFailure reports whether err is the brokers refusing the client's
// SASL login: a wrong user name, password or mechanism. The same
// credentials fail the same way on every attempt.
func IsSASLFailure(err error) bool {
	return errors.Is(err, kerr.SaslAuthenticationFailed) ||
		errors.Is(err, kerr.UnsupportedSaslMechanism) ||
		errors.Is(err, kerr.IllegalSaslState)
}

// IsTLSFailure reports whether err is the client refusing the brokers'
// certificate: signed by a CA it does not trust, issued for another name,
// or expired. No retry changes the certificate.
func IsTLSFailure(err error) bool {
	var (
		unknown  x509.UnknownAuthorityError
		hostname x509.HostnameError
		invalid  x509.CertificateInvalidError
		verify   *tls.CertificateVerificationError
	)
	return errors.As(err, &unknown) || errors.As(err, &hostname) ||
		errors.As(err, &invalid) || errors.As(err, &verify)
}

// refusedCertAlerts are the TLS alerts, as crypto/tls spells them, with
// which a server refuses the client's certificate or its absence: Java's
// brokers send "bad certificate" for both an untrusted certificate and a
// missing one, Go servers "unknown certificate authority" and "certificate
// required".
var refusedCertAlerts = map[string]bool{
	"tls: bad certificate":               true,
	"tls: unsupported certificate":       true,
	"tls: revoked certificate":           true,
	"tls: expired certificate":           true,
	"tls: unknown certificate":           true,
	"tls: unknown certificate authority": true,
	"tls: access denied":                 true,
	"tls: certificate required":          true,
}

// IsClientCertRefused reports whether err is the brokers refusing the
// client's TLS certificate, or the lack of one, on a listener that
// requires mutual TLS: a TLS alert the broker sent ("remote error: tls:
// bad certificate"). It arrives as a network error, yet no retry helps
// until the client presents a certificate the brokers trust.
func IsClientCertRefused(err error) bool {
	var oe *net.OpError
	for e := err; errors.As(e, &oe); e = oe.Err {
		if oe.Op == "remote error" && oe.Err != nil && refusedCertAlerts[oe.Err.Error()] {
			return true
		}
		if oe.Err == nil {
			break
		}
	}
	return false
}
