package sim

import (
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// producerEpoch names one transaction under KIP-890 (and one producer
// session before it): what a flipped commit's records carry.
type producerEpoch struct {
	id    int64
	epoch int16
}

// watchEndTxn installs the broker side of CommitLost: an armed member's
// next commit reaches the broker as an abort, which the broker applies
// and answers with success. It is what a member sees when a restarting
// broker skipped the commit's markers and a repair then aborted the
// transaction: End said committed, the log says aborted.
func (s *sim) watchEndTxn() {
	s.fake.ControlKey(int16(kmsg.EndTxn), func(req kmsg.Request) (kmsg.Response, error, bool) {
		s.fake.KeepControl()
		end := req.(*kmsg.EndTxnRequest)
		if !end.Commit || s.fake.CurrentNode() != s.fake.CoordinatorFor(end.TransactionalID) {
			return nil, nil, false // a moved coordinator refuses it: nothing to flip yet
		}
		s.hearing.committed.Store(time.Now().UnixNano())
		s.mu.Lock()
		defer s.mu.Unlock()
		i, ok := s.flips[end.TransactionalID]
		if !ok || time.Now().Before(s.bouncing) {
			return nil, nil, false // a bouncing broker refuses it: nothing to flip yet
		}
		delete(s.flips, end.TransactionalID)
		end.Commit = false
		s.struck[i] = true
		s.flipped = append(s.flipped, producerEpoch{end.ProducerID, end.ProducerEpoch})
		return nil, nil, false
	})
}

// armFlip makes the next commit of txnID a lost one, for step i.
func (s *sim) armFlip(i int, txnID string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.flips[txnID] = i
}
