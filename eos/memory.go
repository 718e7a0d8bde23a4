package eos

import (
	"context"
	"math"
	"os"
	"runtime/debug"
	rtmetrics "runtime/metrics"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"
)

// recordBytes is what a record counts against a batch's byte cap: its key,
// value and header bytes, as the producer counts its buffer.
func recordBytes(rec *kgo.Record) int64 {
	n := len(rec.Key) + len(rec.Value)
	for _, h := range rec.Headers {
		n += len(h.Key) + len(h.Value)
	}
	return int64(n)
}

// taken counts a processed record against the byte cap and ends the batch
// once the cap is reached, as the commit interval would: it polls no more,
// and past a quarter over the cap it leaves the rest of its last poll for
// the next batch (polls are sized to a quarter of the cap, so that is
// rare, and those records are in memory already).
func (b *batch) taken(rec *kgo.Record) {
	b.bytes += recordBytes(rec)
	if b.full() {
		b.cut.Store(true)
		if b.bytes >= b.maxBytes+b.maxBytes/4 {
			b.hard.Store(true)
		}
	}
}

// full reports whether the batch reached its byte cap.
func (b *batch) full() bool { return b.maxBytes > 0 && b.bytes >= b.maxBytes }

// pollLimit caps a poll of n records at what the byte cap has room for,
// judged by the batch's average record so far, so that a batch ending on
// bytes leaves few polled records to rewind.
func (b *batch) pollLimit(n int) int {
	left := b.maxBytes - b.bytes
	if b.in == 0 || b.bytes == 0 || left <= 0 {
		return n
	}
	avg := max(b.bytes/int64(b.in), 1)
	return int(max(min(int64(n), (left+avg-1)/avg), 1))
}

// setMemoryLimit sets the Go soft memory limit from max_memory unless
// GOMEMLIMIT or the program set one, so that the garbage collector works
// harder before the process outgrows it, and warns while the live heap
// nears the limit. The returned func stops the warnings and puts the
// previous limit back if it is still the one set here.
func (r *Runner) setMemoryLimit(ctx context.Context) (restore func()) {
	const unset = math.MaxInt64 // the runtime's "no limit"
	limit := r.cfg.Memory().GoLimit
	if os.Getenv("GOMEMLIMIT") != "" || debug.SetMemoryLimit(-1) != unset || limit <= 0 {
		return func() {}
	}
	debug.SetMemoryLimit(limit)
	r.log.Debug("go soft memory limit set from max_memory", zap.Int64("bytes", limit))
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		r.watchHeap(ctx, limit, memoryCheck)
	}()
	return func() {
		cancel()
		<-done
		if debug.SetMemoryLimit(-1) == limit {
			debug.SetMemoryLimit(unset)
		}
	}
}

// memoryCheck is how often watchHeap reads the live heap.
const memoryCheck = 10 * time.Second

// watchHeap logs a warning, at most every ten minutes, while the live
// heap (what the last collection kept) is above three quarters of limit:
// the collector then runs many times a second, up to half the CPU, and
// in-memory state is the usual cause.
func (r *Runner) watchHeap(ctx context.Context, limit int64, every time.Duration) {
	sample := []rtmetrics.Sample{{Name: "/gc/heap/live:bytes"}}
	tick := time.NewTicker(every)
	defer tick.Stop()
	var warned time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		rtmetrics.Read(sample)
		if sample[0].Value.Kind() != rtmetrics.KindUint64 {
			return
		}
		live := int64(sample[0].Value.Uint64())
		if live <= limit/4*3 || time.Since(warned) < 10*time.Minute {
			continue
		}
		warned = time.Now()
		r.log.Warn("live heap near the soft memory limit set from max_memory: garbage collection runs often; raise max_memory (in-memory state stores count against it)",
			zap.Int64("live_heap_bytes", live), zap.Int64("limit_bytes", limit), zap.String("max_memory", r.cfg.MaxMemory.String()))
	}
}
