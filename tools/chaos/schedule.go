package chaos

import (
	"math/rand/v2"
	"time"
)

// faultKind is one kind of injected fault.
type faultKind int

const (
	faultKill           faultKind = iota // SIGKILL a worker mid-batch, then restart it
	faultTerm                            // SIGTERM a worker, then restart it
	faultBrokerRestart                   // hard-restart the broker(s)
	faultAddWorker                       // start one more worker: a rebalance
	faultRemoveWorker                    // stop a worker for good: a rebalance
	faultNetCut                          // cut one broker from the clients, from its peers, or isolate it; then heal
	faultPause                           // SIGSTOP one broker past the session and transaction timeouts; then SIGCONT
	faultCoordinatorCut                  // cut the app's transaction or group coordinator from the clients; then heal
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
	case faultNetCut:
		return "net-cut"
	case faultPause:
		return "pause"
	case faultCoordinatorCut:
		return "coordinator-cut"
	}
	return "unknown"
}

// NetCutActions are the netcluster.sh commands a network cut takes in
// turn, and coordinatorKinds the coordinators a faultCoordinatorCut cuts
// in turn.
var (
	NetCutActions    = []string{"cut-clients", "cut-peers", "isolate"}
	coordinatorKinds = []string{"txn", "group"}
)

// fault is one planned fault: it fires once the group has consumed the
// fraction at of the input (and recovered from the previous fault).
// variant picks a network fault's action: NetCutActions[variant] for
// faultNetCut, coordinatorKinds[variant] for faultCoordinatorCut.
type fault struct {
	kind    faultKind
	at      float64
	variant int
}

// faultCounts is how many faults of each kind a run plans.
type faultCounts struct {
	kills, terms, brokerRestarts, rebalances int
	netCuts, pauses, coordinatorCuts         int
}

// network is how many of the faults are network faults: each holds for
// a while, and the group may stall through it.
func (c faultCounts) network() int { return c.netCuts + c.pauses + c.coordinatorCuts }

// planFaults spreads the faults over the first 90% of the input in a
// random order, each near its own evenly spaced point so no two crowd
// together. Rebalances alternate: a worker is added, then one removed.
// Network cuts take cut-clients, cut-peers and isolate in turn, and
// coordinator cuts the transaction and the group coordinator in turn,
// each from a random start, so that a few of them cover every action.
func planFaults(rng *rand.Rand, n faultCounts) []fault {
	var kinds []faultKind
	add := func(k faultKind, n int) {
		for range n {
			kinds = append(kinds, k)
		}
	}
	add(faultKill, n.kills)
	add(faultTerm, n.terms)
	add(faultBrokerRestart, n.brokerRestarts)
	add(faultAddWorker, n.rebalances) // placeholders; alternated below
	add(faultNetCut, n.netCuts)
	add(faultPause, n.pauses)
	add(faultCoordinatorCut, n.coordinatorCuts)
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
	cut, coord := rng.IntN(len(NetCutActions)), rng.IntN(len(coordinatorKinds))
	for i, k := range kinds {
		jitter := (rng.Float64() - 0.5) * step * 2 / 3
		plan[i] = fault{kind: k, at: step*float64(i+1) + jitter}
		switch k {
		case faultNetCut:
			plan[i].variant, cut = cut, (cut+1)%len(NetCutActions)
		case faultCoordinatorCut:
			plan[i].variant, coord = coord, (coord+1)%len(coordinatorKinds)
		}
	}
	return plan
}

// faultGap is how much processing time auto pacing leaves between two
// planned faults, so each fault finds a group that recovered from the last.
const faultGap = 2.0 // seconds

// autoRate is the per-worker pace that leaves about faultGap seconds of
// processing between planned faults; 0 (unlimited) without faults. held
// is how long the planned network faults hold in all: the group may work
// on through them, so they count as processing time too, or a fault that
// does not stall the group could let it consume the input before the
// later faults are due.
func autoRate(records, workers, faults int, held time.Duration) int {
	if faults == 0 || workers <= 0 {
		return 0
	}
	seconds := float64(faults+1)*faultGap + held.Seconds()
	r := int(0.9 * float64(records) / (seconds * float64(workers)))
	return max(r, 50)
}
