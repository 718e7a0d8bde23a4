package health_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/eosflow/eosflow/dedup/internal/health"
)

// A streak of silent calls is logged once at its start (then every 5 s),
// its end once; a refused command is not the watch's to log.
func TestWatchLogsAStreakOnceAndItsEnd(t *testing.T) {
	core, logs := observer.New(zap.InfoLevel)
	w := &health.Watch{Log: zap.New(core), Store: "redis", Addr: "127.0.0.1:1", Timeout: time.Second, Inspect: "redis-cli -h 127.0.0.1 -p 1 ping"}
	w.OK()
	w.Failed("set", errors.New("ERR wrong number of arguments"))
	for range 3 {
		w.Failed("set", fmt.Errorf("i/o: %w", context.DeadlineExceeded))
	}
	w.OK()
	w.OK()
	got := logs.All()
	if len(got) != 2 || got[0].Message[:len("waiting for redis")] != "waiting for redis" || got[1].Message != "redis answers again" {
		t.Fatalf("logged %d lines %v, want the streak's start and its end", len(got), got)
	}
	if f := got[0].ContextMap(); f["redis"] != "127.0.0.1:1" || f["inspect"] != "redis-cli -h 127.0.0.1 -p 1 ping" {
		t.Errorf("fields %v: want the address and the command to check it", f)
	}
	if n := got[1].ContextMap()["failed_calls"]; n != int64(3) {
		t.Errorf("failed_calls = %v, want 3", n)
	}
	var nilWatch *health.Watch
	nilWatch.Failed("set", context.DeadlineExceeded)
	nilWatch.OK()
}
