package statetest_test

import (
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/eosflow/eosflow/state"
	"github.com/eosflow/eosflow/state/statetest"
)

// The memory engine keeps the promises; state/pebble's tests run the
// suite on the pebble engine.
func TestMemory(t *testing.T) {
	statetest.Run(t, statetest.Engine{New: state.Memory})
}

// A memory engine claimed persistent fails: its stores come back empty.
// It runs in a child process, as a failing test cannot be observed from
// inside.
func TestAClaimTheEngineBreaksFails(t *testing.T) {
	if os.Getenv("STATETEST_BROKEN") == "1" {
		statetest.Run(t, statetest.Engine{New: state.Memory, Persistent: true})
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestAClaimTheEngineBreaksFails$", "-test.v")
	cmd.Env = append(os.Environ(), "STATETEST_BROKEN=1")
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("the suite passed a memory engine claimed persistent:\n%s", out)
	}
	for _, want := range []string{"--- FAIL: TestAClaimTheEngineBreaksFails/Reopen", "after a reopen: position", "--- PASS: TestAClaimTheEngineBreaksFails/RangeIsAscendingHalfOpen"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("the suite's output lacks %q:\n%s", want, out)
		}
	}
}
