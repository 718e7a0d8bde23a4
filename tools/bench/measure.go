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
	"sync/atomic"
	"time"

	"github.com/eosflow/eosflow/codec"
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
// Its accountant says which input records an output record accounts for.
type observer struct {
	cl     *kgo.Client
	phase1 int // ids below are the pre-seeded throughput phase
	total  int // ids below are expected at all
	// want1 and want are the input records the outputs must account for
	// by the end of phase 1 and in all: phase1 and total, unless the
	// accountant says otherwise (targeted).
	want1, want int
	warm1       int // visible phase-1 records that end the warm-up
	warmID      int // latency-phase ids below are warm-up
	onWarm      func()
	onPhase1    func()
	acct        accountant
	// sentAt holds the send time (unix nanoseconds) of each latency-phase
	// record, by id-phase1, for outputs that do not carry it.
	sentAt    []atomic.Int64
	mu        sync.Mutex
	distinct1 int // phase-1 input records the outputs account for
	distinct  int // input records the outputs account for
	dups      int // outputs accounting for a record again
	unknown   int
	warmAt    time.Time
	warmCount int
	phase1At  time.Time
	lat       []time.Duration
	// gate holds the warm-up open until the group under test is stable
	// with all its members (setGroupStable), so that the window never
	// holds a join: a worker that joins late makes the first one abort
	// and redo what it did alone.
	gate atomic.Bool
	// bursts counts the polls that made phase-1 records visible inside
	// the window: commits, roughly. A window of few bursts times the gap
	// between two commits more than the pipeline's rate.
	bursts   int
	phase1Ch chan struct{}
	doneCh   chan struct{}
	stopped  chan struct{}
}

// accountant credits an output record to the input records it stands for,
// updating o's counters (o.mu is held).
type accountant interface {
	record(o *observer, r *kgo.Record, now time.Time)
}

// targeted is an accountant whose outputs cannot account for every input
// record (final results of windows that never close): it says how many
// they account for by the end of phase 1 and in all.
type targeted interface {
	targets() (want1, want int)
}

// newObserver reads topic; acct nil means the upper pipeline's outputs,
// one per input record, each carrying its input's id (newIDAccount gives
// the same for the cpu pipeline).
func newObserver(base []kgo.Opt, topic string, phase1, latency int, warmup float64, acct accountant, onWarm, onPhase1 func()) (*observer, error) {
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
	if acct == nil {
		acct = newIDAccount(phase1+latency, nil, nil)
	}
	want1, want := phase1, phase1+latency
	if t, ok := acct.(targeted); ok {
		want1, want = t.targets()
	}
	o := &observer{
		cl:       cl,
		phase1:   phase1,
		total:    phase1 + latency,
		want1:    want1,
		want:     want,
		warm1:    max(int(float64(want1)*warmup), 1),
		warmID:   phase1 + int(float64(latency)*warmup),
		onWarm:   onWarm,
		onPhase1: onPhase1,
		acct:     acct,
		sentAt:   make([]atomic.Int64, latency),
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
		before := o.distinct1
		fs.EachRecord(func(r *kgo.Record) { o.acct.record(o, r, now) })
		if o.distinct1 > before && !o.warmAt.IsZero() && o.phase1At.IsZero() {
			o.bursts++
		}
		// Thresholds are checked per poll: everything one poll returned
		// became visible at the same moment.
		if o.warmAt.IsZero() && o.distinct1 >= o.warm1 && o.gate.Load() {
			o.warmAt, o.warmCount = now, o.distinct1
			if o.onWarm != nil {
				o.onWarm()
			}
		}
		if o.phase1At.IsZero() && o.distinct1 == o.want1 {
			o.phase1At = now
			if o.onPhase1 != nil {
				o.onPhase1()
			}
			close(o.phase1Ch)
		}
		if !done && o.distinct == o.want {
			done = true
			close(o.doneCh)
		}
		o.mu.Unlock()
	}
}

// setGroupStable lets the warm-up end: the group under test is stable.
func (o *observer) setGroupStable() { o.gate.Store(true) }

// sent notes when latency-phase record id was produced.
func (o *observer) sent(id int, t time.Time) {
	if i := id - o.phase1; i >= 0 && i < len(o.sentAt) {
		o.sentAt[i].Store(t.UnixNano())
	}
}

// idAccount accounts for the outputs of the upper and cpu pipelines: one
// per input record, its value carrying the input's id (and send time),
// read by parse (parseValue when nil). check, when set, is asked about
// every cpuCheckEvery-th id whether the output is the right transform of
// its input; a wrong one still accounts for its input, and counts as
// unknown.
type idAccount struct {
	seen  []uint8
	parse func(v []byte) (id int, sent int64, ok bool)
	check func(id int, v []byte) bool
}

