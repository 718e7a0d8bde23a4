package eos_test

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"github.com/eosflow/eosflow/codec"
	"github.com/eosflow/eosflow/config"
	"github.com/eosflow/eosflow/eos"
	"github.com/eosflow/eosflow/internal/kafkatest"
	"github.com/eosflow/eosflow/internal/verdict"
	"github.com/eosflow/eosflow/topology"
	"github.com/twmb/franz-go/pkg/kgo"
)

// upper builds in → upper-case → out, failing (under the node's policy)
// on records for which fail returns true.
func upper(in, out string, fail func(id int) bool) *topology.Topology {
	top := topology.New("upper")
	src := topology.Source(top, "in", in, codec.Bytes())
	up := topology.MapValues(src, "upper", func(v []byte) ([]byte, error) {
		if id, _ := verdict.ID(v); fail != nil && fail(id) {
			return nil, errors.New("injected failure")
		}
		return bytes.ToUpper(v), nil
	})
	topology.To(up, "out", out, codec.Bytes())
	return top
}

type run struct {
	r    *eos.Runner
	stop context.CancelFunc
	errc chan error
}

func start(t *testing.T, cfg config.Config, top *topology.Topology, opts ...eos.Option) *run {
	t.Helper()
	r, err := eos.New(cfg, top, opts...)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	x := &run{r: r, stop: cancel, errc: make(chan error, 1)}
	go func() { x.errc <- r.Run(ctx) }()
	t.Cleanup(func() { cancel(); r.Close() })
	return x
}

// wait returns Run's error, failing t if Run does not return in time.
func (x *run) wait(t *testing.T, d time.Duration) error {
	t.Helper()
	select {
	case err := <-x.errc:
		return err
	case <-time.After(d):
		t.Fatalf("Run did not return within %s", d)
		return nil
	}
}

// until polls cond until it holds, failing t after d.
func until(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", d, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func seed(t *testing.T, env *kafkatest.Env, topic string, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := verdict.Seed(ctx, env.Client(t), topic, n, 97, 40); err != nil {
		t.Fatal(err)
	}
}

func drain(t *testing.T, env *kafkatest.Env, topic string, want int) []*kgo.Record {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	recs, err := verdict.Drain(ctx, []kgo.Opt{kgo.SeedBrokers(env.Brokers...)}, topic, want, 300*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	return recs
}

// exactlyOnce drains out and fails t unless it holds ids 0..n-1 once each.
func exactlyOnce(t *testing.T, env *kafkatest.Env, out string, n int) verdict.Verdict {
	t.Helper()
	v := verdict.Judge(n, drain(t, env, out, n))
	if !v.OK() {
		t.Fatalf("exactly-once violated: %v", v)
	}
	return v
}
