package bench

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"os"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// The workload's values: "id=<n>;" then, for the latency phase, "t=<unix
// nanoseconds of the input's produce call>;", padded with 'x' (which the
// transform upper-cases, so every byte is work) to the record size.
func value(id int, sent time.Time, size int) []byte {
	b := make([]byte, 0, max(size, 40))
	b = append(b, "id="...)
	b = strconv.AppendInt(b, int64(id), 10)
	b = append(b, ';')
	if !sent.IsZero() {
		b = append(b, "t="...)
		b = strconv.AppendInt(b, sent.UnixNano(), 10)
		b = append(b, ';')
	}
	for len(b) < size {
		b = append(b, 'x')
	}
	return b
}

// parseValue reads what value wrote, in either case; sent is 0 when the
// value carries no send time.
func parseValue(v []byte) (id int, sent int64, ok bool) {
	if len(v) < 4 || v[0]|0x20 != 'i' || v[1]|0x20 != 'd' || v[2] != '=' {
		return 0, 0, false
	}
	n, rest, ok := digits(v[3:])
	if !ok || len(rest) == 0 || rest[0] != ';' {
		return 0, 0, false
	}
	rest = rest[1:]
	if len(rest) > 2 && rest[0]|0x20 == 't' && rest[1] == '=' {
		if t, _, ok := digits(rest[2:]); ok {
			sent = t
		}
	}
	return int(n), sent, true
}

func digits(b []byte) (int64, []byte, bool) {
	var n int64
	i := 0
	for ; i < len(b) && b[i] >= '0' && b[i] <= '9' && i < 19; i++ {
		n = n*10 + int64(b[i]-'0')
	}
	return n, b[i:], i > 0
}

// observer reads the output topic read_committed, as a downstream consumer
// would, and times what it sees: when the warm-up share and the whole of
// the throughput phase became visible, and the latency of every
// latency-phase record from its input's produce call to being received.
type observer struct {
	cl        *kgo.Client
	phase1    int // ids below are the pre-seeded throughput phase
	total     int // ids below are expected at all
	warm1     int // visible phase-1 records that end the warm-up
	warmID    int // latency-phase ids below are warm-up
	onWarm    func()
	onPhase1  func()
	seen      []uint8
	mu        sync.Mutex
	distinct1 int // distinct phase-1 ids seen
	distinct  int
	dups      int
	unknown   int
	warmAt    time.Time
	warmCount int
	phase1At  time.Time
	lat       []time.Duration
	phase1Ch  chan struct{}
	doneCh    chan struct{}
	stopped   chan struct{}
}

func newObserver(base []kgo.Opt, topic string, phase1, latency int, warmup float64, onWarm, onPhase1 func()) (*observer, error) {
	opts := append(append([]kgo.Opt(nil), base...),
		kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.FetchMaxWait(100*time.Millisecond),
	)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, err
	}
	o := &observer{
		cl:       cl,
		phase1:   phase1,
		total:    phase1 + latency,
		warm1:    max(int(float64(phase1)*warmup), 1),
		warmID:   phase1 + int(float64(latency)*warmup),
		onWarm:   onWarm,
		onPhase1: onPhase1,
		seen:     make([]uint8, phase1+latency),
		lat:      make([]time.Duration, 0, latency),
		phase1Ch: make(chan struct{}),
		doneCh:   make(chan struct{}),
		stopped:  make(chan struct{}),
	}
	return o, nil
}

// run polls until ctx ends.
func (o *observer) run(ctx context.Context) {
	defer close(o.stopped)
	done := false
	for {
		fs := o.cl.PollFetches(ctx)
		now := time.Now()
		if fs.IsClientClosed() || ctx.Err() != nil {
			return
		}
		o.mu.Lock()
		fs.EachRecord(func(r *kgo.Record) { o.record(r, now) })
		// Thresholds are checked per poll: everything one poll returned
		// became visible at the same moment.
		if o.warmAt.IsZero() && o.distinct1 >= o.warm1 {
			o.warmAt, o.warmCount = now, o.distinct1
			if o.onWarm != nil {
				o.onWarm()
			}
		}
		if o.phase1At.IsZero() && o.distinct1 == o.phase1 {
			o.phase1At = now
			if o.onPhase1 != nil {
				o.onPhase1()
			}
			close(o.phase1Ch)
		}
		if !done && o.distinct == o.total {
			done = true
			close(o.doneCh)
		}
		o.mu.Unlock()
	}
}