// newIDAccount expects the outputs of n input records; parse and check as
// in idAccount.
func newIDAccount(n int, parse func([]byte) (int, int64, bool), check func(int, []byte) bool) *idAccount {
	return &idAccount{seen: make([]uint8, n), parse: parse, check: check}
}

func (a *idAccount) record(o *observer, r *kgo.Record, now time.Time) {
	parse := a.parse
	if parse == nil {
		parse = parseValue
	}
	id, sent, ok := parse(r.Value)
	if !ok || id < 0 || id >= o.total {
		o.unknown++
		return
	}
	if a.seen[id] > 0 {
		o.dups++
		return
	}
	a.seen[id] = 1
	o.distinct++
	if a.check != nil && id%cpuCheckEvery == 0 && !a.check(id, r.Value) {
		o.unknown++
	}
	switch {
	case id < o.phase1:
		o.distinct1++
	case id >= o.warmID && sent > 0:
		o.lat = append(o.lat, now.Sub(time.Unix(0, sent)))
	}
}

// countAccount accounts for the count pipeline's outputs: key "k<n>" with
// the key's new count (codec.Int64). Input record id has key id%keys, so the
// c-th count of key k stands for input id k+(c-1-base)*keys, and a count
// that reaches c accounts for every record of the key up to it, also when
// updates in between were coalesced (Kafka Streams' record cache). A count
// at or below one already seen, or above the key's number of records, is a
// record counted twice (dups); what no count reached is missing.
type countAccount struct {
	keys  int
	base  int32   // each key's count before the run (restored state)
	max   []int32 // highest count seen per key, from base
	want1 []int32 // count per key once phase 1 is in
	want  []int32 // count per key once everything is in
}

// newCountAccount expects inputs 0..phase1+latency-1 over keys keys, on
// top of a count of base per key.
func newCountAccount(keys, phase1, latency int, base int32) *countAccount {
	a := &countAccount{keys: keys, base: base, max: make([]int32, keys), want1: make([]int32, keys), want: make([]int32, keys)}
	per := func(n, k int) int32 {
		c := n / keys
		if k < n%keys {
			c++
		}
		return int32(c)
	}
	for k := range keys {
		a.max[k] = base
		a.want1[k] = base + per(phase1, k)
		a.want[k] = base + per(phase1+latency, k)
	}
	return a
}

func (a *countAccount) record(o *observer, r *kgo.Record, now time.Time) {
	k, ok := parseKey(r.Key)
	c, err := codec.Int64().Decode(r.Value)
	if !ok || k >= a.keys || err != nil || c > 1<<31-1 {
		o.unknown++
		return
	}
	got := int32(c)
	old := a.max[k]
	if got <= old || got > a.want[k] {
		o.dups++
		return
	}
	a.max[k] = got
	o.distinct += int(got - old)
	o.distinct1 += int(min(got, a.want1[k]) - min(old, a.want1[k]))
	id := k + int(got-1-a.base)*a.keys
	if id >= o.warmID && id >= o.phase1 && id-o.phase1 < len(o.sentAt) {
		if sent := o.sentAt[id-o.phase1].Load(); sent > 0 {
			o.lat = append(o.lat, now.Sub(time.Unix(0, sent)))
		}
	}
}

// windowPlan is what the windowed pipeline's outputs are checked
// against: record id (0 <= id < total, phase 1 below phase1) has key
// id%keys and event time base+id ms; windows are window ms long, aligned
// to the epoch (base is a multiple of window), and stay open for grace ms
// after their end, in the stream time of their partition.
type windowPlan struct {
	keys, phase1, total int
	base                int64
	window, grace       int64
	final               bool
	partitions          int
}

// windowAccount accounts for the windowed pipeline's outputs: key
// "k<n>", value WindowedCount's 16 bytes (window start, count). Window j
// holds ids [j*window, (j+1)*window), and key k's records in it are the
// ids j*window+slot+i*keys for the slot where id%keys == k; so the c-th
// count of a key's window stands for one input id, and every window's
// right count is known.
//
// Every update: a window's counts must rise one by one to its number of
// records; a count at or below one seen, or above the records, is a
// record counted twice (dups); what no count reached is missing.
//
// Final results: each window comes out once, with its number of records,
// if it closed: a record of its key's partition reached its end plus the
// grace (records of a partition arrive in id order). A window that comes
// out again, or should not have closed, or counts more records than it
// has, counts as duplicates; one counting fewer, as missing.
type windowAccount struct {
	windowPlan
	per   int     // key slots per window: min(window, keys)
	part  []int   // partition of each key (final results)
	last1 []int64 // per partition, the last phase-1 id sent to it
	last  []int64 // per partition, the last id sent to it
	seen  []int32 // highest count per key slot of a window
	want1 int
	want  int
}

