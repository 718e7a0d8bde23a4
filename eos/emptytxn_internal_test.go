package eos

import (
	"sync/atomic"
	"testing"
)

// An empty transaction ends as an abort reported as committed only while
// franz-go's session passed on no revoke or loss since the last End began:
// after one, the session fails the transaction, and its abort must stay an
// abort (nothingToCommit is false whatever the transaction holds).
func TestAnEmptyTransactionAfterARevokeIsNotReportedCommitted(t *testing.T) {
	var revokes atomic.Int64
	s := &txnSession{revokes: &revokes}
	if !s.unrevokedSinceEnd() {
		t.Fatal("no revoke counted, yet the first End sees one")
	}
	revokes.Add(1) // passed on during the batch
	unrevoked := s.unrevokedSinceEnd()
	if unrevoked || s.nothingToCommit(true, unrevoked) {
		t.Fatal("a batch after a revoke ends its empty transaction as a commit")
	}
	if !s.unrevokedSinceEnd() {
		t.Fatal("the revoke still counts against the batch after the next End")
	}
}
