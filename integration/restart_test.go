package integration

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/eosflow/eosflow/tools/conformance"
	"github.com/eosflow/eosflow/tools/verdict"
	"github.com/twmb/franz-go/pkg/kadm"
)

// A worker process with the default timeouts (45 s session) is SIGKILLed
// mid-run and started again at once with the same instance id. Static
// membership gives it its partitions back without waiting for the group
// to drop the dead member, so its first commit comes within seconds.
func TestRestartAfterKillCommitsQuickly(t *testing.T) {
	env := realEnv(t)
	in, out, app := env.Name("in"), env.Name("out"), env.Name("app")
	env.CreateTopics(t, 4, in, out)
	const n = 20000
	conformance.Seed(t, env, in, n)
	start := func() *exec.Cmd {
		child := exec.Command(os.Args[0], "-test.run=^$")
		child.Env = append(os.Environ(), "EOS_IT_WORKER=1", "EOS_IT_DEFAULTS=1", "EOS_IT_APP="+app, "EOS_IT_INSTANCE=k",
			"EOS_IT_IN="+in, "EOS_IT_OUT="+out, "EOS_KAFKA_BROKERS="+strings.Join(env.Brokers, ","))
		child.Stderr = os.Stderr
		if err := child.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = child.Process.Kill(); _ = child.Wait() })
		return child
	}
	adm := env.Admin(t)
	committed := func() int64 {
		offs, err := adm.FetchOffsets(context.Background(), app)
		if err != nil {
			return -1
		}
		var sum int64
		offs.Each(func(o kadm.OffsetResponse) { sum += max(o.At, 0) })
		return sum
	}
	first := start()
	conformance.Until(t, 60*time.Second, "the worker to commit", func() bool { return committed() >= 1000 })
	if err := first.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = first.Wait()
	before := committed()
	restarted := time.Now()
	start()
	conformance.Until(t, 60*time.Second, "a commit after the restart", func() bool { return committed() > before })
	took := time.Since(restarted)
	t.Logf("restart to first commit after SIGKILL: %s (session_timeout 45s)", took.Round(time.Millisecond))
	if took > 15*time.Second {
		t.Fatalf("restart to first commit took %s: the group waited for the dead member", took)
	}
	conformance.Until(t, 180*time.Second, "the group to consume everything", func() bool { return verdict.CaughtUp(context.Background(), adm, app, in) })
	conformance.ExactlyOnce(t, env, out, n)
}
