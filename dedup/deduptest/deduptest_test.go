package deduptest_test

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/eosflow/eosflow/dedup"
	"github.com/eosflow/eosflow/dedup/deduptest"
)

// The suite passes a store that keeps its promises.
func TestMemoryPasses(t *testing.T) {
	deduptest.Run(t, deduptest.Backend{Open: func(t *testing.T) dedup.Store {
		m, err := dedup.NewMemory()
		if err != nil {
			t.Fatal(err)
		}
		return m
	}})
	deduptest.RunLeaser(t, func(t *testing.T) dedup.Leaser {
		m, err := dedup.NewMemory()
		if err != nil {
			t.Fatal(err)
		}
		return m
	})
}

// forgetful is a store that breaks the first promise: every Mark is the
// first.
type forgetful struct{ dedup.Store }

func (forgetful) Mark(context.Context, string, time.Duration) (bool, error) { return true, nil }

// The suite fails a store that marks an id first twice. It runs in a
// child process, as a failing test cannot be observed from inside.
func TestAForgetfulStoreFails(t *testing.T) {
	if os.Getenv("DEDUPTEST_FORGETFUL") == "1" {
		m, err := dedup.NewMemory()
		if err != nil {
			t.Fatal(err)
		}
		deduptest.Run(t, deduptest.Backend{Open: func(*testing.T) dedup.Store { return forgetful{m} }})
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestAForgetfulStoreFails$", "-test.v")
	cmd.Env = append(os.Environ(), "DEDUPTEST_FORGETFUL=1")
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("the suite passed a store whose every Mark is first:\n%s", out)
	}
	for _, want := range []string{"--- FAIL: TestAForgetfulStoreFails/FirstMarkWins", "= true, want false: the id is remembered"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("the suite's output lacks %q:\n%s", want, out)
		}
	}
}
