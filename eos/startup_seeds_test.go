package eos_test

import (
	"context"
	"errors"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/eosflow/eosflow/config"
	"github.com/eosflow/eosflow/eos"
	"github.com/eosflow/eosflow/state"
	"github.com/eosflow/eosflow/tools/conformance"
	"github.com/eosflow/eosflow/tools/kafkatest"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

// silentBroker accepts connections and never answers, as a paused broker
// does; it returns its address, how many connections it accepted, and
// resume, which closes them and stops listening (a resumed broker's
// connections are gone; here, so is the broker).
func silentBroker(t *testing.T) (addr string, accepted *atomic.Int32, resume func()) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	accepted = new(atomic.Int32)
	var mu sync.Mutex
	var conns []net.Conn
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	var once sync.Once
	resume = func() {
		once.Do(func() {
			ln.Close()
			mu.Lock()
			defer mu.Unlock()
			for _, c := range conns {
				c.Close()
			}
		})
	}
	t.Cleanup(resume)
	return ln.Addr().String(), accepted, resume
}

// A seed broker that accepts connections but never answers (paused, as a
// broker under SIGSTOP) does not make Run fail at start-up while another
// seed answers: the start-up check asks them all at once, and Run keeps
// rebuilding its client (logged) until the silent one is gone. Asked in
// turn, the silent first seed used up the whole connect_timeout and Run
// failed as unreachable.
func TestStartsWhileOneSeedIsSilent(t *testing.T) {
	env := kafkatest.Fake(t)
	env.CreateTopics(t, 3, "in", "out")
	silent, accepted, resume := silentBroker(t)
	cfg := env.Config("app", "a", config.ExactlyOnce)
	cfg.Brokers = append([]string{silent}, cfg.Brokers...)
	cfg.ConnectTimeout = 3 * time.Second
	x := conformance.Start(t, cfg, conformance.CountTopology("in", "out", state.Memory()))
	produceAll(t, env, []*kgo.Record{{Topic: "in", Key: []byte("k"), Value: []byte("v")}})
	time.Sleep(2 * cfg.ConnectTimeout)
	if accepted.Load() == 0 {
		t.Fatal("the silent seed was never dialled: the test shows nothing")
	}
	resume()
	x.WaitCommitted(t, 1, 60*time.Second) // fails at once if Run returned
}

// Brokers that answer the start-up check's ping and then stop answering
// (the first metadata request answers, the next fail) make Run check
// again, logging each attempt, and fail as unreachable once
// recovery_timeout has passed, naming it and the command to look.
func TestBrokersGoneDuringStartupChecks(t *testing.T) {
	env := kafkatest.Fake(t)
	env.CreateTopics(t, 3, "in", "out")
	var answered atomic.Int32
	env.Fake.ControlKey(int16(kmsg.Metadata), func(kmsg.Request) (kmsg.Response, error, bool) {
		env.Fake.KeepControl()
		if answered.Add(1) <= 3 {
			return nil, nil, false // the seeds' ping, the one that teaches the client its brokers, and theirs
		}
		return nil, errors.New("broker gone"), true
	})
	cfg := env.Config("app", "a", config.ExactlyOnce)
	cfg.ConnectTimeout, cfg.RecoveryTimeout = 2*time.Second, 5*time.Second
	core, logs := observer.New(zapcore.WarnLevel)
	r, err := eos.New(cfg, conformance.CountTopology("in", "out", state.Memory()), eos.Logger(zap.New(core)))
	if err != nil {
		t.Fatal(err)
	}
	begin := time.Now()
	err = r.Run(context.Background())
	took := time.Since(begin)
	if !errors.Is(err, eos.ErrUnreachable) || !strings.Contains(err.Error(), "recovery_timeout") || !strings.Contains(err.Error(), "eosctl doctor") {
		t.Fatalf("Run: %v (metadata requests %d), want ErrUnreachable naming recovery_timeout and eosctl doctor", err, answered.Load())
	}
	if n := logs.FilterMessageSnippet("checking again").Len(); n < 2 {
		t.Fatalf("%d start-up checks logged as repeated, want 2 or more", n)
	}
	if took < cfg.RecoveryTimeout || took > cfg.RecoveryTimeout+4*cfg.ConnectTimeout {
		t.Fatalf("Run failed after %s, want just past recovery_timeout %s", took, cfg.RecoveryTimeout)
	}
}

// A seed that answers while none of the brokers it advertises can be
// reached (advertised.listeners naming an address this client cannot
// dial) fails Run within connect_timeout, naming advertised.listeners,
// rather than being retried as a broker lost until recovery_timeout.
func TestUnreachableAdvertisedBrokersFailFast(t *testing.T) {
	env := kafkatest.Fake(t)
	var asked atomic.Int32
	env.Fake.ControlKey(int16(kmsg.Metadata), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		env.Fake.KeepControl()
		asked.Add(1)
		resp := kreq.(*kmsg.MetadataRequest).ResponseKind().(*kmsg.MetadataResponse)
		b := kmsg.NewMetadataResponseBroker()
		b.NodeID, b.Host, b.Port = 0, "127.0.0.1", 1
		resp.Brokers, resp.ControllerID = append(resp.Brokers, b), 0
		return resp, nil, true
	})
	cfg := env.Config("app", "a", config.ExactlyOnce)
	cfg.ConnectTimeout, cfg.RecoveryTimeout = 3*time.Second, time.Minute
	r, err := eos.New(cfg, conformance.Upper("in", "out", nil))
	if err != nil {
		t.Fatal(err)
	}
	begin := time.Now()
	err = r.Run(context.Background())
	if !errors.Is(err, eos.ErrUnreachable) || !strings.Contains(err.Error(), "advertised.listeners") || asked.Load() == 0 {
		t.Fatalf("Run: %v (metadata asked %d times), want ErrUnreachable naming advertised.listeners", err, asked.Load())
	}
	if took := time.Since(begin); took > 3*cfg.ConnectTimeout {
		t.Fatalf("Run failed after %s, want within about connect_timeout %s", took, cfg.ConnectTimeout)
	}
}