// newWindowAccount expects the outputs of plan p.
func newWindowAccount(p windowPlan) *windowAccount {
	a := &windowAccount{windowPlan: p, per: int(min(p.window, int64(p.keys)))}
	windows := int((int64(p.total) + p.window - 1) / p.window)
	a.seen = make([]int32, windows*a.per)
	if !p.final {
		a.want1, a.want = p.phase1, p.total
		return a
	}
	a.part = make([]int, p.keys)
	kp := kgo.StickyKeyPartitioner(nil).ForTopic("")
	for k := range p.keys {
		a.part[k] = kp.Partition(&kgo.Record{Key: key(k, p.keys)}, p.partitions)
	}
	a.last1, a.last = make([]int64, p.partitions), make([]int64, p.partitions)
	for i := range a.last {
		a.last1[i], a.last[i] = -1, -1
	}
	for id := range p.total {
		pt := a.part[id%p.keys]
		a.last[pt] = int64(id)
		if id < p.phase1 {
			a.last1[pt] = int64(id)
		}
	}
	for j := range windows {
		for s := range a.per {
			k := (j*int(p.window) + s) % p.keys
			if n := a.records(j, s, p.total); n > 0 && a.closes(j, a.last[a.part[k]]) {
				a.want += n
				if a.closes(j, a.last1[a.part[k]]) {
					a.want1 += n
				}
			}
		}
	}
	return a
}

func (a *windowAccount) targets() (want1, want int) { return a.want1, a.want }

// closes says whether window j has closed once stream time reached id.
func (a *windowAccount) closes(j int, id int64) bool {
	return int64(j+1)*a.window+a.grace <= id
}

// records is how many ids below limit fall in window j's key slot s.
func (a *windowAccount) records(j, s, limit int) int {
	first, end := j*int(a.window)+s, min((j+1)*int(a.window), limit)
	if first >= end {
		return 0
	}
	return (end-first-1)/a.keys + 1
}

func (a *windowAccount) record(o *observer, r *kgo.Record, now time.Time) {
	k, ok := parseKey(r.Key)
	start, c, err := decodeWindowedCount(r.Value)
	off := start - a.base
	j := int(off / a.window)
	if !ok || k >= a.keys || err != nil || off < 0 || off%a.window != 0 || c > 1<<31-1 || c < 1 {
		o.unknown++
		return
	}
	s := ((k-j*int(a.window))%a.keys + a.keys) % a.keys
	if s >= a.per || j*a.per+s >= len(a.seen) {
		o.unknown++ // no record of the key in that window
		return
	}
	slot := &a.seen[j*a.per+s]
	all, in1 := a.records(j, s, a.total), a.records(j, s, a.phase1)
	if !a.final {
		got, old := int(c), int(*slot)
		if got <= old || got > all {
			o.dups++
			return
		}
		*slot = int32(got)
		o.distinct += got - old
		o.distinct1 += min(got, in1) - min(old, in1)
		a.latency(o, j*int(a.window)+s+(got-1)*a.keys, now)
		return
	}
	pt := a.part[k]
	if *slot > 0 || !a.closes(j, a.last[pt]) {
		o.dups += int(c) // again, or a window that cannot have closed
		return
	}
	*slot = int32(c)
	credit := min(int(c), all)
	o.dups += int(c) - credit
	o.distinct += credit
	if a.closes(j, a.last1[pt]) {
		o.distinct1 += credit
	}
	// The window can close with the first record of its partition at or
	// past its end plus the grace: its latency runs from that record's send.
	for id := int64(j+1)*a.window + a.grace; id < int64(a.total); id++ {
		if a.part[int(id)%a.keys] == pt {
			a.latency(o, int(id), now)
			break
		}
	}
}

// latency samples the time from latency-phase record id's send to now.
func (a *windowAccount) latency(o *observer, id int, now time.Time) {
	if id >= o.warmID && id >= o.phase1 && id-o.phase1 < len(o.sentAt) {
		if sent := o.sentAt[id-o.phase1].Load(); sent > 0 {
			o.lat = append(o.lat, now.Sub(time.Unix(0, sent)))
		}
	}
}

// parseKey reads the n of a key "k<n>" as key writes it.
func parseKey(b []byte) (int, bool) {
	if len(b) < 2 || b[0] != 'k' {
		return 0, false
	}
	n, rest, ok := digits(b[1:])
	return int(n), ok && len(rest) == 0
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
