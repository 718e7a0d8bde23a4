package eos

import (
	"context"
	"math"
	"runtime"
	"runtime/debug"
	"testing"
	"time"

	"github.com/eosflow/eosflow/internal/runcfg"

	"github.com/eosflow/eosflow/codec"
	"github.com/eosflow/eosflow/config"
	"github.com/eosflow/eosflow/topology"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

func memoryRunner(t *testing.T, maxMemory config.ByteSize, opts ...Option) *Runner {
	t.Helper()
	cfg := config.Default()
	cfg.Brokers, cfg.AppID, cfg.MaxMemory = []string{"127.0.0.1:9092"}, "app", maxMemory
	top := topology.New()
	topology.To(topology.Source(top, "in", codec.Bytes()), "out", codec.Bytes())
	r, err := New(cfg, top, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// Run sets the Go soft memory limit from max_memory, with GOGC 200, and
// puts back what it found, but leaves a limit set by the program or
// GOMEMLIMIT, and a GOGC set by the program or the environment, alone.
func TestSetMemoryLimit(t *testing.T) {
	t.Setenv("GOMEMLIMIT", "")
	t.Setenv("GOGC", "")
	prevLimit, prevGC := debug.SetMemoryLimit(math.MaxInt64), debug.SetGCPercent(100)
	defer func() { debug.SetMemoryLimit(prevLimit); debug.SetGCPercent(prevGC) }()
	r := memoryRunner(t, 64*config.MiB)

	restore := r.setMemoryLimit(context.Background())
	if got, want := readLimit(), runcfg.MemoryOf(r.cfg).GoLimit; got != want || want != int64(64*config.MiB)/5*4 {
		t.Fatalf("limit %d, want %d (four fifths of 64MiB)", got, want)
	}
	if got := readGCPercent(); got != 200 {
		t.Fatalf("GOGC %d with the limit, want 200", got)
	}
	restore()
	if readLimit() != math.MaxInt64 || readGCPercent() != 100 {
		t.Fatalf("after Run: limit %d, GOGC %d; want none and 100 again", readLimit(), readGCPercent())
	}

	debug.SetMemoryLimit(1 << 30)
	r.setMemoryLimit(context.Background())()
	if readLimit() != 1<<30 || readGCPercent() != 100 {
		t.Fatalf("the program's 1GiB limit: limit %d, GOGC %d; want both untouched", readLimit(), readGCPercent())
	}

	debug.SetMemoryLimit(math.MaxInt64)
	t.Setenv("GOMEMLIMIT", "off")
	r.setMemoryLimit(context.Background())()
	if readLimit() != math.MaxInt64 || readGCPercent() != 100 {
		t.Fatalf("GOMEMLIMIT=off: limit %d, GOGC %d; want both untouched", readLimit(), readGCPercent())
	}

	t.Setenv("GOMEMLIMIT", "")
	cfg := r.cfg
	cfg.Workers = 2
	p, err := New(cfg, r.top)
	if err != nil {
		t.Fatal(err)
	}
	for i, w := range p.workers.runners {
		w.setMemoryLimit(context.Background())()
		if !w.worker || readLimit() != math.MaxInt64 {
			t.Fatalf("worker %d set a limit of its own: %d", i, readLimit())
		}
	}
	restore = p.setMemoryLimit(context.Background())
	if got := readLimit(); got != runcfg.MemoryOf(r.cfg).GoLimit {
		t.Fatalf("workers 2: the parent set %d, want four fifths of the whole 64MiB, %d", got, runcfg.MemoryOf(r.cfg).GoLimit)
	}
	restore()

	for _, tc := range []struct {
		env     string
		percent int
	}{{"150", 100}, {"", 80}} {
		t.Setenv("GOGC", tc.env)
		debug.SetGCPercent(tc.percent)
		restore = r.setMemoryLimit(context.Background())
		if readLimit() != runcfg.MemoryOf(r.cfg).GoLimit || readGCPercent() != tc.percent {
			t.Fatalf("GOGC=%q, percent %d: limit %d, GOGC %d; want the limit and GOGC untouched", tc.env, tc.percent, readLimit(), readGCPercent())
		}
		restore()
	}
}

// The guard lifts the limit and GOGC while the live heap is above three
// quarters of the limit, warning once, and sets them again once it is
// below half.
func TestMemoryGuard(t *testing.T) {
	t.Setenv("GOGC", "")
	prevLimit, prevGC := debug.SetMemoryLimit(math.MaxInt64), debug.SetGCPercent(100)
	defer func() { debug.SetMemoryLimit(prevLimit); debug.SetGCPercent(prevGC) }()
	core, logs := observer.New(zapcore.WarnLevel)
	g := &memoryGuard{log: zap.New(core), maxMemory: 128 * config.MiB, limit: 100 << 20, gcPercent: 200, prevGC: 100}
	g.arm()
	for _, step := range []struct {
		live  int64
		armed bool
	}{
		{50 << 20, true},
		{75 << 20, true},
		{76 << 20, false}, // above three quarters: lifted
		{60 << 20, false}, // not yet below half
		{49 << 20, true},  // below half: set again
		{90 << 20, false},
	} {
		g.check(step.live)
		limit, gc := readLimit(), readGCPercent()
		if step.armed && (limit != 100<<20 || gc != 200) || !step.armed && (limit != math.MaxInt64 || gc != 100) {
			t.Fatalf("live %d MiB: limit %d, GOGC %d; want armed %v", step.live>>20, limit, gc, step.armed)
		}
	}
	if n := logs.FilterMessageSnippet("max_memory").Len(); n != 1 {
		t.Fatalf("%d warnings naming max_memory, want one (at most every ten minutes): %v", n, logs.All())
	}
	g.disarm()

	// GOGC the guard did not set stays the program's, even when it is
	// the value the guard would have set.
	debug.SetGCPercent(150)
	g = &memoryGuard{log: zap.NewNop(), limit: 100 << 20, gcPercent: 200, prevGC: 100}
	g.arm()
	debug.SetGCPercent(200)
	g.disarm()
	if gc := readGCPercent(); gc != 200 {
		t.Fatalf("GOGC %d after the guard disarmed; want the program's 200, which the guard never set", gc)
	}
	debug.SetGCPercent(100)

	// Watching the real live heap: a limit far below it is lifted.
	g = &memoryGuard{log: zap.NewNop(), limit: 1 << 20, gcPercent: 200, prevGC: 100}
	g.arm()
	keep := make([]byte, 8<<20)
	runtime.GC()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	go func() {
		for ctx.Err() == nil && readLimit() != math.MaxInt64 {
			time.Sleep(time.Millisecond)
		}
		cancel()
	}()
	g.watch(ctx, time.Millisecond)
	if readLimit() != math.MaxInt64 || g.armed {
		t.Fatalf("a live heap of at least %d bytes against a 1 MiB limit: limit %d, armed %v", len(keep), readLimit(), g.armed)
	}
	runtime.KeepAlive(keep)
}

// A poll is capped at what the byte cap has room for, by the batch's
// average record so far.
func TestPollLimit(t *testing.T) {
	for _, tt := range []struct {
		in, n           int
		bytes, maxBytes int64
		want            int
	}{
		{0, 500, 0, 1000, 500},      // nothing taken yet: no estimate
		{10, 500, 100, 1000, 90},    // 10 bytes a record, 900 left
		{10, 50, 100, 1000, 50},     // the record cap is lower
		{3, 500, 1000, 1001, 1},     // room for part of one: still one
		{10, 500, 1000, 1000, 500},  // full: the batch is cut anyway
		{10, 500, 105, 1000, 90},    // 10.5 a record counts as 10: 895 left is 90
		{7, 500, 7 << 20, 0, 500},   // no cap
		{1, 500, 30000, 32000, 1},   // one large record
		{2, 500, 200, 1 << 30, 500}, // a large cap
	} {
		b := &batch{in: tt.in, bytes: tt.bytes, maxBytes: tt.maxBytes}
		if got := b.pollLimit(tt.n); got != tt.want {
			t.Errorf("in %d, bytes %d of %d, poll %d: got %d, want %d", tt.in, tt.bytes, tt.maxBytes, tt.n, got, tt.want)
		}
	}
	b := &batch{maxBytes: 100}
	b.taken(&kgo.Record{Key: []byte("k"), Value: make([]byte, 90), Headers: []kgo.RecordHeader{{Key: "h", Value: []byte("12345678")}}})
	if b.bytes != 100 || !b.full() || !b.cut.Load() {
		t.Fatalf("a record of 100 key, value and header bytes against a 100-byte cap: bytes %d, full %v, cut %v", b.bytes, b.full(), b.cut.Load())
	}
}
