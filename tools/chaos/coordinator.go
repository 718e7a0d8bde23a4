package chaos

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
)

// coordinatorProbe is how long a run that timed out probes its group's
// coordinator, and how long each probe may take.
const (
	coordinatorProbe     = 15 * time.Second
	coordinatorProbeEach = 5 * time.Second
)

// unservedGroup probes group's coordinator with offset fetches for up to
// d and, when it served none, says what it answered. Apache Kafka 4.4 can
// leave a __consumer_offsets partition in a FAILED state after a hard
// restart on a loaded machine (its log: "Ignored load completion …
// FAILED state"), and then answers NOT_COORDINATOR until the broker
// restarts: a run that times out then failed on the broker, not on the
// pipeline, and must say so. It returns "" when the coordinator served
// the group.
func unservedGroup(ctx context.Context, adm *kadm.Client, group string, d time.Duration) string {
	deadline := time.Now().Add(d)
	var (
		last  error
		tries int
	)
	for tries == 0 || time.Now().Before(deadline) {
		pctx, cancel := context.WithTimeout(ctx, coordinatorProbeEach)
		_, err := adm.FetchOffsets(pctx, group)
		cancel()
		tries++
		if !unserved(err) {
			return ""
		}
		last = err
		if ctx.Err() != nil {
			break
		}
		time.Sleep(time.Second)
	}
	return fmt.Sprintf("the coordinator of group %s served none of %d offset fetches over %s (last: %v): the broker did not serve the group, so the run could not finish; on Apache Kafka look for \"Ignored load completion\" or NOT_COORDINATOR in the broker log and restart the broker (`integration/kafka/kafka.sh restart`)",
		group, tries, d, last)
}

// unserved reports whether err means the coordinator did not serve the
// request: not there, not loaded, or no answer at all. Any other answer,
// an error for the group included, is the coordinator serving it.
func unserved(err error) bool {
	return errors.Is(err, kerr.NotCoordinator) || errors.Is(err, kerr.CoordinatorNotAvailable) ||
		errors.Is(err, kerr.CoordinatorLoadInProgress) || errors.Is(err, context.DeadlineExceeded)
}
