package integration

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/eosflow/eosflow/config"
	"github.com/eosflow/eosflow/eos"
	"github.com/eosflow/eosflow/tools/conformance"
	"github.com/eosflow/eosflow/tools/kafkatest"
	"github.com/eosflow/eosflow/tools/verdict"
	"github.com/twmb/franz-go/pkg/kadm"
)

// TestMain doubles as a pipeline worker process when EOS_IT_WORKER is set,
// so a test can stop a whole instance with SIGSTOP, as a GC pause or a
// frozen VM would.
func TestMain(m *testing.M) {
	if os.Getenv("EOS_IT_WORKER") != "" {
		os.Exit(worker())
	}
	os.Exit(kafkatest.Main(m))
}

func worker() int {
	cfg := config.Default()
	cfg.Brokers = strings.Split(os.Getenv("EOS_KAFKA_BROKERS"), ",")
	cfg.AppID = os.Getenv("EOS_IT_APP")
	cfg.InstanceID = os.Getenv("EOS_IT_INSTANCE")
	if os.Getenv("EOS_IT_DEFAULTS") == "" {
		cfg.TransactionTimeout = 5 * time.Second
		cfg.SessionTimeout = 6 * time.Second
	}
	cfg.MaxBatchRecords = 200
	top := conformance.Upper(os.Getenv("EOS_IT_IN"), os.Getenv("EOS_IT_OUT"), nil)
	// Most of the worker's time is spent inside an open transaction, so a
	// stop lands mid-transaction.
	r, err := eos.New(cfg, top, slowBatches(100*time.Millisecond))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	if err := r.Run(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "worker stopped:", err)
		return 1
	}
	return 0
}

// A stalled instance (SIGSTOP mid-transaction) loses its partitions when its
// session times out; its open transaction times out on the coordinator and
// another instance redoes the work. When the stalled one wakes up nothing it
// did may commit: its epoch was bumped by the abort.
func TestStalledInstanceTransactionTimesOut(t *testing.T) {
	env := realEnv(t)
	in, out, app := env.Name("in"), env.Name("out"), env.Name("app")
	env.CreateTopics(t, 3, in, out)
	const n = 20000
	conformance.Seed(t, env, in, n)

	child := exec.Command(os.Args[0], "-test.run=^$")
	child.Env = append(os.Environ(), "EOS_IT_WORKER=1", "EOS_IT_APP="+app, "EOS_IT_INSTANCE=stalled",
		"EOS_IT_IN="+in, "EOS_IT_OUT="+out, "EOS_KAFKA_BROKERS="+strings.Join(env.Brokers, ","))
	child.Stderr = os.Stderr
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = child.Process.Signal(syscall.SIGCONT)
		_ = child.Process.Kill()
		_ = child.Wait()
	})
	adm := env.Admin(t)
	conformance.Until(t, 60*time.Second, "the worker to commit output", func() bool { return outputs(adm, out) >= 1000 })
	// Stop the worker while its transaction is open: stop, look, and
	// resume to try again if it had just committed.
	txnID := app + config.TransactionalIDSeparator + "stalled"
	conformance.Until(t, 60*time.Second, "the worker stopped mid-transaction", func() bool {
		if txnState(adm, txnID) != "Ongoing" {
			return false
		}
		if err := child.Process.Signal(syscall.SIGSTOP); err != nil {
			t.Fatal(err)
		}
		time.Sleep(50 * time.Millisecond)
		if txnState(adm, txnID) == "Ongoing" {
			return true
		}
		_ = child.Process.Signal(syscall.SIGCONT)
		return false
	})
	stoppedAt := time.Now()
	t.Logf("worker stopped mid-transaction with %d output offsets committed", outputs(adm, out))

	cfg := env.Config(app, "rescuer", config.ExactlyOnce)
	rescuer := conformance.Start(t, cfg, conformance.Upper(in, out, nil))
	conformance.Until(t, 90*time.Second, "the rescuer to redo the stalled work", func() bool { return rescuer.R.Stats().RecordsIn > 0 })
	t.Logf("rescuer took over after %s", time.Since(stoppedAt).Round(time.Millisecond))
	// The rescuer may commit before the stalled transaction ends (that one
	// never sent its offsets), but read_committed readers wait behind it
	// until the coordinator aborts it on its timeout.
	conformance.Until(t, 60*time.Second, "the stalled transaction to time out", func() bool {
		st := txnState(adm, txnID)
		return st == "CompleteAbort" || st == "PrepareAbort"
	})
	if took := time.Since(stoppedAt); took < 5*time.Second {
		t.Fatalf("stalled transaction aborted after %s, before its 5s timeout", took)
	}
	t.Logf("stalled transaction aborted by its timeout %s after the stop", time.Since(stoppedAt).Round(time.Millisecond))

	if err := child.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	conformance.Until(t, 180*time.Second, "the group to consume everything", func() bool { return verdict.CaughtUp(context.Background(), adm, app, in) })
	v := conformance.ExactlyOnce(t, env, out, n)
	t.Logf("verdict %v; rescuer %+v", v, rescuer.R.Stats())
}

// txnState is the coordinator's state of a transactional id, or "".
func txnState(adm *kadm.Client, id string) string {
	txns, err := adm.DescribeTransactions(context.Background(), id)
	if err != nil {
		return ""
	}
	d, ok := txns[id]
	if !ok || d.Err != nil {
		return ""
	}
	return d.State
}

// outputs is the committed record count of topic (last stable offsets).
func outputs(adm *kadm.Client, topic string) int64 {
	offs, err := adm.ListCommittedOffsets(context.Background(), topic)
	if err != nil {
		return 0
	}
	var total int64
	offs.Each(func(o kadm.ListedOffset) { total += o.Offset })
	return total
}
