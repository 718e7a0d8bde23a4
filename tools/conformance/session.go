package conformance

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/eosflow/eosflow/codec"
	"github.com/eosflow/eosflow/config"
	"github.com/eosflow/eosflow/eos"
	"github.com/eosflow/eosflow/state"
	"github.com/eosflow/eosflow/tools/kafkatest"
	"github.com/eosflow/eosflow/topology"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Session settings of the session scenario. The grace is longer than the
// gap, so that a record can arrive after the next session of its key
// began and still be on time to bridge the two.
const (
	sessionGap   = 2 * time.Second
	sessionGrace = 3 * time.Second
)

// SessionTopology collects the record ids (the values, JSON arrays of one
// id) of each key of in per session window of gap sessionGap (grace
// sessionGrace), in a store "per-session" of engine e, and writes each
// session's final id list once, when it closes, to out as JSON of
// topology.Windowed[[]int]. The lists say which records a session holds,
// not only how many, so a record folded twice, into the wrong session or
// into none shows. Late records are dropped.
func SessionTopology(in, out string, e state.Engine) *topology.Topology {
	return sessionTopology(in, out, topology.Session(sessionGap).Grace(sessionGrace).FinalOnly(), e)
}

// sessionTopology is SessionTopology with windows w.
func sessionTopology(in, out string, w topology.Windows, e state.Engine) *topology.Topology {
	top := topology.New()
	src := topology.Source(top, in, codec.JSON[[]int](), topology.Named("in"))
	ids := topology.ReduceWindows(topology.GroupByKey(src, "by-key"), "per-session", w, mergeIDs, e, codec.JSON[[]int]())
	topology.ToTable(ids, out, codec.JSON[topology.Windowed[[]int]](), topology.Named("out"))
	return top
}

// mergeIDs adds a record's ids to a session's, or two sessions' ids
// together when a record bridges them, sorted. It keeps repeats: a record
// folded twice must show up twice.
func mergeIDs(_ context.Context, a, b []int) ([]int, error) {
	out := append(append(make([]int, 0, len(a)+len(b)), a...), b...)
	slices.Sort(out)
	return out, nil
}

// sessionRecord is one seeded record of the session scenario.
type sessionRecord struct {
	id        int
	partition int32
	key       string
	ts        time.Time
	// arrive orders the records as they are produced: the event time,
	// or later for a record that arrives out of order or late.
	arrive time.Time
}

// sessionSeed makes the records of keys keys (key k in partition
// k % partitions) over span of event time, in the order they are
// produced. Each key has bursts of records less than the gap apart,
// separated by idle spells longer than the gap; after half of the spells
// short enough (at most twice the gap), a bridging record falls within the
// gap of both bursts and arrives after the second one began, on time,
// merging two sessions. A tenth of the other records arrive out of order
// within the grace, a thirtieth well beyond it (most of those are late).
// Last comes one record per partition far enough ahead to close every
// session before it.
func sessionSeed(keys int, partitions int32, span time.Duration, seed uint64) []sessionRecord {
	rng := rand.New(rand.NewPCG(seed, seed^0x5e55))
	ms := func(n int64) time.Duration { return time.Duration(n) * time.Millisecond }
	gap, grace := sessionGap.Milliseconds(), sessionGrace.Milliseconds()
	base := eventBase() // recent: Kafka deletes records older than its retention
	var recs []sessionRecord
	add := func(k int, ts time.Time, delay time.Duration) {
		recs = append(recs, sessionRecord{id: len(recs), partition: int32(k) % partitions, key: fmt.Sprintf("s%02d", k), ts: ts, arrive: ts.Add(delay)})
	}
	for k := range keys {
		t := base.Add(ms(rng.Int64N(gap)))
		for t.Before(base.Add(span)) {
			var last time.Time
			for range 1 + rng.IntN(5) {
				var delay time.Duration
				switch j := rng.IntN(30); {
				case j < 3: // out of order, within the grace
					delay = ms(1 + rng.Int64N(grace))
				case j < 4: // beyond the grace and the gap: late unless stream time lags
					delay = ms(grace + gap + 1 + rng.Int64N(3000))
				}
				add(k, t, delay)
				last, t = t, t.Add(ms(50+rng.Int64N(gap-550))) // less than the gap: the same session
			}
			if rng.IntN(2) == 0 { // an idle spell a record can bridge
				next := last.Add(ms(gap + 1 + rng.Int64N(gap)))
				if rng.IntN(2) == 0 {
					// Within the gap of both, arriving after next, by
					// no more than the grace: on time.
					lo, hi := next.Add(-sessionGap), last.Add(sessionGap)
					b := lo.Add(ms(rng.Int64N(hi.Sub(lo).Milliseconds() + 1)))
					wait := next.Sub(b).Milliseconds()
					add(k, b, ms(wait+1+rng.Int64N(grace-wait)))
				}
				t = next
			} else {
				t = last.Add(ms(2*gap + 1 + rng.Int64N(4*gap)))
			}
		}
	}
	slices.SortStableFunc(recs, func(a, b sessionRecord) int { return a.arrive.Compare(b.arrive) })
	end := recs[len(recs)-1].arrive.Add(sessionGap + sessionGrace + time.Minute)
	for p := range partitions {
		recs = append(recs, sessionRecord{id: len(recs), partition: p, key: fmt.Sprintf("flush-%d", p), ts: end, arrive: end})
	}
	return recs
}

