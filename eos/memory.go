package eos

import (
	"context"
	"math"
	"os"
	"runtime/debug"
	rtmetrics "runtime/metrics"
	"time"

	"github.com/eosflow/eosflow/internal/runcfg"

	"github.com/eosflow/eosflow/config"
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
// harder before the process outgrows it; with it GOGC 200 (unless GOGC
// is set or the program changed it from 100), so that a small heap is
// not collected more often than the limit needs. A memoryGuard lifts
// both while the live heap outgrows the limit. The returned func stops
// the guard and puts back what is still as it left it.
func (r *Runner) setMemoryLimit(ctx context.Context) (restore func()) {
	limit := runcfg.MemoryOf(r.cfg).GoLimit
	if r.worker || os.Getenv("GOMEMLIMIT") != "" || readLimit() != noLimit || limit <= 0 {
		return func() {}
	}
	mm := r.cfg.MaxMemory
	if mm == 0 {
		mm = config.DefaultMaxMemory * config.ByteSize(runcfg.WorkerCount(r.cfg))
	}
	g := &memoryGuard{log: r.log, maxMemory: mm, limit: limit, prevGC: readGCPercent()}
	if os.Getenv("GOGC") == "" && g.prevGC == 100 {
		g.gcPercent = guardGCPercent
	}
	g.arm()
	r.log.Debug("go soft memory limit set from max_memory", zap.Int64("bytes", limit), zap.Int("gogc", readGCPercent()))
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		g.watch(ctx, memoryCheck)
	}()
	return func() {
		cancel()
		<-done
		g.disarm()
	}
}

const (
	// noLimit is the runtime's "no soft memory limit".
	noLimit = math.MaxInt64
	// guardGCPercent is the GOGC set with the soft limit.
	guardGCPercent = 200
	// memoryCheck is how often the guard reads the live heap.
	memoryCheck = 100 * time.Millisecond
)

// memoryGuard holds the soft memory limit and GOGC set from max_memory.
// While the live heap (what the last collection kept) is above three
// quarters of the limit, the collector would run many times a second for
// little (in-memory state is the usual cause), so the guard lifts both,
// leaving the collector as Go's defaults run it, and logs a warning at
// most every ten minutes; once the live heap is below half the limit it
// sets them again.
type memoryGuard struct {
	log       *zap.Logger
	maxMemory config.ByteSize // for the warning: max_memory, or its default
	limit     int64           // the soft limit set from max_memory
	gcPercent int             // the GOGC set with it; 0: GOGC is left alone
	prevGC    int             // GOGC before
	armed     bool
	setGC     bool // arm set GOGC, so disarm may put it back
	warned    time.Time
}

// arm sets the limit and GOGC, unless something else changed them since.
func (g *memoryGuard) arm() {
	if readLimit() != noLimit {
		return
	}
	debug.SetMemoryLimit(g.limit)
	if g.gcPercent != 0 && readGCPercent() == g.prevGC {
		debug.SetGCPercent(g.gcPercent)
		g.setGC = true
	}
	g.armed = true
}

// disarm puts back the limit and GOGC that are still as arm set them.
func (g *memoryGuard) disarm() {
	if !g.armed {
		return
	}
	if readLimit() == g.limit {
		debug.SetMemoryLimit(noLimit)
	}
	if g.setGC && readGCPercent() == g.gcPercent {
		debug.SetGCPercent(g.prevGC)
	}
	g.armed, g.setGC = false, false
}

// check lifts or sets the limit again for a live heap of live bytes.
func (g *memoryGuard) check(live int64) {
	switch {
	case g.armed && live > g.limit/4*3:
		g.disarm()
		if time.Since(g.warned) >= 10*time.Minute {
			g.warned = time.Now()
			g.log.Warn("live heap above three quarters of the soft memory limit set from max_memory: limit lifted until it is below half, as collecting more often would free little; raise max_memory (in-memory state stores count against it)",
				zap.Int64("live_heap_bytes", live), zap.Int64("limit_bytes", g.limit), zap.String("max_memory", g.maxMemory.String()))
		}
	case !g.armed && live < g.limit/2:
		g.arm()
	}
}

// watch checks the live heap every interval until ctx ends.
func (g *memoryGuard) watch(ctx context.Context, every time.Duration) {
	sample := []rtmetrics.Sample{{Name: "/gc/heap/live:bytes"}}
	tick := time.NewTicker(every)
	defer tick.Stop()
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
		g.check(int64(sample[0].Value.Uint64()))
	}
}

// readLimit is the Go soft memory limit, without changing it.
func readLimit() int64 { return debug.SetMemoryLimit(-1) }

// readGCPercent is GOGC (-1: off), without changing it.
func readGCPercent() int {
	s := []rtmetrics.Sample{{Name: "/gc/gogc:percent"}}
	rtmetrics.Read(s)
	if s[0].Value.Kind() != rtmetrics.KindUint64 {
		return 100
	}
	if v := s[0].Value.Uint64(); v <= math.MaxInt32 {
		return int(v)
	}
	return -1
}
