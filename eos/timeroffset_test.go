package eos_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/eosflow/eosflow/codec"
	"github.com/eosflow/eosflow/config"
	"github.com/eosflow/eosflow/processor"
	"github.com/eosflow/eosflow/state"
	"github.com/eosflow/eosflow/tools/conformance"
	"github.com/eosflow/eosflow/tools/kafkatest"
	"github.com/eosflow/eosflow/topology"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// wallTicks fires a wall-clock timer every 100 ms per task, emitting
// nothing: Stats.TimerFirings counts the firings.
type wallTicks struct{}

func (wallTicks) Init(ctx processor.InitContext) error {
	return processor.Schedule(ctx, processor.WallClock, 100*time.Millisecond, func(processor.Context[[]byte], time.Time) error { return nil })
}
func (wallTicks) Process(processor.Context[[]byte], processor.Record[[]byte]) error { return nil }
func (wallTicks) Close() error                                                      { return nil }

// A task's wall-clock timers fire only once the client holds its
// committed offset. When that offset comes late (the client's offset
// fetch answered UNSTABLE_OFFSET_COMMIT while a transaction was open on
// it, as when another member's timers commit), the timers start soon after
// it, not an idle check (5 s) later. The idle poll is woken as the offsets
// are fetched, but before franz-go stores them, so a poll that looks in
// between rechecks within a commit interval.
func TestWallClockTimersStartSoonAfterALateOffsetFetch(t *testing.T) {
	env := kafkatest.Fake(t)
	env.CreateTopics(t, 1, "in", "out")
	if err := env.Client(t).ProduceSync(context.Background(), &kgo.Record{Topic: "in", Value: []byte("x")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	top := topology.New()
	top.AddStore("s", state.Memory())
	src := topology.Source(top, "in", codec.Bytes())
	topology.To(topology.ProcessWith(src, "tick", func() processor.Processor[[]byte, []byte] { return wallTicks{} },
		topology.UseStores("s"), topology.Timers()), "out", codec.Bytes())
	cfg := env.Config("app", "a", config.ExactlyOnce)
	cfg.StateDir = t.TempDir()
	first := conformance.Start(t, cfg, top)
	first.WaitCommitted(t, 1, 30*time.Second) // the partition has a committed offset
	first.Stop()
	if err := first.Wait(t, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	const late = 1500 * time.Millisecond
	var delayed atomic.Int32
	start := time.Now()
	env.Fake.ControlKey(int16(kmsg.OffsetFetch), func(kr kmsg.Request) (kmsg.Response, error, bool) {
		req := kr.(*kmsg.OffsetFetchRequest)
		env.Fake.KeepControl()
		if !req.RequireStable || time.Since(start) > late { // the client's own fetch, not the runtime's resume check
			return nil, nil, false
		}
		delayed.Add(1)
		resp := req.ResponseKind().(*kmsg.OffsetFetchResponse)
		for _, g := range req.Groups {
			rg := kmsg.NewOffsetFetchResponseGroup()
			rg.Group, rg.ErrorCode = g.Group, kerr.UnstableOffsetCommit.Code
			resp.Groups = append(resp.Groups, rg)
		}
		resp.ErrorCode = kerr.UnstableOffsetCommit.Code
		return resp, nil, true
	})
	x := conformance.Start(t, cfg, top)
	conformance.Until(t, late+3*time.Second, "the timers fire after the late offset fetch", func() bool { return x.R.Stats().TimerFirings > 0 })
	if delayed.Load() == 0 {
		t.Fatal("no offset fetch of the client was delayed")
	}
	t.Logf("first firing committed %s after start; the offset fetch answered %s late", time.Since(start).Round(time.Millisecond), late)
}
