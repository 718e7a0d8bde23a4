package sim

import (
	"fmt"
	fnv64 "hash/fnv"
	"math/rand/v2"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Point is a protocol point a fault can strike at: a request of the
// transaction or group protocol, as the instance sends it, or the user
// code's start on a record.
type Point string

// The points of the schedule. A request point is named after its request.
const (
	InitProducerID     Point = "InitProducerID"
	AddPartitionsToTxn Point = "AddPartitionsToTxn"
	AddOffsetsToTxn    Point = "AddOffsetsToTxn"
	Produce            Point = "Produce"
	TxnOffsetCommit    Point = "TxnOffsetCommit"
	EndTxn             Point = "EndTxn"
	OffsetFetch        Point = "OffsetFetch"
	JoinGroup          Point = "JoinGroup"
	SyncGroup          Point = "SyncGroup"
	Heartbeat          Point = "Heartbeat"
	Record             Point = "record" // the user code starts on a record
	Timer              Point = "timer"  // the timer pipeline's user code starts on a firing
	Effect             Point = "effect" // a dedup pipeline's side effect runs
	// Restored is the end of a restore of state from its changelogs that
	// applied records, before the member processes the restored tasks'
	// records.
	Restored Point = "restored"
	// Apply is a write to a state store: a committed batch applied,
	// changelog records restored, or a restore's record that batches read
	// back as committed.
	Apply Point = "store-apply"
	// Store is a dedup pipeline's call to its dedup store: a mark, a
	// lookup, a claim, its completion or its release.
	Store Point = "dedup-store"
	// OffsetCommit is the weaker guarantees' commit; exactly-once never
	// sends it, so it is no coverage target.
	OffsetCommit Point = "OffsetCommit"
	// PgCommit is the Postgres sink's database commit as it is sent: its
	// tables' creation, a claim of partitions, or a batch's rows and
	// offsets.
	PgCommit Point = "pg-commit"
)

// Fault is what happens at a point.
type Fault string

// The faults. Each is one the runtime claims to handle.
const (
	Retriable Fault = "retriable"   // the broker refuses it with a retriable code, unapplied
	Fatal     Fault = "fatal"       // the broker refuses it with a code that ends the producer or member
	Timeout   Fault = "timeout"     // the broker applies it, then answers REQUEST_TIMED_OUT
	Drop      Fault = "drop"        // the connection dies before the broker sees it
	Lost      Fault = "lost-answer" // the broker applies it; the connection dies before the answer
	// Late is a request delayed past the client's timeout: the client's
	// connection dies as it sends it, and the broker applies it later,
	// after the client has moved on (retried, aborted, begun anew).
	Late  Fault = "late"
	Crash Fault = "crash" // the instance dies there: no leave, no abort, state gone
	Join  Fault = "join"  // another instance joins the group there
	Leave Fault = "leave" // the instance closes there, cleanly, and comes back
	// CommitLost is a commit the broker answers as committed but ends
	// aborted (a restarting broker skipped its markers, then a repair
	// aborted it): the batch's input is lost to the log, and the store
	// must not keep it past its next start.
	CommitLost Fault = "commit-lost"
	// Slow is user code taking longer than transaction_timeout on a
	// record: the broker may abort the open transaction under it.
	Slow Fault = "slow"
	// StoreFail is a dedup store call failing unapplied; StoreLost one
	// applied whose answer is lost (an error comes back). The pipelines
	// fail open, as is the default: the effect runs anyway and may repeat.
	StoreFail Fault = "store-fail"
	StoreLost Fault = "store-lost"
	// ApplyFail is a state store's write refused, nothing of it applied,
	// as a full disk or an I/O error refuses it.
	ApplyFail Fault = "apply-fail"
	// Move is the group's and the member's transaction coordinators
	// moving to other brokers as the request is sent: the old one answers
	// NOT_COORDINATOR, and the client must find the new one and retry.
	Move Fault = "coordinator-move"
	// PgFail is a database commit whose connection dies before the
	// server sees it: the transaction rolls back. PgLost is one the
	// server applies, its answer lost with the connection: the client
	// cannot tell which.
	PgFail Fault = "pg-fail"
	PgLost Fault = "pg-lost"
	// Bounce is the broker restarting, its log kept: every member's
	// connections cut at once, then a second of refusals as its
	// coordinators load (see bounce).
	Bounce Fault = "broker-bounce"
)

// handled lists, per point, the faults the runtime handles there, and
// the error code each refusal carries. This table is the coverage target.
var handled = map[Point][]Fault{
	InitProducerID:     {Retriable, Drop, Lost, Late, Crash, Move},
	AddPartitionsToTxn: {Retriable, Fatal, Drop, Lost, Crash, Move},
	AddOffsetsToTxn:    {Retriable, Fatal, Drop, Lost, Crash, Move},
	Produce:            {Retriable, Timeout, Drop, Lost, Late, Crash, Bounce},
	TxnOffsetCommit:    {Retriable, Fatal, Timeout, Drop, Lost, Late, Crash, Move, Bounce},
	EndTxn:             {Retriable, Fatal, Drop, Lost, Crash, CommitLost, Move, Bounce},
	OffsetFetch:        {Retriable, Drop, Lost, Late, Crash, Move},
	JoinGroup:          {Retriable, Drop, Lost, Late, Crash, Move},
	SyncGroup:          {Retriable, Drop, Lost, Late, Crash, Move},
	Heartbeat:          {Retriable, Drop, Lost, Late, Crash, Move, Bounce},
	Record:             {Crash, Join, Leave, Slow},
	Effect:             {Crash, Join},
	Store:              {Crash, StoreFail, StoreLost},
	Restored:           {Crash, Join, Leave},
	Timer:              {Crash, Join, Leave, Slow},
	Apply:              {Crash, ApplyFail},
	PgCommit:           {PgFail, PgLost, Crash},
}

// dedupOnly lists the points only the dedup pipelines reach.
var dedupOnly = map[Point]bool{Effect: true, Store: true}

// timerOnly lists the points only the timer pipeline reaches.
var timerOnly = map[Point]bool{Timer: true}

// statefulOnly lists the points only the pipelines with state reach.
var statefulOnly = map[Point]bool{Restored: true, Apply: true}

// pgOnly lists the points only the Postgres sink reaches.
var pgOnly = map[Point]bool{PgCommit: true}

// txnOnly lists the points only the transactional runners reach: the
// Postgres sink commits in its database.
var txnOnly = map[Point]bool{InitProducerID: true, AddPartitionsToTxn: true, AddOffsetsToTxn: true, Produce: true, TxnOffsetCommit: true, EndTxn: true}

// stateful reports whether pipeline keeps state in stores.
func stateful(pipeline string) bool {
	return pipeline != Stateless && !isDedup(pipeline) && pipeline != PgSink
}

// codes is the error each refusal answers with, per point.
var codes = map[Point]map[Fault]*kerr.Error{
	InitProducerID:     {Retriable: kerr.CoordinatorLoadInProgress},
	AddPartitionsToTxn: {Retriable: kerr.ConcurrentTransactions, Fatal: kerr.ProducerFenced},
	AddOffsetsToTxn:    {Retriable: kerr.NotCoordinator, Fatal: kerr.ProducerFenced},
	Produce:            {Retriable: kerr.NotLeaderForPartition, Timeout: kerr.RequestTimedOut},
	TxnOffsetCommit:    {Retriable: kerr.CoordinatorLoadInProgress, Fatal: kerr.IllegalGeneration, Timeout: kerr.RequestTimedOut},
	EndTxn:             {Retriable: kerr.ConcurrentTransactions, Fatal: kerr.ProducerFenced},
	OffsetFetch:        {Retriable: kerr.CoordinatorLoadInProgress},
	JoinGroup:          {Retriable: kerr.CoordinatorNotAvailable},
	SyncGroup:          {Retriable: kerr.RebalanceInProgress},
	Heartbeat:          {Retriable: kerr.RebalanceInProgress},
}

// points maps request keys to their points.
var points = map[int16]Point{
	int16(kmsg.InitProducerID):     InitProducerID,
	int16(kmsg.AddPartitionsToTxn): AddPartitionsToTxn,
	int16(kmsg.AddOffsetsToTxn):    AddOffsetsToTxn,
	int16(kmsg.Produce):            Produce,
	int16(kmsg.TxnOffsetCommit):    TxnOffsetCommit,
	int16(kmsg.EndTxn):             EndTxn,
	int16(kmsg.OffsetFetch):        OffsetFetch,
	int16(kmsg.JoinGroup):          JoinGroup,
	int16(kmsg.SyncGroup):          SyncGroup,
	int16(kmsg.Heartbeat):          Heartbeat,
	int16(kmsg.OffsetCommit):       OffsetCommit,
}

// Step is one fault of a schedule: Fault strikes the N-th time (from 1)
// the instance Instance (0 the first, then in the order they started)
// reaches Point.
type Step struct {
	Instance int
	Point    Point
	N        int
	Fault    Fault
}

// String is the step as a schedule prints it: point#N@member:fault.
func (s Step) String() string {
	return fmt.Sprintf("%s#%d@i%d:%s", s.Point, s.N, s.Instance, s.Fault)
}

// Schedule is the faults one run injects, drawn from Seed.
type Schedule struct {
	Seed     uint64
	Pipeline string
	// TxnV1 runs the members on the first transaction protocol
	// (AddPartitionsToTxn and AddOffsetsToTxn on the wire, one producer
	// epoch per session) instead of KIP-890's second.
	TxnV1 bool
	// Adaptive runs the members with adaptive_commit: batches end once
	// the records at hand are processed.
	Adaptive bool
	Steps    []Step
}

// String is the schedule on one line: its seed, pipeline, protocol and
// steps.
func (s Schedule) String() string {
	parts := make([]string, len(s.Steps))
	for i, st := range s.Steps {
		parts[i] = st.String()
	}
	v := "v2"
	if s.TxnV1 {
		v = "v1"
	}
	if s.Adaptive {
		v += " adaptive"
	}
	return fmt.Sprintf("seed %d %s txn-%s [%s]", s.Seed, s.Pipeline, v, strings.Join(parts, " "))
}

// v1Only lists the points only the first transaction protocol reaches:
// under KIP-890 produce and TxnOffsetCommit add to the transaction
// themselves.
var v1Only = map[Point]bool{AddPartitionsToTxn: true, AddOffsetsToTxn: true}

// Without returns s less its i-th step: a candidate while shrinking.
func (s Schedule) Without(i int) Schedule {
	s.Steps = slices.Delete(slices.Clone(s.Steps), i, i+1)
	return s
}

// occurrences bounds N per point: how often an instance reaches each in a
// small run, so that most drawn steps fire.
var occurrences = map[Point]int{
	InitProducerID: 2, AddPartitionsToTxn: 30, AddOffsetsToTxn: 30, Produce: 50,
	TxnOffsetCommit: 30, EndTxn: 30, OffsetFetch: 2, JoinGroup: 2, SyncGroup: 2,
	Heartbeat: 30, Record: 300, Effect: 300, Store: 600, Restored: 2, Apply: 30, Timer: 60, PgCommit: 20,
}

// Draw makes the schedule of seed for pipeline: one to four faults. The
// first strikes early at the pair seed selects in turn, so that any run of
// PairCount() consecutive seeds covers every pair; the others are drawn
// uniformly, at any occurrence. A first pair at a restore's end comes
// after one step more: a crash that makes the member restore records. The
// same seed and pipeline always give the same schedule.
func Draw(seed uint64, pipeline string) Schedule {
	rng := rand.New(rand.NewPCG(seed, fnv(pipeline)))
	every := pairs(anyProtocol, pipeline)
	first := every[seed%uint64(len(every))]
	s := Schedule{Seed: seed, Pipeline: pipeline, TxnV1: v1Only[first.Point] || !v2Only[first] && rng.IntN(3) == 0}
	if pipeline == PgSink {
		s.TxnV1 = false // the sink has no transactions; drawn all the same, so the stream of draws stays put
	} else {
		// A stream of its own, so that the faults of a seed stay as
		// they were drawn before adaptive commits were.
		s.Adaptive = rand.New(rand.NewPCG(seed, fnv(pipeline+"/adaptive"))).IntN(2) == 0
	}
	all := pairs(protocolOf(s.TxnV1), pipeline)
	joined := false
	if first.Point == Restored {
		// A member crashing once a few batches have committed restores
		// its state, gone or partly lost, from changelogs that hold
		// records as it starts again: a restore sure to end.
		s.Steps = append(s.Steps, Step{Point: Record, N: 100 + rng.IntN(75), Fault: Crash})
	}
	for i := range 1 + rng.IntN(4) {
		pf := first
		if i > 0 {
			pf = all[rng.IntN(len(all))]
		}
		inst := 0
		if joined && rng.IntN(2) == 0 {
			inst = 1 // strikes the member the join started
		}
		at := 1 + rng.IntN(occurrences[pf.Point])
		if (i == 0 || pf.Fault == Join) && pf.Point != Effect {
			at = 1 + rng.IntN(max(1, occurrences[pf.Point]/4)) // early: sure to strike, and a joiner shares the work
		}
		st := Step{Instance: inst, Point: pf.Point, N: at, Fault: pf.Fault}
		if slices.ContainsFunc(s.Steps, func(o Step) bool { return o.Instance == st.Instance && o.Point == st.Point && o.N == st.N }) {
			continue // one fault per moment
		}
		joined = joined || pf.Fault == Join
		s.Steps = append(s.Steps, st)
	}
	return s
}

// fnv hashes a pipeline's name into the seed stream, so that pipelines
// sharing a seed still draw different schedules.
func fnv(s string) uint64 {
	h := fnv64.New64a()
	h.Write([]byte(s))
	return h.Sum64()
}

// Pair is a (point, fault) combination: one cell of the coverage table.
type Pair struct {
	Point Point
	Fault Fault
}

// protocol selects the pairs a transaction protocol reaches.
type protocol int

const (
	anyProtocol protocol = iota
	firstProtocol
	secondProtocol
)

func protocolOf(v1 bool) protocol {
	if v1 {
		return firstProtocol
	}
	return secondProtocol
}

// v2Only lists the pairs only KIP-890's protocol can judge or survive:
// under the first, one producer epoch spans every transaction of a
// session, so the records of one lost commit cannot be told from the
// others', and a late TxnOffsetCommit lands in a later transaction of the
// same epoch, moving the group's offsets back (a hazard of the protocol,
// in Apache Kafka too, that KIP-890's epoch per transaction closes).
var v2Only = map[Pair]bool{{EndTxn, CommitLost}: true, {TxnOffsetCommit, Late}: true}

// countable lists the pipelines whose judge can allow for the records of
// a lost commit (CommitLost): a window's count has no room for them, nor
// can the pairs the lost records would have made be told from lost joins.
func countable(pipeline string) bool { return pipeline != Windowed && pipeline != StreamJoin }

// pairs lists the handled pairs a protocol and a pipeline reach, in a
// fixed order; pipeline "" means every pipeline.
func pairs(proto protocol, pipeline string) []Pair {
	var ps []Pair
	keys := make([]Point, 0, len(handled))
	for p := range handled {
		if v1Only[p] && proto == secondProtocol || dedupOnly[p] && pipeline != "" && !isDedup(pipeline) ||
			statefulOnly[p] && pipeline != "" && !stateful(pipeline) || timerOnly[p] && pipeline != "" && pipeline != Timers ||
			pgOnly[p] && pipeline != "" && pipeline != PgSink || txnOnly[p] && pipeline == PgSink {
			continue
		}
		keys = append(keys, p)
	}
	slices.Sort(keys)
	for _, p := range keys {
		for _, f := range handled[p] {
			if pf := (Pair{p, f}); !(v2Only[pf] && proto == firstProtocol) && !(f == CommitLost && !countable(pipeline)) {
				ps = append(ps, pf)
			}
		}
	}
	return ps
}

// PairCount is how many (point, fault) pairs the runtime handles, over
// every pipeline: at least as many as any one pipeline reaches, so the
// seeds a run needs per pipeline to strike each of its pairs once.
func PairCount() int { return len(pairs(anyProtocol, "")) }

// isDedup reports whether pipeline runs side effects behind a dedup store.
func isDedup(pipeline string) bool { return pipeline == DedupAfter || pipeline == DedupBefore }
