package txnrepair

import (
	"context"
	"errors"
	"fmt"
	"math"
	"unicode/utf16"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"
)

// txnLogTopic is where transaction coordinators log each transaction's
// state changes, keyed by transactional id.
const txnLogTopic = "__transaction_state"

// txnLogOutcome reads how the coordinator of txnID ended the
// transaction of pid at epoch from the coordinator's own log: under
// transaction version 2 its EndTxn logs PrepareCommit (or PrepareAbort)
// at epoch+1 before any marker is sent, and the log keeps the record
// until compaction reaches it. That decides even a transaction whose
// markers were all skipped, where markerOutcome finds nothing. It needs
// Read on __transaction_state (ACL-secured clusters rarely grant it):
// without it, or past compaction, nothing is found.
func (f *Finder) txnLogOutcome(ctx context.Context, txnID string, pid int64, epoch int16) Verdict {
	if txnID == "" || !f.TransactionsV2(ctx) {
		return Verdict{}
	}
	sctx, cancel := context.WithTimeout(ctx, markerSearchTimeout)
	defer cancel()
	topics, err := f.adm.ListTopics(sctx, txnLogTopic)
	td, ok := topics[txnLogTopic]
	if err == nil && ok {
		err = td.Err
	}
	if err != nil || !ok || len(td.Partitions) == 0 {
		// Not granted, or no such topic (an embedded broker): the
		// markers are the only witness left.
		f.log.Info("cannot read the transaction log to learn how a hanging transaction ended", zap.String("transactional_id", txnID), zap.Error(err))
		return Verdict{}
	}
	partition := TxnLogPartition(txnID, len(td.Partitions))
	starts, serr := f.adm.ListStartOffsets(sctx, txnLogTopic)
	ends, eerr := f.adm.ListEndOffsets(sctx, txnLogTopic)
	so, sok := starts.Lookup(txnLogTopic, partition)
	eo, eok := ends.Lookup(txnLogTopic, partition)
	if serr != nil || eerr != nil || !sok || !eok || so.Err != nil || eo.Err != nil {
		f.log.Info("cannot list the transaction log's offsets to learn how a hanging transaction ended", zap.String("transactional_id", txnID),
			zap.NamedError("start", errors.Join(serr, so.Err)), zap.NamedError("end", errors.Join(eerr, eo.Err)))
		return Verdict{Unsure: !isAuthError(errors.Join(serr, so.Err, eerr, eo.Err))}
	}
	f.log.Info("looking for how the coordinator ended a hanging transaction, in its transaction log",
		zap.String("transactional_id", txnID), zap.Int64("producer_id", pid), zap.Int16("epoch", epoch),
		zap.Int32("partition", partition), zap.Duration("bound", markerSearchTimeout))
	v, _ := f.scanBack(sctx, txnLogTopic, partition, so.Offset, eo.Offset, markerMaxRecords, txnLogRecordOf(txnID, pid, epoch))
	return v
}

// txnLogRecordOf matches the coordinator's log record that decides the
// transaction of txnID's producer pid at epoch under transaction version
// 2: the producer at epoch+1 preparing or completing a commit or an
// abort. A record of pid at epoch or before (the transaction still
// Ongoing, say) is older.
func txnLogRecordOf(txnID string, pid int64, epoch int16) recordMatch {
	return func(rec *kgo.Record) (v Verdict, older bool) {
		var k kmsg.TxnMetadataKey
		if rec.Attrs.IsControl() || len(rec.Value) == 0 || k.ReadFrom(rec.Key) != nil || k.TransactionalID != txnID {
			return v, false
		}
		var m kmsg.TxnMetadataValue
		if m.ReadFrom(rec.Value) != nil || m.ProducerID != pid {
			return v, false
		}
		// A producer on version 1 keeps its epoch across transactions:
		// the next epoch's record need not be this one's.
		if m.ProducerEpoch == epoch+1 && m.ClientTransactionVersion >= 2 {
			where := fmt.Sprintf("%s/%d", rec.Topic, rec.Partition)
			switch m.State {
			case kmsg.TransactionStatePrepareCommit, kmsg.TransactionStateCompleteCommit:
				return Verdict{Outcome: Committed, Where: where}, false
			case kmsg.TransactionStatePrepareAbort, kmsg.TransactionStateCompleteAbort:
				return Verdict{Outcome: Aborted, Where: where}, false
			}
		}
		return v, m.ProducerEpoch <= epoch
	}
}

// TxnLogPartition is the partition of the transaction log that holds
// txnID, as the broker places it: Java's String.hashCode, made
// non-negative as Kafka's Utils.abs does, modulo the partition count.
func TxnLogPartition(txnID string, partitions int) int32 {
	var h int32
	for _, u := range utf16.Encode([]rune(txnID)) {
		h = 31*h + int32(u)
	}
	if h == math.MinInt32 {
		h = 0
	} else if h < 0 {
		h = -h
	}
	return h % int32(partitions)
}