// sessionID names one session of one key in the expected results.
type sessionID struct {
	key   string
	start time.Time
}

// sessionResult is a session's final result: its last record's time and
// the ids of its records, sorted.
type sessionResult struct {
	end time.Time
	ids []int
}

// sessionStats says what a seed exercises.
type sessionStats struct {
	late       int // records dropped as late
	outOfOrder int // records behind stream time, yet on time
	merges     int // records that bridged two or more sessions
	absorbed   int // sessions those merges absorbed
}

// modelSession is a session of the plain-Go model: its key, its first
// and last record's times, and the ids of its records, sorted.
type modelSession struct {
	key        string
	start, end time.Time
	ids        []int
}

// walkSessions replays recs as the tasks do, independently of the
// topology: per partition in order, stream time is the highest event time
// so far; a record more than the grace behind it is late and dropped; any
// other record joins, with every open session of its key whose span is
// within the gap of it, one session, and fold gets the sessions it merged
// (in order of start, as the store lists them) and the session it made; a
// session closes once stream time passes its last record by more than the
// gap plus the grace, and closed gets it. The flush records' own sessions
// never close.
func walkSessions(recs []sessionRecord, fold func(r sessionRecord, merged []modelSession, s modelSession), closed func(modelSession)) sessionStats {
	var st sessionStats
	stream := map[int32]time.Time{}
	sessions := map[int32][]modelSession{}
	for _, r := range recs {
		now, seen := stream[r.partition]
		if !seen || r.ts.After(now) {
			now = r.ts
		}
		if r.ts.Add(sessionGrace).Before(now) {
			st.late++
			continue
		}
		if r.ts.Before(stream[r.partition]) {
			st.outOfOrder++
		}
		s := modelSession{key: r.key, start: r.ts, end: r.ts, ids: []int{r.id}}
		var kept, merged []modelSession
		for _, o := range sessions[r.partition] {
			if o.key != r.key || o.start.After(r.ts.Add(sessionGap)) || o.end.Before(r.ts.Add(-sessionGap)) {
				kept = append(kept, o)
				continue
			}
			merged = append(merged, o)
			if o.start.Before(s.start) {
				s.start = o.start
			}
			if o.end.After(s.end) {
				s.end = o.end
			}
			s.ids = append(s.ids, o.ids...)
		}
		if len(merged) >= 2 {
			st.merges++
			st.absorbed += len(merged)
		}
		slices.Sort(s.ids)
		slices.SortFunc(merged, func(a, b modelSession) int { return a.start.Compare(b.start) })
		fold(r, merged, s)
		stream[r.partition] = now
		var still []modelSession
		for _, o := range append(kept, s) {
			if o.end.Add(sessionGap + sessionGrace).Before(now) {
				closed(o)
				continue
			}
			still = append(still, o)
		}
		sessions[r.partition] = still
	}
	return st
}

// expectedSessions computes, in plain Go (walkSessions), the final result
// of every session that closes, and the sessions merges absorbed (whose
// start the merged session does not keep); only a closed session is
// emitted.
func expectedSessions(recs []sessionRecord) (map[sessionID]sessionResult, map[sessionID]bool, sessionStats) {
	want, absorbed := map[sessionID]sessionResult{}, map[sessionID]bool{}
	st := walkSessions(recs, func(_ sessionRecord, merged []modelSession, _ modelSession) {
		if len(merged) < 2 {
			return
		}
		for _, o := range merged {
			absorbed[sessionID{o.key, o.start}] = true
		}
	}, func(o modelSession) { want[sessionID{o.key, o.start}] = sessionResult{o.end, o.ids} })
	// The merged session keeps the earliest start: that one was not
	// absorbed, it grew.
	for id := range absorbed {
		if _, ok := want[id]; ok {
			delete(absorbed, id)
		}
	}
	return want, absorbed, st
}

