package sim

import (
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// bounceFor is how long a bounced broker refuses requests: a restart's
// log recovery and coordinator loading, short of every client timeout.
const bounceFor = time.Second

// Requests a bounced broker refuses, by the code a restarting one answers.
var (
	loadingTop = []kmsg.Key{kmsg.InitProducerID, kmsg.AddOffsetsToTxn, kmsg.EndTxn, kmsg.JoinGroup, kmsg.SyncGroup, kmsg.Heartbeat}
	loadingSub = []kmsg.Key{kmsg.AddPartitionsToTxn, kmsg.TxnOffsetCommit, kmsg.OffsetFetch}
	leading    = []kmsg.Key{kmsg.Produce, kmsg.Fetch, kmsg.ListOffsets}
)

// bounce is the broker restarting as its clients see it, its log kept (a
// restart that loses committed data is no test of the runtime; the real
// broker's hard restarts are the chaos verifier's): every connection of
// every member is cut at once, and for bounceFor the broker answers
// coordinator requests COORDINATOR_LOAD_IN_PROGRESS and partition
// requests NOT_LEADER_OR_FOLLOWER. Transactions stay open, as a restarted
// coordinator reloads them, and the group keeps its members. Unlike a real
// restart, metadata and FindCoordinator still answer, no dial is refused,
// and fetch sessions survive. The step strikes if a member came back
// within the window and was refused.
func (s *sim) bounce(i int) {
	until := time.Now().Add(bounceFor)
	during := func(kmsg.Request) bool { return time.Now().Before(until) }
	ofMember := func(r kmsg.Request) bool { return during(r) && byMember(r) }
	// The members' requests first: the first fault that matches answers.
	mine := s.fake.Fault(
		kfake.Fault{Keys: loadingTop, Err: kerr.CoordinatorLoadInProgress, Count: -1, TopLevel: true, When: ofMember},
		kfake.Fault{Keys: loadingSub, Err: kerr.CoordinatorLoadInProgress, Count: -1, When: ofMember},
		kfake.Fault{Keys: []kmsg.Key{kmsg.Produce}, Err: kerr.NotLeaderForPartition, Count: -1, When: ofMember},
	)
	all := s.fake.Fault(
		kfake.Fault{Keys: loadingTop, Err: kerr.CoordinatorLoadInProgress, Count: -1, TopLevel: true, When: during},
		kfake.Fault{Keys: loadingSub, Err: kerr.CoordinatorLoadInProgress, Count: -1, When: during},
		kfake.Fault{Keys: leading, Err: kerr.NotLeaderForPartition, Count: -1, When: during},
	)
	s.mu.Lock()
	s.acting++                                               // the run, and the harness's own reads, wait out the window
	s.armed = append(s.armed, &armed{step: i, handle: mine}) // fired reads its hits
	s.bouncing = until
	wires := append([]*wire(nil), s.wires...)
	s.mu.Unlock()
	for _, w := range wires {
		w.cutAll()
	}
	time.AfterFunc(bounceFor, func() {
		all.Remove()
		s.acted()
	})
}

// byMember reports whether r carries a member's identity: its
// transactional id or group instance id, or a member's stable offset
// fetch (KIP-447), as the harness's own requests never do.
func byMember(r kmsg.Request) bool {
	txn := func(id string) bool { return strings.HasPrefix(id, appID+":") }
	switch r := r.(type) {
	case *kmsg.InitProducerIDRequest:
		return r.TransactionalID != nil && txn(*r.TransactionalID)
	case *kmsg.AddPartitionsToTxnRequest:
		return txn(r.TransactionalID) || len(r.Transactions) > 0
	case *kmsg.AddOffsetsToTxnRequest:
		return txn(r.TransactionalID)
	case *kmsg.ProduceRequest:
		return r.TransactionID != nil && txn(*r.TransactionID)
	case *kmsg.TxnOffsetCommitRequest:
		return txn(r.TransactionalID)
	case *kmsg.EndTxnRequest:
		return txn(r.TransactionalID)
	case *kmsg.JoinGroupRequest:
		return r.InstanceID != nil
	case *kmsg.SyncGroupRequest:
		return r.InstanceID != nil
	case *kmsg.HeartbeatRequest:
		return r.InstanceID != nil
	case *kmsg.OffsetFetchRequest:
		return r.RequireStable
	}
	return false
}
