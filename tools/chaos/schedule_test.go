package chaos

import (
	"errors"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

func TestPlanFaults(t *testing.T) {
	for _, tc := range []struct {
		name                            string
		kills, terms, brokers, rebalace int
	}{
		{"none", 0, 0, 0, 0},
		{"kills only", 3, 0, 0, 0},
		{"everything", 10, 2, 2, 3},
		{"large", 30, 5, 5, 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(1, 2))
			plan := planFaults(rng, faultCounts{kills: tc.kills, terms: tc.terms, brokerRestarts: tc.brokers, rebalances: tc.rebalace})
			count := map[faultKind]int{}
			prev, workers := 0.0, 0
			for i, f := range plan {
				count[f.kind]++
				if f.at <= prev || f.at > 0.9 {
					t.Errorf("fault %d (%s) at %.3f: want increasing points in (0, 0.9], previous %.3f", i, f.kind, f.at, prev)
				}
				prev = f.at
				switch f.kind {
				case faultAddWorker:
					workers++
				case faultRemoveWorker:
					workers--
				}
				if workers < 0 || workers > 1 {
					t.Errorf("fault %d: adds and removals must alternate, starting with an add; extra workers %d", i, workers)
				}
			}
			want := map[faultKind]int{faultKill: tc.kills, faultTerm: tc.terms, faultBrokerRestart: tc.brokers}
			for k, n := range want {
				if count[k] != n {
					t.Errorf("%s: %d planned, want %d", k, count[k], n)
				}
			}
			if got := count[faultAddWorker] + count[faultRemoveWorker]; got != tc.rebalace {
				t.Errorf("rebalances: %d planned, want %d", got, tc.rebalace)
			}
		})
	}
}

func TestPlanFaultsRepeatsWithTheSeed(t *testing.T) {
	n := faultCounts{kills: 5, terms: 2, brokerRestarts: 1, rebalances: 2, netCuts: 3, pauses: 2, coordinatorCuts: 2}
	a := planFaults(rand.New(rand.NewPCG(7, 7)), n)
	b := planFaults(rand.New(rand.NewPCG(7, 7)), n)
	for i := range a {
		if a[i] != b[i] {
			t.Fatalf("fault %d differs with the same seed: %v vs %v", i, a[i], b[i])
		}
	}
}

func TestAutoRate(t *testing.T) {
	if r := autoRate(100_000, 3, 0, 0); r != 0 {
		t.Errorf("no faults: rate %d, want 0 (unlimited)", r)
	}
	// 12 faults over 100,000 records and 3 workers: 90,000/(13*3*2).
	if r := autoRate(100_000, 3, 12, 0); r != 1153 {
		t.Errorf("rate %d, want 1153", r)
	}
	// Network faults holding 34s in all count as processing time:
	// 90,000/((13*2+34)*3).
	if r := autoRate(100_000, 3, 12, 34*time.Second); r != 500 {
		t.Errorf("with network faults: rate %d, want 500", r)
	}
	if r := autoRate(100, 3, 30, 0); r != 50 {
		t.Errorf("tiny input: rate %d, want the floor of 50", r)
	}
}

func TestPacer(t *testing.T) {
	p := newPacer(2000)
	start := time.Now()
	for range 200 {
		p.wait()
	}
	// 200 records at 2,000/s is 100ms, less the 50ms of credit.
	if d := time.Since(start); d < 40*time.Millisecond || d > time.Second {
		t.Fatalf("200 records at 2000/s took %s", d)
	}
	unlimited := newPacer(0)
	start = time.Now()
	for range 100_000 {
		unlimited.wait()
	}
	// A pacer that slept at all would take seconds (10 µs a call is 1 s);
	// the bound leaves room for a descheduled goroutine on a loaded
	// machine.
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("an unlimited pacer waited %s", d)
	}
}

func TestValidate(t *testing.T) {
	ok := Options{Exe: "eosctl"}
	if err := ok.Validate(); err != nil {
		t.Fatalf("zero options with a binary: %v", err)
	}
	for name, o := range map[string]Options{
		"no binary":         {},
		"negative records":  {Exe: "x", Records: -1},
		"negative kills":    {Exe: "x", Kills: -1},
		"abort rate > 1":    {Exe: "x", AbortRate: 1.5},
		"unknown guarantee": {Exe: "x", Guarantee: "twice"},
		"restart w/o cmd":   {Exe: "x", Brokers: []string{"b:9092"}, BrokerRestarts: 1},
		"negative duration": {Exe: "x", Duration: -time.Second},
		"negative drain":    {Exe: "x", DrainTimeout: -time.Second},
	} {
		if err := o.Validate(); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	// The embedded broker's restarts are no evidence: refused, naming the
	// way to run them on Apache Kafka.
	err := Options{Exe: "x", BrokerRestarts: 1}.Validate()
	if !errors.Is(err, ErrEmbeddedRestarts) || !strings.Contains(err.Error(), "integration/kafka/kafka.sh restart --hard") {
		t.Errorf("broker restarts on the embedded broker: %v, want ErrEmbeddedRestarts naming the real-broker command", err)
	}
}

// Network faults are planned in number, and their actions rotate: three
// cuts are one cut-clients, one cut-peers and one isolate, and two
// coordinator cuts one of each coordinator, whatever the seed.
func TestPlanNetworkFaults(t *testing.T) {
	for seed := range uint64(20) {
		plan := planFaults(rand.New(rand.NewPCG(seed, 3)), faultCounts{kills: 5, netCuts: 3, pauses: 3, coordinatorCuts: 2})
		count := map[faultKind]int{}
		actions := map[string]int{}
		for _, f := range plan {
			count[f.kind]++
			switch f.kind {
			case faultNetCut:
				actions[NetCutActions[f.variant]]++
			case faultCoordinatorCut:
				actions["coordinator "+coordinatorKinds[f.variant]]++
			}
		}
		if count[faultKill] != 5 || count[faultNetCut] != 3 || count[faultPause] != 3 || count[faultCoordinatorCut] != 2 {
			t.Fatalf("seed %d: planned %v, want 5 kills, 3 net cuts, 3 pauses, 2 coordinator cuts", seed, count)
		}
		for _, a := range []string{"cut-clients", "cut-peers", "isolate", "coordinator txn", "coordinator group"} {
			if actions[a] != 1 {
				t.Errorf("seed %d: %s planned %d times, want once: %v", seed, a, actions[a], actions)
			}
		}
	}
}
