package kafkautil

import (
	"errors"

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
