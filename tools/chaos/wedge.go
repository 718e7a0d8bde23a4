package chaos

import "time"

// wedgeAfter is how long the group may commit nothing, no broker restart
// under way, before the verifier probes its coordinator: well inside a
// worker's recovery_timeout (5 min by default), so that a restart that
// ends a wedge comes before the workers give up.
const wedgeAfter = 90 * time.Second

// maxWedgeRestarts bounds the restarts a run adds: hard restarts are what
// wedge a coordinator in the first place.
const maxWedgeRestarts = 3

// wedgeProbe is a probe's finding, with the group's progress and the
// planned restarts when it began: a finding is stale once either moved.
type wedgeProbe struct {
	why      string // unservedGroup's; "" when the coordinator served the group
	consumed int64
	restarts int
}

// wedgeWatch notices the group stalled on a wedged coordinator. Apache
// Kafka 4.4 can leave a __consumer_offsets partition unserved after a
// hard restart on a loaded machine until the broker restarts again (see
// unservedGroup); an operator restarts it, and so does the verifier, as
// a fault it counts apart from the planned ones. A stall alone is not
// enough: only a coordinator that serves no offset fetch for
// coordinatorProbe is restarted. Runs with --scale are left out: their
// progress is not counted until the input stops growing.
type wedgeWatch struct {
	after    time.Duration
	consumed int64
	since    time.Time // when consumed last moved, or a restart or probe ended
	probing  bool
}

// observe notes the group's committed progress at now, and whether a
// broker restart is under way; it reports whether to probe the
// coordinator now.
func (w *wedgeWatch) observe(now time.Time, consumed int64, brokerBusy bool) bool {
	if w.since.IsZero() || consumed != w.consumed || brokerBusy {
		w.consumed, w.since = consumed, now
		return false
	}
	if w.probing || now.Sub(w.since) < w.after {
		return false
	}
	w.probing = true
	return true
}

// probed ends a probe at now: the stall is timed afresh from it.
func (w *wedgeWatch) probed(now time.Time) {
	w.probing = false
	w.since = now
}
