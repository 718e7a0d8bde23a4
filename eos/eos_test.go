package eos_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/eosflow/eosflow/config"
	"github.com/eosflow/eosflow/eos"
	"github.com/eosflow/eosflow/tools/conformance"
	"github.com/eosflow/eosflow/tools/kafkatest"
	"github.com/eosflow/eosflow/topology"
	"github.com/twmb/franz-go/pkg/kadm"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// The conformance suite on the embedded broker; integration/ runs the same
// scenarios against Apache Kafka.
func TestConformance(t *testing.T) {
	conformance.All(t, func(t testing.TB) *kafkatest.Env { return kafkatest.Fake(t) })
}

func TestBadInputFailsFast(t *testing.T) {
	t.Run("unreachable broker", func(t *testing.T) {
		cfg := config.Default()
		cfg.Brokers, cfg.AppID, cfg.ConnectTimeout = []string{"127.0.0.1:1"}, "app", 2*time.Second
		r, err := eos.New(cfg, conformance.Upper("in", "out", nil))
		if err != nil {
			t.Fatal(err)
		}
		begin := time.Now()
		err = r.Run(context.Background())
		if !errors.Is(err, eos.ErrUnreachable) || !strings.Contains(err.Error(), "127.0.0.1:1") {
			t.Fatalf("want ErrUnreachable naming the address, got %v", err)
		}
		if d := time.Since(begin); d > 10*time.Second {
			t.Fatalf("took %s to notice", d)
		}
	})
	t.Run("missing topics", func(t *testing.T) {
		env := kafkatest.Fake(t)
		env.CreateTopics(t, 1, "in")
		r, err := eos.New(env.Config("app", "a", config.ExactlyOnce), conformance.Upper("in", "nope", nil))
		if err != nil {
			t.Fatal(err)
		}
		err = r.Run(context.Background())
		var me *eos.MissingTopicsError
		if !errors.As(err, &me) || len(me.Topics) != 1 || me.Topics[0] != "nope" {
			t.Fatalf("want MissingTopicsError{nope}, got %v", err)
		}
	})
	t.Run("missing topics created when asked", func(t *testing.T) {
		env := kafkatest.Fake(t)
		env.CreateTopics(t, 1, "in")
		conformance.Seed(t, env, "in", 10)
		x := conformance.Start(t, env.Config("app", "a", config.ExactlyOnce), conformance.Upper("in", "made", nil), eos.CreateTopics(2, -1))
		x.WaitCommitted(t, 10, 30*time.Second)
		conformance.ExactlyOnce(t, env, "made", 10)
		details, err := kadm.NewClient(env.Client(t)).ListTopics(context.Background(), "made")
		if err != nil || len(details["made"].Partitions) != 2 {
			t.Fatalf("created topic: %v %v, want 2 partitions", details, err)
		}
	})
	t.Run("invalid config", func(t *testing.T) {
		_, err := eos.New(config.Default(), conformance.Upper("in", "out", nil))
		if !errors.Is(err, config.ErrInvalid) || !strings.Contains(err.Error(), "brokers") {
			t.Fatalf("want a config error naming brokers, got %v", err)
		}
	})
	t.Run("invalid topology", func(t *testing.T) {
		cfg := config.Default()
		cfg.Brokers, cfg.AppID = []string{"127.0.0.1:9092"}, "app"
		_, err := eos.New(cfg, topology.New())
		if !errors.Is(err, topology.ErrInvalid) {
			t.Fatalf("want a topology error, got %v", err)
		}
	})
}

func TestCloseIsIdempotentAndBounded(t *testing.T) {
	env := kafkatest.Fake(t)
	env.CreateTopics(t, 1, "in", "out")
	r, err := eos.New(env.Config("app", "a", config.ExactlyOnce), conformance.Upper("in", "out", nil))
	if err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 1)
	go func() { errc <- r.Run(context.Background()) }()
	// Close is to stop a Run that is running; one that has yet to start
	// when Close comes returns ErrClosed instead.
	conformance.Until(t, 30*time.Second, "Run to start", func() bool {
		_, body := readyz(r)
		return !strings.Contains(body, "not running")
	})
	begin := time.Now()
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-errc:
		if err != nil {
			t.Fatalf("Run after Close: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Run did not return within 30s after Close returned")
	}
	if d := time.Since(begin); d > 15*time.Second {
		t.Fatalf("Close took %s", d)
	}
	if err := r.Run(context.Background()); !errors.Is(err, eos.ErrClosed) {
		t.Fatalf("Run on a closed runner: %v", err)
	}
}

// Close called at once from two goroutines, as a signal handler and a
// test's cleanup may, returns in both only once Run has returned. Before,
// the second call returned at once, while Run still ran.
func TestConcurrentClosesBothWaitForRun(t *testing.T) {
	env := kafkatest.Fake(t)
	env.CreateTopics(t, 1, "in", "out")
	r, err := eos.New(env.Config("app", "a", config.ExactlyOnce), conformance.Upper("in", "out", nil))
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = r.Run(context.Background()) }()
	conformance.Until(t, 30*time.Second, "Run to start", func() bool {
		_, body := readyz(r)
		return !strings.Contains(body, "not running")
	})
	errs := make(chan error, 2)
	for range 2 {
		go func() {
			err := r.Close()
			// Run marks itself not running before it returns.
			if _, body := readyz(r); err == nil && !strings.Contains(body, "not running") {
				err = errors.New("Close returned while Run still ran: " + body)
			}
			errs <- err
		}()
	}
	for range 2 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
}

// log_level below the logger's own level leaves the logger as it is,
// without zap's complaint about lowering a level.
func TestLogLevelBelowLoggersLevel(t *testing.T) {
	var zapErrs bytes.Buffer
	core := zapcore.NewCore(zapcore.NewJSONEncoder(zap.NewProductionEncoderConfig()), zapcore.AddSync(io.Discard), zap.InfoLevel)
	l := zap.New(core, zap.ErrorOutput(zapcore.AddSync(&zapErrs)))
	cfg := config.Default()
	cfg.Brokers, cfg.AppID, cfg.LogLevel = []string{"127.0.0.1:9092"}, "app", "debug"
	if _, err := eos.New(cfg, conformance.Upper("in", "out", nil), eos.Logger(l)); err != nil {
		t.Fatal(err)
	}
	if zapErrs.Len() > 0 {
		t.Fatalf("zap complained: %s", zapErrs.String())
	}
}
