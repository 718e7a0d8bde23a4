package txnrepair

import (
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
)

// Hanging is a transaction that a partition holds open, as the search
// judged it: whom it belongs to, what its coordinator says, why it is (or
// is not) taken for hanging, and what the evidence proves of its outcome.
type Hanging struct {
	kadm.DescribedProducer
	// TxnID is its producer's transactional id; "" when no coordinator
	// lists the producer id.
	TxnID string
	// Coordinator is what the coordinator of TxnID says now of the same
	// producer id; nil when none tracks it.
	Coordinator *kadm.DescribedTransaction
	// Current is the producer's epoch now, for RepairEpoch: its
	// coordinator's, or two past the transaction's when no coordinator
	// tracks the producer id any more (no producer writes with it again).
	Current int16
	// Reason says why it is taken for hanging, or why not.
	Reason string
	// Verdict is what the evidence proves of its outcome (FindHanging and
	// Prove fill it).
	Verdict Verdict
}

// Classify judges the transaction open in p by what c says of its
// producer, and reports whether it hangs: whether its coordinator will
// never write p's partition a marker for it. It hangs when
//
//   - its coordinator is at a later epoch and not preparing (PrepareCommit
//     or PrepareAbort, whose markers may still come): it has ended this
//     transaction and moved on, whatever its age;
//   - its coordinator is at its epoch but not in a transaction, or in one
//     without this partition, and its producer last wrote more than
//     maxTimeout before now;
//   - no coordinator tracks its producer id (none lists it, its
//     transactional id is unknown or has another producer id now), and
//     its producer last wrote more than maxTimeout before now.
//
// Age is a claim only when the partition knows when the producer last
// wrote. Where c could not tell (a coordinator did not answer, or the
// lookup skipped another app's id), p is not judged. h.Reason says why
// it hangs, or why not.
func (c Coordinators) Classify(p kadm.DescribedProducer, maxTimeout time.Duration, now time.Time) (h Hanging, hangs bool) {
	h = Hanging{DescribedProducer: p, Current: p.ProducerEpoch}
	txnID, listed := c.TxnIDs[p.ProducerID]
	if !listed {
		if !c.AllListed {
			h.Reason = fmt.Sprintf("not every coordinator answered whether it knows producer id %d", p.ProducerID)
			return h, false
		}
		return h.untracked(fmt.Sprintf("no transactional id has producer id %d", p.ProducerID), maxTimeout, now)
	}
	h.TxnID = txnID
	d, ok := c.States[txnID]
	switch {
	case !ok:
		h.Reason = fmt.Sprintf("what the coordinator of transactional id %q says is not known", txnID)
		return h, false
	case d.Err != nil:
		return h.untracked(fmt.Sprintf("its coordinator does not know transactional id %q", txnID), maxTimeout, now)
	case d.ProducerID != p.ProducerID:
		return h.untracked(fmt.Sprintf("transactional id %q now has producer id %d", txnID, d.ProducerID), maxTimeout, now)
	}
	h.Coordinator, h.Current = &d, d.ProducerEpoch
	preparing := d.State == "PrepareCommit" || d.State == "PrepareAbort"
	if d.ProducerEpoch > p.ProducerEpoch {
		if preparing {
			h.Reason = fmt.Sprintf("its coordinator is ending a transaction of %q at epoch %d (%s) and may still write the marker", txnID, d.ProducerEpoch, d.State)
			return h, false
		}
		h.Reason = fmt.Sprintf("a transaction of %q at epoch %d, whose coordinator is at epoch %d (%s) and writes it no marker", txnID, p.ProducerEpoch, d.ProducerEpoch, d.State)
		return h, true
	}
	inTxn := false
	if ps, ok := d.Topics[p.Topic]; ok {
		_, inTxn = ps[p.Partition]
	}
	switch {
	case (d.State == "Ongoing" || preparing) && inTxn:
		h.Reason = fmt.Sprintf("its coordinator still tracks it: %q is %s at epoch %d with this partition", txnID, d.State, d.ProducerEpoch)
		return h, false
	case d.State == "Ongoing" || preparing:
		return h.aged(fmt.Sprintf("transaction of %q does not include this partition", txnID), maxTimeout, now)
	}
	return h.aged(fmt.Sprintf("transactional id %q is %s, not in a transaction", txnID, d.State), maxTimeout, now)
}

// untracked judges h, whose producer id no coordinator tracks, by its
// age: no producer writes with that id again, so its marker goes two
// epochs on at most (see Current).
func (h Hanging) untracked(why string, maxTimeout time.Duration, now time.Time) (Hanging, bool) {
	h.Current = h.ProducerEpoch + 2
	return h.aged(why, maxTimeout, now)
}

// aged judges h, whose coordinator does not track it (why), as hanging
// once its producer last wrote more than maxTimeout before now: no
// coordinator lets a transaction stay open longer, so none will end it.
func (h Hanging) aged(why string, maxTimeout time.Duration, now time.Time) (Hanging, bool) {
	if h.LastTimestamp <= 0 {
		h.Reason = why + ", but the partition does not say when its producer last wrote: its coordinator may still end it"
		return h, false
	}
	open := now.Sub(time.UnixMilli(h.LastTimestamp))
	if open <= maxTimeout {
		h.Reason = fmt.Sprintf("%s, but its producer last wrote %s ago, within the %s a transaction may stay open", why, open.Round(time.Second), maxTimeout)
		return h, false
	}
	h.Reason = fmt.Sprintf("%s, and its producer last wrote %s ago, longer than any transaction may stay open (%s)", why, open.Round(time.Second), maxTimeout)
	return h, true
}
