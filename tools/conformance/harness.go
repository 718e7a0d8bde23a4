// Package conformance is the suite of exactly-once scenarios that every
// broker must pass: the embedded one in eos's tests, real Apache Kafka in
// integration/. Scenarios take the broker as an argument so the same
// assertions run against both.
package conformance

import (
	"bytes"
	"context"
	"errors"
	"runtime"
	"testing"
	"time"

	"github.com/eosflow/eosflow/codec"
	"github.com/eosflow/eosflow/config"
	"github.com/eosflow/eosflow/eos"
	"github.com/eosflow/eosflow/internal/kafkautil"
	"github.com/eosflow/eosflow/tools/kafkatest"
	"github.com/eosflow/eosflow/tools/verdict"
	"github.com/eosflow/eosflow/topology"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"
)

// Upper builds in → upper-case → out, failing (under the node's policy)
// on records for which fail returns true.
func Upper(in, out string, fail func(id int) bool) *topology.Topology {
	top := topology.New()
	src := topology.Source(top, in, codec.Bytes(), topology.Named("in"))
	up := topology.MapValues(src, "upper", func(_ context.Context, v []byte) ([]byte, error) {
		if id, _ := verdict.ID(v); fail != nil && fail(id) {
			return nil, errors.New("injected failure")
		}
		return bytes.ToUpper(v), nil
	})
	topology.To(up, out, codec.Bytes(), topology.Named("out"))
	return top
}

// Run is a Runner started in the background.
type Run struct {
	R    *eos.Runner
	Stop context.CancelFunc
	errc chan error
}

// Start runs a new Runner until t ends or Stop is called.
func Start(t *testing.T, cfg config.Config, top *topology.Topology, opts ...eos.Option) *Run {
	t.Helper()
	// Quiet unless the test gives a logger: later options win.
	r, err := eos.New(cfg, top, append([]eos.Option{eos.Logger(zap.NewNop())}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return StartRunner(t, r)
}

// StartRunner runs r, made by the caller, until t ends or Stop is called.
func StartRunner(t *testing.T, r *eos.Runner) *Run {
	ctx, cancel := context.WithCancel(context.Background())
	x := &Run{R: r, Stop: cancel, errc: make(chan error, 1)}
	go func() { x.errc <- r.Run(ctx) }()
	t.Cleanup(func() { cancel(); r.Close() })
	return x
}

// Wait returns Run's error, failing t if Run does not return in time.
func (x *Run) Wait(t *testing.T, d time.Duration) error {
	t.Helper()
	select {
	case err := <-x.errc:
		return err
	case <-time.After(d):
		buf := make([]byte, 1<<20)
		buf = buf[:runtime.Stack(buf, true)]
		t.Fatalf("Run did not return within %s; stats %+v; goroutines:\n%s", d, x.R.Stats(), buf)
		return nil
	}
}

// WaitCommitted waits until x committed at least n input records. It fails
// t at once if Run stopped, with its error, and after d with the runner's
// stats and a dump of every goroutine, so a hang can be diagnosed.
func (x *Run) WaitCommitted(t *testing.T, n uint64, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(d)
	for x.R.Stats().RecordsIn < n {
		select {
		case err := <-x.errc:
			x.errc <- err
			t.Fatalf("Run stopped with %d of %d records committed: %v", x.R.Stats().RecordsIn, n, err)
		case <-time.After(10 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			buf = buf[:runtime.Stack(buf, true)]
			t.Fatalf("timed out after %s with %d of %d records committed; stats %+v; goroutines:\n%s", d, x.R.Stats().RecordsIn, n, x.R.Stats(), buf)
		}
	}
}

// Until polls cond until it holds, failing t after d.
func Until(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", d, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Seed writes records 0..n-1 to topic.
func Seed(t *testing.T, env *kafkatest.Env, topic string, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := verdict.Seed(ctx, env.Client(t), topic, n, 97, 40); err != nil {
		t.Fatal(err)
	}
}

// Drain reads topic read_committed until want records and a quiet spell.
func Drain(t *testing.T, env *kafkatest.Env, topic string, want int) []*kgo.Record {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	recs, err := verdict.Drain(ctx, env.ClientOpts(t), topic, want, 300*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	return recs
}

// ExactlyOnce drains out and fails t unless it holds ids 0..n-1 once each.
func ExactlyOnce(t *testing.T, env *kafkatest.Env, out string, n int) verdict.Verdict {
	t.Helper()
	v := verdict.Judge(n, Drain(t, env, out, n))
	if !v.OK() {
		t.Fatalf("exactly-once violated: %v", v)
	}
	return v
}

// WaitAssigned waits until group gives instance some partitions, so that
// records seeded next can reach it.
func WaitAssigned(t *testing.T, env *kafkatest.Env, group, instance string) {
	t.Helper()
	cl := env.Client(t)
	Until(t, 90*time.Second, instance+" assigned partitions", func() bool {
		g, err := kafkautil.DescribeGroup(context.Background(), cl, group)
		if err != nil {
			return false
		}
		m, ok := g.Member(instance)
		return ok && len(m.Assigned) > 0
	})
}

// fleet is the instances of one app that a scenario starts one after
// another. Stopped runs stay in runs: their counts are of committed
// batches, so recordsIn sums them all.
type fleet struct {
	t    *testing.T
	env  *kafkatest.Env
	cfg  config.Config
	top  func() *topology.Topology
	opts []eos.Option
	runs []*Run
}

func newFleet(t *testing.T, env *kafkatest.Env, cfg config.Config, top func() *topology.Topology, opts ...eos.Option) *fleet {
	return &fleet{t: t, env: env, cfg: cfg, top: top, opts: opts}
}

// start runs a new instance with its own state directory and waits until
// the group gives it partitions.
func (f *fleet) start(instance string) *Run {
	f.t.Helper()
	c := f.cfg
	c.InstanceID = instance
	c.StateDir = f.t.TempDir()
	x := Start(f.t, c, f.top(), f.opts...)
	f.runs = append(f.runs, x)
	WaitAssigned(f.t, f.env, f.cfg.AppID, instance)
	return x
}

// recordsIn sums the committed input records of every run so far.
func (f *fleet) recordsIn() (in uint64) {
	for _, x := range f.runs {
		in += x.R.Stats().RecordsIn
	}
	return in
}