// record accounts for one output record; o.mu is held.
func (o *observer) record(r *kgo.Record, now time.Time) {
	id, sent, ok := parseValue(r.Value)
	if !ok || id < 0 || id >= o.total {
		o.unknown++
		return
	}
	if o.seen[id] > 0 {
		o.dups++
		return
	}
	o.seen[id] = 1
	o.distinct++
	switch {
	case id < o.phase1:
		o.distinct1++
	case id >= o.warmID && sent > 0:
		o.lat = append(o.lat, now.Sub(time.Unix(0, sent)))
	}
}

// progress reports distinct and duplicate records so far.
func (o *observer) progress() (distinct, dups int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.distinct, o.dups
}

func (o *observer) close() {
	o.cl.Close()
	<-o.stopped
}

// latencyPercentiles returns p50, p99 and p99.9 of ds (sorted in place).
func latencyPercentiles(ds []time.Duration) (p50, p99, p999 time.Duration) {
	if len(ds) == 0 {
		return 0, 0, 0
	}
	slices.Sort(ds)
	at := func(q float64) time.Duration {
		i := int(math.Ceil(q*float64(len(ds)))) - 1
		return ds[min(max(i, 0), len(ds)-1)]
	}
	return at(0.50), at(0.99), at(0.999)
}

// median of xs, and its min and max; zeros when empty.
func spread(xs []float64) (med, lo, hi float64) {
	if len(xs) == 0 {
		return 0, 0, 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	med = s[len(s)/2]
	if len(s)%2 == 0 {
		med = (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	return med, s[0], s[len(s)-1]
}

// procStats reads a process's CPU time and peak resident set from /proc
// (Linux); ok is false elsewhere or once the process is gone.
func procStats(pid int) (cpu time.Duration, peakRSS int64, ok bool) {
	path := "self"
	if pid > 0 {
		path = strconv.Itoa(pid)
	}
	stat, err := os.ReadFile("/proc/" + path + "/stat")
	if err != nil {
		return 0, 0, false
	}
	// Fields after the command name, which is in parentheses and may hold
	// spaces: state is field 3, utime 14, stime 15 (in clock ticks).
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, 0, false
	}
	f := bytes.Fields(stat[i+1:])
	if len(f) < 13 {
		return 0, 0, false
	}
	ut, err1 := strconv.ParseInt(string(f[11]), 10, 64)
	st, err2 := strconv.ParseInt(string(f[12]), 10, 64)
	if err1 != nil || err2 != nil {
		return 0, 0, false
	}
	cpu = time.Duration(ut+st) * time.Second / clockTicks
	status, err := os.ReadFile("/proc/" + path + "/status")
	if err == nil {
		for line := range bytes.SplitSeq(status, []byte("\n")) {
			if rest, found := bytes.CutPrefix(line, []byte("VmHWM:")); found {
				kb, _, _ := digits(bytes.TrimSpace(rest))
				peakRSS = kb * 1024
			}
		}
	}
	return cpu, peakRSS, true
}

// clockTicks is USER_HZ, the unit of /proc CPU times: 100 on every Linux
// architecture Go supports.
const clockTicks = 100

// resetPeakRSS makes /proc/self's VmHWM start again from the current RSS
// (Linux 4.0+), so an in-process case reports its own peak; false when the
// kernel refuses.
func resetPeakRSS() bool {
	return os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) == nil
}

func fmtDur(d time.Duration) string {
	return fmt.Sprintf("%.1fms", float64(d)/float64(time.Millisecond))
}
