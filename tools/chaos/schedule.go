package chaos

import (
	"math/rand/v2"
)

// faultKind is one kind of injected fault.
type faultKind int

const (
	faultKill          faultKind = iota // SIGKILL a worker mid-batch, then restart it
	faultTerm                           // SIGTERM a worker, then restart it
	faultBrokerRestart                  // hard-restart the broker(s)
	faultAddWorker                      // start one more worker: a rebalance
	faultRemoveWorker                   // stop a worker for good: a rebalance
)

func (k faultKind) String() string {
	switch k {
	case faultKill:
		return "kill"
	case faultTerm:
		return "term"
	case faultBrokerRestart:
		return "broker-restart"
	case faultAddWorker:
		return "add-worker"
	case faultRemoveWorker:
		return "remove-worker"
	}
	return "unknown"
}

// fault is one planned fault: it fires once the group has consumed the
// fraction at of the input (and recovered from the previous fault).
type fault struct {
	kind faultKind
	at   float64
}

// planFaults spreads the faults over the first 90% of the input in a
// random order, each near its own evenly spaced point so no two crowd
// together. Rebalances alternate: a worker is added, then one removed.
func planFaults(rng *rand.Rand, kills, terms, brokerRestarts, rebalances int) []fault {
	var kinds []faultKind
	add := func(k faultKind, n int) {
		for range n {
			kinds = append(kinds, k)
		}
	}
	add(faultKill, kills)
	add(faultTerm, terms)
	add(faultBrokerRestart, brokerRestarts)
	add(faultAddWorker, rebalances) // placeholders; alternated below
	rng.Shuffle(len(kinds), func(i, j int) { kinds[i], kinds[j] = kinds[j], kinds[i] })
	adding := true
	for i, k := range kinds {
		if k == faultAddWorker {
			if !adding {
				kinds[i] = faultRemoveWorker
			}
			adding = !adding
		}
	}
	step := 0.9 / float64(len(kinds)+1)
	plan := make([]fault, len(kinds))
	for i, k := range kinds {
		jitter := (rng.Float64() - 0.5) * step * 2 / 3
		plan[i] = fault{kind: k, at: step*float64(i+1) + jitter}
	}
	return plan
}

// faultGap is how much processing time auto pacing leaves between two
// planned faults, so each fault finds a group that recovered from the last.
const faultGap = 2.0 // seconds

// autoRate is the per-worker pace that leaves about faultGap seconds of
// processing between planned faults; 0 (unlimited) without faults.
func autoRate(records, workers, faults int) int {
	if faults == 0 || workers <= 0 {
		return 0
	}
	r := int(0.9 * float64(records) / (float64(faults+1) * float64(workers) * faultGap))
	return max(r, 50)
}
