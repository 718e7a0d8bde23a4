package txnrepair

import (
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
)

// The rule both the runtime and eosctl judge open transactions by: a
// coordinator that moved to a later epoch and is not preparing hangs a
// transaction at once; one that does not track it hangs it only once its
// producer is older than any transaction may be; where the coordinators
// could not be asked, nothing is claimed.
func TestClassify(t *testing.T) {
	now := time.Now()
	const maxTimeout = 15 * time.Minute
	old, young := now.Add(-time.Hour).UnixMilli(), now.Add(-time.Minute).UnixMilli()
	open := func(last int64) kadm.DescribedProducer {
		return kadm.DescribedProducer{Topic: "out", Partition: 0, ProducerID: 7, ProducerEpoch: 4, CurrentTxnStartOffset: 10, LastTimestamp: last}
	}
	says := func(pid int64, epoch int16, state string, withPartition bool) Coordinators {
		d := kadm.DescribedTransaction{TxnID: "app:2", ProducerID: pid, ProducerEpoch: epoch, State: state}
		if withPartition {
			d.Topics = kadm.TopicsSet{"out": {0: {}}}
		}
		return Coordinators{TxnIDs: map[int64]string{7: "app:2"}, States: kadm.DescribedTransactions{"app:2": d}, AllListed: true}
	}
	for _, tc := range []struct {
		name    string
		c       Coordinators
		last    int64
		hangs   bool
		current int16 // checked when hanging
		reason  string
		coord   bool // a coordinator's view is kept
	}{
		{"moved on, young", says(7, 5, "CompleteCommit", false), young, true, 5, "coordinator is at epoch 5 (CompleteCommit) and writes it no marker", true},
		{"moved on, a new transaction with the partition", says(7, 5, "Ongoing", true), young, true, 5, "at epoch 5 (Ongoing)", true},
		{"moved on, preparing", says(7, 5, "PrepareCommit", false), old, false, 0, "may still write the marker", true},
		{"tracked", says(7, 4, "Ongoing", true), old, false, 0, "still tracks it", true},
		{"tracked, preparing", says(7, 4, "PrepareAbort", true), old, false, 0, "still tracks it", true},
		{"same epoch, partition missing, old", says(7, 4, "Ongoing", false), old, true, 4, "does not include this partition", true},
		{"same epoch, partition missing, young", says(7, 4, "Ongoing", false), young, false, 0, "within the 15m0s", true},
		{"same epoch, not in a transaction, old", says(7, 4, "CompleteAbort", false), old, true, 4, "is CompleteAbort, not in a transaction", true},
		{"same epoch, not in a transaction, no timestamp", says(7, 4, "Empty", false), -1, false, 0, "does not say when", true},
		{"id has another producer id now, old", says(9, 0, "Empty", false), old, true, 6, "now has producer id 9", false},
		{"id has another producer id now, young", says(9, 0, "Empty", false), young, false, 0, "now has producer id 9", false},
		{"id unknown to its coordinator, old", Coordinators{TxnIDs: map[int64]string{7: "app:2"}, AllListed: true,
			States: kadm.DescribedTransactions{"app:2": {TxnID: "app:2", Err: kerr.TransactionalIDNotFound}}}, old, true, 6, "does not know", false},
		{"not listed, old", Coordinators{AllListed: true}, old, true, 6, "no transactional id has producer id 7", false},
		{"not listed, young", Coordinators{AllListed: true}, young, false, 0, "no transactional id", false},
		{"not listed by a listing that failed somewhere", Coordinators{}, old, false, 0, "not every coordinator answered", false},
		{"listed, not described (another app's, or failed)", Coordinators{TxnIDs: map[int64]string{7: "app:2"}, AllListed: true}, old, false, 0, "not known", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, hangs := tc.c.Classify(open(tc.last), maxTimeout, now)
			if hangs != tc.hangs || !strings.Contains(h.Reason, tc.reason) {
				t.Fatalf("hangs=%v (%s), want hangs=%v with %q", hangs, h.Reason, tc.hangs, tc.reason)
			}
			if tc.hangs && h.Current != tc.current {
				t.Errorf("current epoch %d, want %d", h.Current, tc.current)
			}
			if (h.Coordinator != nil) != tc.coord {
				t.Errorf("coordinator view %+v, want one=%v", h.Coordinator, tc.coord)
			}
		})
	}
}