// errVetoed is the BeforeCommit error of the session scenario's aborted
// batches.
var errVetoed = errors.New("conformance: batch vetoed before its commit")

// veto aborts, once armed, the next batch that produced outputs (closed
// sessions), stopping its runner, as a crash between a batch's outputs
// and its commit would. It waits a little first, so that the outputs
// reach the broker and only the abort can hide them.
type veto struct {
	armed   atomic.Bool
	fired   atomic.Int32
	outputs atomic.Int64
}

func (v *veto) check(_ context.Context, b eos.BatchInfo) error {
	if b.Outputs == 0 || !v.armed.CompareAndSwap(true, false) {
		return nil
	}
	v.fired.Add(1)
	v.outputs.Add(int64(b.Outputs))
	time.Sleep(300 * time.Millisecond)
	return errVetoed
}

// produceSessions writes recs to topic, each to its partition with its
// event time as the record's timestamp and its id as its value, in order.
func produceSessions(t *testing.T, env *kafkatest.Env, topic string, recs []sessionRecord) {
	t.Helper()
	cl := env.Client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	for _, r := range recs {
		cl.Produce(context.Background(), &kgo.Record{Topic: topic, Partition: r.partition, Key: []byte(r.key),
			Value: fmt.Appendf(nil, "[%d]", r.id), Timestamp: r.ts}, nil)
	}
	if err := cl.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// SessionWindowsExactlyOnce collects each key's records per session window
// with final results only, through batches aborted after their sessions
// closed (each stopping its runner, which restarts with an empty state
// directory and restores from the changelog) and a second instance
// joining: the committed output must equal the sessions computed in plain
// Go from the seed — each session that closes exactly once, with exactly
// its records, and nothing else. The seed has records that bridge two
// sessions of a key, records out of order within the grace, and late ones.
//
// With final results only, a merge emits nothing, and nothing is
// retracted: a session can merge only while it is open (a record on time
// is within the gap only of sessions that have not closed), so the merged
// session is emitted once, when it closes, and the absorbed ones never
// are. The scenario fails if one of them comes out, or a tombstone does.
// SessionUpdatesExactlyOnce checks every-update output, with retractions.
func SessionWindowsExactlyOnce(t *testing.T, env *kafkatest.Env, e state.Engine) {
	recs := sessionSeed(24, 3, 4*time.Minute, 23)
	want, absorbed, stats := expectedSessions(recs)
	t.Logf("seed: %d records, %d sessions close, %d late, %d out of order on time, %d merges absorbing %d sessions",
		len(recs), len(want), stats.late, stats.outOfOrder, stats.merges, stats.absorbed)
	if stats.late == 0 || stats.outOfOrder == 0 || stats.merges == 0 || len(absorbed) == 0 {
		t.Fatalf("seed stats %+v, %d absorbed sessions: the scenario must exercise lateness, disorder and merges", stats, len(absorbed))
	}
	w := topology.Session(sessionGap).Grace(sessionGrace).FinalOnly()
	f, out, v := runSessionFaults(t, env, recs, w, e)

	got := map[sessionID]sessionResult{}
	var wrong []string
	for _, r := range Drain(t, env, out, len(want)) {
		if r.Value == nil {
			wrong = append(wrong, fmt.Sprintf("%s: a tombstone, under final results only", r.Key))
			continue
		}
		var w topology.Windowed[[]int]
		if err := json.Unmarshal(r.Value, &w); err != nil {
			t.Fatalf("output %q: %v", r.Value, err)
		}
		id := sessionID{string(r.Key), w.Window.Start}
		res := sessionResult{w.Window.End, w.Value}
		if _, dup := got[id]; dup {
			wrong = append(wrong, fmt.Sprintf("%s: emitted twice", id))
		}
		got[id] = res
		exp, ok := want[id]
		switch {
		case !ok && absorbed[id]:
			wrong = append(wrong, fmt.Sprintf("%s: a session a merge absorbed was emitted, until %s with %v", id, res.end.Format(time.TimeOnly), res.ids))
		case !ok:
			wrong = append(wrong, fmt.Sprintf("%s: emitted until %s with %v, but the seed closes no such session",
				id, res.end.Format(time.TimeOnly), res.ids))
		case !exp.end.Equal(res.end) || !slices.Equal(exp.ids, res.ids):
			wrong = append(wrong, fmt.Sprintf("%s: emitted until %s with %v, want until %s with %v",
				id, res.end.Format(time.TimeOnly), res.ids, exp.end.Format(time.TimeOnly), exp.ids))
		}
	}
	for id, exp := range want {
		if _, ok := got[id]; !ok {
			wrong = append(wrong, fmt.Sprintf("%s: never emitted (until %s with %v)", id, exp.end.Format(time.TimeOnly), exp.ids))
		}
	}
	slices.Sort(wrong)
	if len(wrong) > 0 {
		t.Fatalf("%d differences from the %d computed sessions (first ones: %v)", len(wrong), len(want), wrong[:min(5, len(wrong))])
	}
	checkSessionFaults(t, env, f, out, v, stats, len(want))
}

// runSessionFaults runs a session topology with windows w (store engine
// e) over recs through the scenario's faults, and returns once every
// record is in a committed batch: the data is produced in three parts. In
// each of the first two a batch with outputs is vetoed, and its instance
// starts again; then a second instance joins, and the third part, with the
// flush records, is produced.
func runSessionFaults(t *testing.T, env *kafkatest.Env, recs []sessionRecord, w topology.Windows, e state.Engine) (*fleet, string, *veto) {
	t.Helper()
	const partitions, vetoes = 3, 2
	names := topics(t, env, partitions, "clicks", "sessions")
	in, out := names[0], names[1]
	cfg := env.Config(env.Name("sessions"), "a", config.ExactlyOnce)
	cfg.MaxBatchRecords = 150
	v := &veto{}
	f := newFleet(t, env, cfg, func() *topology.Topology { return sessionTopology(in, out, w, e) }, eos.BeforeCommit(v.check))
	n := len(recs)
	vetoed := func(x *Run) {
		t.Helper()
		if err := x.Wait(t, 120*time.Second); !errors.Is(err, errVetoed) {
			t.Fatalf("the runner should stop on the vetoed batch, got %v", err)
		}
		if s := x.R.Stats(); s.Aborted == 0 {
			t.Fatalf("stats %+v: the vetoed batch did not abort", s)
		}
	}
	produceSessions(t, env, in, recs[:n/3])
	v.armed.Store(true)
	vetoed(f.start("a"))
	f.start("a")
	Until(t, 120*time.Second, "the first part collected", func() bool { return f.recordsIn() >= uint64(n/3) })
	v.armed.Store(true)
	produceSessions(t, env, in, recs[n/3:2*n/3])
	vetoed(f.runs[len(f.runs)-1])
	f.start("a")
	Until(t, 120*time.Second, "the second part collected", func() bool { return f.recordsIn() >= uint64(2*n/3) })
	f.start("b")
	produceSessions(t, env, in, recs[2*n/3:])
	Until(t, 120*time.Second, "every record collected", func() bool { return f.recordsIn() >= uint64(n) })
	if got := v.fired.Load(); got != vetoes || v.outputs.Load() == 0 {
		t.Fatalf("%d batches vetoed with %d outputs, want %d with outputs", got, v.outputs.Load(), vetoes)
	}
	return f, out, v
}

// checkSessionFaults checks that the late records were skipped, and that
// the vetoed batches' outputs reached the log (read_uncommitted sees more
// than the committed records), so their aborts prove something.
func checkSessionFaults(t *testing.T, env *kafkatest.Env, f *fleet, out string, v *veto, stats sessionStats, committed int) {
	t.Helper()
	var skipped uint64
	for _, x := range f.runs {
		skipped += x.R.Stats().Skipped
	}
	if skipped != uint64(stats.late) {
		t.Fatalf("%d records skipped as late, want %d", skipped, stats.late)
	}
	uncommitted := drainUncommitted(t, env, out)
	t.Logf("%d committed outputs exact; %d batches vetoed with %d outputs; read_uncommitted sees %d output records",
		committed, v.fired.Load(), v.outputs.Load(), uncommitted)
	if uncommitted <= committed {
		t.Fatalf("read_uncommitted sees %d output records, the committed ones %d: the vetoed batches' outputs never reached the log, so their abort proves nothing",
			uncommitted, committed)
	}
}

func (id sessionID) String() string { return id.key + "@" + id.start.Format(time.TimeOnly+".000") }

// drainUncommitted counts the records of topic read_uncommitted, aborted
// ones included, until a quiet second.
func drainUncommitted(t *testing.T, env *kafkatest.Env, topic string) int {
	t.Helper()
	cl := env.Client(t, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadUncommitted()))
	n := 0
	last := time.Now()
	for time.Since(last) < time.Second {
		ctx, cancel := context.WithTimeout(context.Background(), 250*time.Millisecond)
		fs := cl.PollFetches(ctx)
		cancel()
		if c := fs.NumRecords(); c > 0 {
			n += c
			last = time.Now()
		}
	}
	return n
}
