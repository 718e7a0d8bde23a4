package chaos

import (
	"testing"
	"time"
)

// The watch asks for a probe only after the group committed nothing for
// its whole bound with no broker restart under way, once per stall, and
// times the stall afresh after each probe.
func TestWedgeWatchProbesAStallOnce(t *testing.T) {
	w := wedgeWatch{after: time.Minute}
	t0 := time.Unix(1000, 0)
	if w.observe(t0, 5, false) {
		t.Fatal("probed at the first look")
	}
	if w.observe(t0.Add(59*time.Second), 5, false) {
		t.Fatal("probed before the bound")
	}
	if w.observe(t0.Add(50*time.Second), 6, false) || w.observe(t0.Add(100*time.Second), 6, false) {
		t.Fatal("progress at 50 s should time the stall from then")
	}
	if w.observe(t0.Add(111*time.Second), 6, true) || w.observe(t0.Add(150*time.Second), 6, false) {
		t.Fatal("a broker restart under way should time the stall afresh")
	}
	if !w.observe(t0.Add(172*time.Second), 6, false) {
		t.Fatal("no probe after a minute without progress")
	}
	if w.observe(t0.Add(180*time.Second), 6, false) {
		t.Fatal("a second probe while the first runs")
	}
	w.probed(t0.Add(190 * time.Second))
	if w.observe(t0.Add(240*time.Second), 6, false) || !w.observe(t0.Add(251*time.Second), 6, false) {
		t.Fatal("after a probe, the next should come a whole bound later")
	}
}
