package sim

import (
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
// coordinator reloads them, and the group keeps its members.
func (s *sim) bounce(i int) {
	until := time.Now().Add(bounceFor)
	during := func(kmsg.Request) bool { return time.Now().Before(until) }
	h := s.fake.Fault(
		kfake.Fault{Keys: loadingTop, Err: kerr.CoordinatorLoadInProgress, Count: -1, TopLevel: true, When: during},
		kfake.Fault{Keys: loadingSub, Err: kerr.CoordinatorLoadInProgress, Count: -1, When: during},
		kfake.Fault{Keys: leading, Err: kerr.NotLeaderForPartition, Count: -1, When: during},
	)
	s.mu.Lock()
	s.acting++ // the run does not end mid-bounce
	wires := append([]*wire(nil), s.wires...)
	s.mu.Unlock()
	for _, w := range wires {
		w.cutAll()
	}
	// It struck if a client came back within the window and was refused.
	time.AfterFunc(bounceFor, func() {
		if h.Hits() > 0 {
			s.strike(i)
		}
		h.Remove()
		s.acted()
	})
}

// cutAll cuts every broker connection of an incarnation, as a broker
// going down does; a live one dials again.
func (w *wire) cutAll() {
	w.mu.Lock()
	defer w.mu.Unlock()
	for c := range w.conns {
		c.Conn.Close()
	}
	clear(w.conns)
}
