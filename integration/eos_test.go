package integration

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/eosflow/eosflow/config"
	"github.com/eosflow/eosflow/eos"
	"github.com/eosflow/eosflow/tools/conformance"
	"github.com/eosflow/eosflow/tools/kafkatest"
	"github.com/eosflow/eosflow/tools/verdict"
)

// The same scenarios as on the embedded broker, against Apache Kafka.
func TestConformance(t *testing.T) {
	realEnv(t)
	conformance.All(t, realEnv)
}

// A kill -9 of the broker mid-run, then a restart on the same log dirs:
// the runner rides it out and the output is exact.
func TestBrokerHardRestart(t *testing.T) {
	env, out, n, x := runAcrossBrokerRestart(t, config.ExactlyOnce)
	v := conformance.ExactlyOnce(t, env, out, n)
	t.Logf("verdict %v, stats %+v", v, x.R.Stats())
}

// Idempotent mode across a broker restart: producer retries after the
// restart must not duplicate. The only duplicates allowed are of batches
// the runner reports as redone (outputs acknowledged, offset commit lost).
func TestIdempotentAcrossBrokerRestart(t *testing.T) {
	env, out, n, x := runAcrossBrokerRestart(t, config.Idempotent)
	v := verdict.Judge(n, conformance.Drain(t, env, out, n))
	s := x.R.Stats()
	t.Logf("verdict %v, stats %+v", v, s)
	if v.Missing != 0 || uint64(v.Duplicates) > s.Redone {
		t.Fatalf("idempotent mode lost or duplicated beyond redone batches: %v, redone %d", v, s.Redone)
	}
}

// runAcrossBrokerRestart runs a pipeline under g, hard-restarts the broker
// a quarter of the way in, and waits until every input record committed.
func runAcrossBrokerRestart(t *testing.T, g config.Guarantee) (env *kafkatest.Env, out string, n int, x *conformance.Run) {
	env = realEnv(t)
	restart := restartCmd(t)
	in := env.Name("in")
	out = env.Name("out")
	env.CreateTopics(t, 6, in, out)
	n = 60000
	conformance.Seed(t, env, in, n)
	cfg := env.Config(env.Name("app"), "a", g)
	cfg.MaxBatchRecords = 500
	x = conformance.Start(t, cfg, conformance.Upper(in, out, nil), slowBatches(2*time.Millisecond))
	conformance.Until(t, 120*time.Second, "a quarter of the input", func() bool { return x.R.Stats().RecordsIn >= uint64(n/4) })
	shell(t, restart)
	x.WaitCommitted(t, uint64(n), 300*time.Second)
	return env, out, n, x
}

// An unreachable broker fails Run within seconds, naming the address.
func TestUnreachableBrokerFailsFast(t *testing.T) {
	realEnv(t)
	cfg := config.Default()
	cfg.Brokers, cfg.AppID, cfg.ConnectTimeout = []string{"127.0.0.1:1"}, "app", 3*time.Second
	r, err := eos.New(cfg, conformance.Upper("in", "out", nil))
	if err != nil {
		t.Fatal(err)
	}
	begin := time.Now()
	err = r.Run(context.Background())
	if !errors.Is(err, eos.ErrUnreachable) || time.Since(begin) > 10*time.Second {
		t.Fatalf("want ErrUnreachable within 10s, got %v after %s", err, time.Since(begin))
	}
}

func slowBatches(d time.Duration) eos.Option {
	return eos.BeforeCommit(func(context.Context, eos.BatchInfo) error {
		time.Sleep(d)
		return nil
	})
}
