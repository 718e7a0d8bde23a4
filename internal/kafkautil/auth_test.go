package kafkautil

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"testing"

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
