package kafkautil

import (
	"errors"
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
)

func TestIsFatal(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{kerr.TransactionalIDAuthorizationFailed, true},
		{kerr.TopicAuthorizationFailed, true},
		{kerr.GroupAuthorizationFailed, true},
		{fmt.Errorf("fetch: %w", kerr.ClusterAuthorizationFailed), true},
		{kerr.NotLeaderForPartition, false},
		{kerr.ProducerFenced, false},
		{errors.New("connection refused"), false},
		{nil, false},
	} {
		if got := IsFatal(tc.err); got != tc.want {
			t.Errorf("IsFatal(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}
