package sim

import (
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// armed is a broker-side refusal set for one request of one member: it
// answers the next request of its key that the member sends.
type armed struct {
	step   int
	handle *kfake.FaultHandle
}

// topLevel lists the requests whose refusal is their top-level error code.
var topLevel = map[Point]bool{
	InitProducerID: true, AddOffsetsToTxn: true, EndTxn: true,
	JoinGroup: true, SyncGroup: true, Heartbeat: true,
}

// step finds the unfired step for member idx's n-th arrival at p.
// A hit counts as acting until its caller calls acted (a late request:
// until it is delivered), so that the end of the schedule can wait for
// faults already under way.
func (s *sim) step(idx int, w *wire, p Point) (int, bool) {
	if w.quiet() {
		return 0, false // a crashed or closing incarnation is not the member any more
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.over {
		return 0, false
	}
	if s.seen[idx] == nil {
		s.seen[idx] = map[Point]int{}
	}
	s.seen[idx][p]++
	n := s.seen[idx][p]
	for i, st := range s.sched.Steps {
		if st.Instance == idx && st.Point == p && st.N == n {
			s.acting++
			return i, true
		}
	}
	return 0, false
}

// acted ends a hit of step: its fault has done what it does at once.
func (s *sim) acted() {
	s.mu.Lock()
	s.acting--
	s.mu.Unlock()
}

// onRequest decides the fate of a request member idx is about to send.
func (s *sim) onRequest(idx int, w *wire, key int16) (action, int) {
	p, ok := points[key]
	if !ok {
		return pass, -1
	}
	i, ok := s.step(idx, w, p)
	if !ok {
		return pass, -1
	}
	defer s.acted()
	switch f := s.sched.Steps[i].Fault; f {
	case Drop:
		s.strike(i)
		return dropReq, i
	case Lost:
		return loseResp, i // struck when the answer comes and is dropped
	case Late:
		// Still acting until delivered: late takes this hold over.
		s.mu.Lock()
		s.acting++
		s.mu.Unlock()
		return lateReq, i // struck when the broker has answered it
	case Crash:
		s.strike(i)
		s.crash(idx, w)
		s.events <- event{idx: idx, wire: w, step: i, fault: Crash}
		return dropReq, i
	case CommitLost:
		s.armFlip(i, appID+":"+memberID(idx))
	case Move:
		s.armMove(i, idx, key)
	case Bounce:
		s.bounce(i)
		return dropReq, i
	default:
		s.arm(i, idx, key, f)
	}
	return pass, i
}

// onRecord is member idx's user code starting on a record.
func (s *sim) onRecord(idx int, w *wire) {
	if w.isDead() {
		return // a crashed incarnation's code still running: not the member any more
	}
	time.Sleep(s.cfg.Pace)
	s.onUser(idx, w, Record)
}

// onUser is member idx's user code starting at p: on a record, or on a
// timer's firing.
func (s *sim) onUser(idx int, w *wire, p Point) {
	if w.isDead() {
		return
	}
	i, ok := s.step(idx, w, p)
	if !ok {
		return
	}
	defer s.acted()
	f := s.sched.Steps[i].Fault
	switch f {
	case Slow:
		s.strike(i)
		time.Sleep(slowRecord)
		return
	case Crash:
		s.strike(i)
		s.crash(idx, w)
	}
	s.events <- event{idx: idx, wire: w, step: i, fault: f} // a join or leave strikes once the supervisor acts
}

// slowRecord is how long slow user code takes on a record or a firing: past the
// members' transaction_timeout.
const slowRecord = 6 * time.Second

// crash kills member idx at this moment: nothing it sends from now on
// reaches the broker, and its next incarnation opens its stores from the
// image a crash now would leave on disk (unsynced writes partly lost).
func (s *sim) crash(idx int, w *wire) {
	w.kill()
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, id := range w.unmarkedIDs() {
		s.allowed[id]++ // between a side effect and its mark: it may run again
	}
	if fs := s.disks[idx]; fs != nil {
		s.disks[idx] = fs.CrashClone(vfs.CrashCloneCfg{UnsyncedDataPercent: 50, RNG: s.rng})
	}
}

// disk is member idx's filesystem, as its last crash left it.
func (s *sim) disk(idx int) *vfs.MemFS {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.disks[idx] == nil {
		s.disks[idx] = vfs.NewCrashableMem()
	}
	return s.disks[idx]
}

func (s *sim) strike(i int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.over {
		s.struck[i] = true
	}
}

// arm sets a broker-side refusal for the request about to be sent: the
// broker answers the next request of key from member idx with the step's
// code. Whether it struck is read from the fault's hits at the end.
func (s *sim) arm(i, idx int, key int16, f Fault) {
	code := codes[s.sched.Steps[i].Point][f]
	p := s.sched.Steps[i].Point
	member := memberID(idx)
	txnID := appID + ":" + member
	h := s.fake.Fault(kfake.Fault{
		Keys:     []kmsg.Key{kmsg.Key(key)},
		Err:      code,
		Count:    1,
		TopLevel: topLevel[p],
		When:     func(r kmsg.Request) bool { return sentBy(r, txnID, member) },
	})
	s.mu.Lock()
	s.armed = append(s.armed, &armed{step: i, handle: h})
	s.mu.Unlock()
}

// txnCoordinated lists the requests the transaction coordinator serves;
// the group's coordinator serves the others a Move strikes.
var txnCoordinated = map[Point]bool{InitProducerID: true, AddPartitionsToTxn: true, AddOffsetsToTxn: true, EndTxn: true}

// armMove moves the coordinators as member idx sends a request of key: the
// step strikes when that request reaches a broker that no longer
// coordinates it, and so answers NOT_COORDINATOR.
func (s *sim) armMove(i, idx int, key int16) {
	member := memberID(idx)
	txnID := appID + ":" + member
	if !s.moveCoordinators(txnID) {
		return
	}
	id := appID
	if txnCoordinated[s.sched.Steps[i].Point] {
		id = txnID
	}
	s.fake.ControlKey(key, func(r kmsg.Request) (kmsg.Response, error, bool) {
		if !sentBy(r, txnID, member) {
			return nil, nil, false
		}
		s.fake.DropControl()
		// The cluster serves admin calls while a control runs.
		if s.fake.CurrentNode() != s.fake.CoordinatorFor(id) {
			s.strike(i)
		}
		return nil, nil, false
	})
}

// moveCoordinators moves the group's coordinator and txnID's to other
// brokers (kfake rehashes every coordinator at once), and reports whether
// both moved.
func (s *sim) moveCoordinators(txnID string) bool {
	group, txn := s.fake.CoordinatorFor(appID), s.fake.CoordinatorFor(txnID)
	for range 50 {
		s.fake.RehashCoordinators()
		if s.fake.CoordinatorFor(appID) != group && s.fake.CoordinatorFor(txnID) != txn {
			return true
		}
	}
	return false
}

// memberID is member idx's instance id.
func memberID(idx int) string { return fmt.Sprintf("i%d", idx) }

// sentBy reports whether request r could be the member's: by its
// transactional id or group instance id where r carries one.
func sentBy(r kmsg.Request, txnID, member string) bool {
	switch r := r.(type) {
	case *kmsg.InitProducerIDRequest:
		return r.TransactionalID != nil && *r.TransactionalID == txnID
	case *kmsg.AddPartitionsToTxnRequest:
		if r.TransactionalID == txnID {
			return true
		}
		return slices.ContainsFunc(r.Transactions, func(t kmsg.AddPartitionsToTxnRequestTransaction) bool { return t.TransactionalID == txnID })
	case *kmsg.AddOffsetsToTxnRequest:
		return r.TransactionalID == txnID
	case *kmsg.ProduceRequest:
		return r.TransactionID != nil && *r.TransactionID == txnID
	case *kmsg.TxnOffsetCommitRequest:
		return r.TransactionalID == txnID
	case *kmsg.EndTxnRequest:
		return r.TransactionalID == txnID
	case *kmsg.JoinGroupRequest:
		return r.InstanceID != nil && *r.InstanceID == member
	case *kmsg.SyncGroupRequest:
		return r.InstanceID != nil && *r.InstanceID == member
	case *kmsg.HeartbeatRequest:
		return r.InstanceID != nil && *r.InstanceID == member
	case *kmsg.OffsetFetchRequest:
		return r.RequireStable // a member's fetch (KIP-447), not the harness's own polls
	}
	return true
}

// fired lists the steps that struck: directly, or through a broker fault
// that answered a request.
func (s *sim) fired() []Step {
	s.mu.Lock()
	defer s.mu.Unlock()
	hit := maps.Clone(s.struck)
	for _, a := range s.armed {
		if a.handle.Hits() > 0 {
			hit[a.step] = true
		}
		a.handle.Remove()
	}
	var out []Step
	for i, st := range s.sched.Steps {
		if hit[i] {
			out = append(out, st)
		}
	}
	return out
}
