package eos

import (
	"context"
	"math"
	"runtime/debug"
	"testing"
	"time"

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
	top := topology.New("copy")
	topology.To(topology.Source(top, "in", "in", codec.Bytes()), "out", "out", codec.Bytes())
	r, err := New(cfg, top, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// Run sets the Go soft memory limit from max_memory and puts the previous
// one back, but leaves a limit set by the program or GOMEMLIMIT alone.
func TestSetMemoryLimit(t *testing.T) {
	t.Setenv("GOMEMLIMIT", "")
	prev := debug.SetMemoryLimit(math.MaxInt64)
	defer debug.SetMemoryLimit(prev)
	r := memoryRunner(t, 64*config.MiB)

	restore := r.setMemoryLimit(context.Background())
	if got, want := debug.SetMemoryLimit(-1), r.cfg.Memory().GoLimit; got != want || want != 56<<20 {
		t.Fatalf("limit %d, want %d (seven eighths of 64MiB)", got, want)
	}
	restore()
	if got := debug.SetMemoryLimit(-1); got != math.MaxInt64 {
		t.Fatalf("limit %d after Run, want none again", got)
	}

	debug.SetMemoryLimit(1 << 30)
	r.setMemoryLimit(context.Background())()
	if got := debug.SetMemoryLimit(-1); got != 1<<30 {
		t.Fatalf("the program's 1GiB limit became %d", got)
	}

	debug.SetMemoryLimit(math.MaxInt64)
	t.Setenv("GOMEMLIMIT", "off")
	restore = r.setMemoryLimit(context.Background())
	if got := debug.SetMemoryLimit(-1); got != math.MaxInt64 {
		t.Fatalf("GOMEMLIMIT=off: limit %d, want none", got)
	}
	restore()
}

// A live heap near the limit is logged as a warning naming max_memory.
func TestWatchHeapWarns(t *testing.T) {
	core, logs := observer.New(zapcore.WarnLevel)
	r := memoryRunner(t, 64*config.MiB, Logger(zap.New(core)))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); r.watchHeap(ctx, 1<<20, time.Millisecond) }()
	keep := make([]byte, 4<<20) // live across a collection
	deadline := time.Now().Add(10 * time.Second)
	for logs.FilterMessageSnippet("max_memory").Len() == 0 && time.Now().Before(deadline) {
		debug.FreeOSMemory()
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	<-done
	if logs.FilterMessageSnippet("max_memory").Len() != 1 {
		t.Fatalf("warnings %v, want one naming max_memory (at most every ten minutes)", logs.All())
	}
	_ = keep[len(keep)-1]

	core, logs = observer.New(zapcore.WarnLevel)
	r.log = zap.New(core)
	ctx, cancel = context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	r.watchHeap(ctx, 1<<40, time.Millisecond)
	if logs.Len() != 0 {
		t.Fatalf("warned with a live heap far below the limit: %v", logs.All())
	}
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
