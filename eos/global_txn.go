package eos

import (
	"github.com/eosflow/eosflow/state"
	"github.com/twmb/franz-go/pkg/kgo"
)

// txnHold holds back, per partition of a global topic, the records of
// transactions whose marker has not been fetched yet. A read_committed
// fetch delivers only committed records, but a large transaction can
// span several fetches (or straddle the last stable offset, when another
// transaction is open): applying what came would show the transaction in
// part to a batch. Records are released in offset order, up to the first
// one whose transaction's marker is still to come.
type txnHold struct {
	pending []heldRecord
}

// heldRecord is one record fetched and not yet released.
type heldRecord struct {
	offset   int64
	producer int64
	txn      bool // a record of a transaction whose marker is still to come
	control  bool
	write    state.Write
}

// take adds recs, fetched in offset order, and returns the writes that
// can now be applied and the offset after the last record released; ok
// is false if none was released.
func (h *txnHold) take(recs []*kgo.Record) (writes []state.Write, next int64, ok bool) {
	for _, rec := range recs {
		if rec.Attrs.IsControl() {
			h.close(rec.ProducerID)
			h.pending = append(h.pending, heldRecord{offset: rec.Offset, control: true})
			continue
		}
		h.pending = append(h.pending, heldRecord{offset: rec.Offset, producer: rec.ProducerID,
			txn: rec.Attrs.IsTransactional(), write: state.Write{Key: rec.Key, Value: rec.Value}})
	}
	n := 0
	for n < len(h.pending) && !h.pending[n].txn {
		if !h.pending[n].control {
			writes = append(writes, h.pending[n].write)
		}
		next, ok = h.pending[n].offset+1, true
		n++
	}
	h.pending = h.pending[n:]
	if len(h.pending) == 0 {
		h.pending = nil
	}
	return writes, next, ok
}

// close marks the held records of producer's transaction as committed:
// its marker came. (Records of aborted transactions are never delivered.)
func (h *txnHold) close(producer int64) {
	for i := range h.pending {
		if h.pending[i].producer == producer {
			h.pending[i].txn = false
		}
	}
}
