package eos

import (
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"
	"unicode/utf16"

	"github.com/eosflow/eosflow/internal/kafkautil"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/plugin/kzap"
	"go.uber.org/zap"
)

// Bounds of the search for a transaction's marker (see markerOutcome):
// it reads back from the end of a partition in windows that grow by
// markerWindowGrowth, over at most markerMaxPartitions partitions and
// markerMaxRecords records in all, within markerSearchTimeout.
const (
	markerFirstWindow   = 512
	markerWindowGrowth  = 4
	markerMaxPartitions = 8
	markerMaxRecords    = 1 << 20
	markerSearchTimeout = 15 * time.Second
	markerPollWait      = 3 * time.Second
)

// markerVerdict is what the partitions say of one transaction: its
// outcome (found, commit, where), or that a read failed or ran out of
// its bounds before it could tell (unsure), which must not pass for
// "no outcome anywhere".
type markerVerdict struct {
	found, commit, unsure bool
	where                 string // "topic/partition" holding the record
}

// markerOutcome finds how the coordinator ended the transaction that
// partition h still holds open, from the marker it wrote on another
// partition of the same transaction. When a restarting broker skips a
// partition's marker, the coordinator moves on as if it were written: its
// state then proves the outcome only until the producer's next EndTxn,
// but the markers it did write keep it for as long as the log does.
// Under transaction version 2 the coordinator writes the markers of the
// transaction at epoch e with epoch e+1, the only records of the
// producer at that epoch that are control records, so the marker names
// its transaction; under version 1 it cannot, and nothing is found.
//
// The partitions searched are those of all (described producers of the
// topics the app writes) where the producer has written since epoch e,
// nearest epoch first. Each is read back from its end, in growing
// windows, until the marker, or a record of the producer at epoch e or
// older (the marker would come after it), or its start. The search is
// bounded (markerMaxPartitions, markerMaxRecords, markerSearchTimeout).
func (r *Runner) markerOutcome(ctx context.Context, adm *kadm.Client, all kadm.DescribedProducersTopics, h kadm.DescribedProducer) markerVerdict {
	if !r.transactionsV2(ctx) {
		return markerVerdict{}
	}
	var cands []kadm.DescribedProducer
	all.EachProducer(func(p kadm.DescribedProducer) {
		if p.ProducerID == h.ProducerID && p.ProducerEpoch > h.ProducerEpoch && (p.Topic != h.Topic || p.Partition != h.Partition) {
			cands = append(cands, p)
		}
	})
	if len(cands) == 0 {
		return markerVerdict{}
	}
	slices.SortStableFunc(cands, func(a, b kadm.DescribedProducer) int { return cmp.Compare(a.ProducerEpoch, b.ProducerEpoch) })
	cands = cands[:min(len(cands), markerMaxPartitions)]
	sctx, cancel := context.WithTimeout(ctx, markerSearchTimeout)
	defer cancel()
	set := kadm.TopicsSet{}
	for _, c := range cands {
		set.Add(c.Topic, c.Partition)
	}
	starts, serr := adm.ListStartOffsets(sctx, set.Topics()...)
	ends, eerr := adm.ListEndOffsets(sctx, set.Topics()...)
	if serr != nil || eerr != nil {
		r.log.Info("cannot list offsets to look for the marker of a hanging transaction", zap.NamedError("start", serr), zap.NamedError("end", eerr))
		return markerVerdict{unsure: true}
	}
	r.log.Info("looking for how the coordinator ended a hanging transaction, on the partitions it also wrote",
		zap.String("topic", h.Topic), zap.Int32("partition", h.Partition), zap.Int64("producer_id", h.ProducerID),
		zap.Int16("epoch", h.ProducerEpoch), zap.Int("partitions", len(cands)), zap.Duration("bound", markerSearchTimeout))
	budget, unsure := markerMaxRecords, false
	for _, c := range cands {
		so, sok := starts.Lookup(c.Topic, c.Partition)
		eo, eok := ends.Lookup(c.Topic, c.Partition)
		if !sok || !eok || so.Err != nil || eo.Err != nil {
			unsure = true // leaderless for now, say: the others may still tell
			continue
		}
		v, read := r.scanBack(sctx, c.Topic, c.Partition, so.Offset, eo.Offset, budget, markerOf(h.ProducerID, h.ProducerEpoch))
		budget -= read
		unsure = unsure || v.unsure
		if v.found {
			return v
		}
		if budget <= 0 || sctx.Err() != nil {
			return markerVerdict{unsure: true}
		}
	}
	return markerVerdict{unsure: unsure}
}

// markerReader is a client that reads topic/partition from offset as it
// is, aborted records and control records included. The runtime's
// essentials go last, over the user's options. One per range read: a
// client moved to another offset may still deliver what it fetched for
// the last one.
func (r *Runner) markerReader(topic string, partition int32, offset int64) (*kgo.Client, error) {
	opts, err := kafkautil.ConnOptions(r.cfg, r.extra...)
	if err != nil {
		return nil, err
	}
	return kgo.NewClient(append(opts,
		kgo.WithLogger(kzap.New(r.log.Named("kgo"), kzap.LevelFn(r.clientLogLevel))),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {partition: kgo.NewOffset().At(offset)}}),
		kgo.FetchIsolationLevel(kgo.ReadUncommitted()), kgo.KeepControlRecords(),
		kgo.FetchMaxWait(200*time.Millisecond), kgo.ConsumeResetOffset(kgo.NoResetOffset()))...)
}

// recordMatch judges one record of a backward search: whether it decides
// the transaction (v.found), or shows that nothing further back can
// (older).
type recordMatch func(rec *kgo.Record) (v markerVerdict, older bool)

// markerOf matches the marker of the transaction of pid at epoch under
// transaction version 2: a control record of pid at epoch+1 (type 0
// ABORT, 1 COMMIT). A record of pid at epoch or before is older: the
// marker would come after it.
func markerOf(pid int64, epoch int16) recordMatch {
	return func(rec *kgo.Record) (v markerVerdict, older bool) {
		if rec.ProducerID != pid {
			return v, false
		}
		if rec.ProducerEpoch == epoch+1 && rec.Attrs.IsControl() && len(rec.Key) >= 4 {
			switch binary.BigEndian.Uint16(rec.Key[2:4]) {
			case 0, 1:
				return markerVerdict{found: true, commit: rec.Key[3] == 1, where: fmt.Sprintf("%s/%d", rec.Topic, rec.Partition)}, false
			}
		}
		return v, rec.ProducerEpoch <= epoch
	}
}

// scanBack reads partition topic/partition back from end towards start,
// in windows growing from markerFirstWindow by markerWindowGrowth, until
// match finds the outcome or an older record, reading at most budget
// records. It returns what it found and how many records it read.
func (r *Runner) scanBack(ctx context.Context, topic string, partition int32, start, end int64, budget int, match recordMatch) (markerVerdict, int) {
	read := 0
	hi, window := end, int64(markerFirstWindow)
	for hi > start && read < budget && ctx.Err() == nil {
		lo := max(start, hi-min(window, int64(budget-read)))
		v, older, n, err := r.readRange(ctx, topic, partition, lo, hi, match)
		read += n
		if err != nil {
			r.log.Info("cannot read a partition to look for how a hanging transaction ended",
				zap.String("topic", topic), zap.Int32("partition", partition), zap.Error(err))
			// Refused for good (no Read on the transaction log, say):
			// this source cannot tell, which is not a passing failure.
			return markerVerdict{unsure: !isAuthError(err)}, read
		}
		if v.found || older {
			return v, read
		}
		hi, window = lo, window*markerWindowGrowth
	}
	// Read to the start: nothing there. Stopped by a bound: unknown.
	return markerVerdict{unsure: hi > start}, read
}

// readRange reads [lo, hi) of topic/partition with match, forwards: the
// first record it finds the outcome in ends the read. A fetch error, or
// a poll that brings nothing for markerPollWait, is an error: the range
// was not read, and its outcome is unknown.
func (r *Runner) readRange(ctx context.Context, topic string, partition int32, lo, hi int64, match recordMatch) (v markerVerdict, older bool, n int, err error) {
	cl, err := r.markerReader(topic, partition, lo)
	if err != nil {
		return v, false, 0, err
	}
	defer cl.Close()
	next := lo
	for next < hi && ctx.Err() == nil {
		pctx, cancel := context.WithTimeout(ctx, markerPollWait)
		fs := cl.PollFetches(pctx)
		cancel()
		for _, fe := range fs.Errors() {
			if !errors.Is(fe.Err, context.DeadlineExceeded) && !errors.Is(fe.Err, context.Canceled) {
				return v, older, n, fe.Err
			}
		}
		got := false
		fs.EachRecord(func(rec *kgo.Record) {
			if v.found {
				return
			}
			got = true
			if rec.Offset >= hi {
				next = hi
				return
			}
			n++
			next = rec.Offset + 1
			rv, ro := match(rec)
			v, older = rv, older || ro
		})
		if v.found {
			break
		}
		if !got {
			// Below the end offset listed before, every offset that
			// compaction left is readable: silence is a failure.
			return v, older, n, fmt.Errorf("no record at %d of %s/%d within %s", next, topic, partition, markerPollWait)
		}
	}
	if !v.found && next < hi {
		return v, older, n, ctx.Err()
	}
	return v, older, n, nil
}

// marker names the marker v found.
func (v markerVerdict) marker() string {
	if v.commit {
		return "COMMIT"
	}
	return "ABORT"
}

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
func (r *Runner) txnLogOutcome(ctx context.Context, adm *kadm.Client, txnID string, pid int64, epoch int16) markerVerdict {
	if txnID == "" || !r.transactionsV2(ctx) {
		return markerVerdict{}
	}
	sctx, cancel := context.WithTimeout(ctx, markerSearchTimeout)
	defer cancel()
	topics, err := adm.ListTopics(sctx, txnLogTopic)
	td, ok := topics[txnLogTopic]
	if err == nil && ok {
		err = td.Err
	}
	if err != nil || !ok || len(td.Partitions) == 0 {
		// Not granted, or no such topic (an embedded broker): the
		// markers are the only witness left.
		r.log.Info("cannot read the transaction log to learn how a hanging transaction ended", zap.String("transactional_id", txnID), zap.Error(err))
		return markerVerdict{}
	}
	partition := txnLogPartition(txnID, len(td.Partitions))
	starts, serr := adm.ListStartOffsets(sctx, txnLogTopic)
	ends, eerr := adm.ListEndOffsets(sctx, txnLogTopic)
	so, sok := starts.Lookup(txnLogTopic, partition)
	eo, eok := ends.Lookup(txnLogTopic, partition)
	if serr != nil || eerr != nil || !sok || !eok || so.Err != nil || eo.Err != nil {
		r.log.Info("cannot list the transaction log's offsets to learn how a hanging transaction ended", zap.String("transactional_id", txnID),
			zap.NamedError("start", errors.Join(serr, so.Err)), zap.NamedError("end", errors.Join(eerr, eo.Err)))
		return markerVerdict{unsure: !isAuthError(errors.Join(serr, so.Err, eerr, eo.Err))}
	}
	r.log.Info("looking for how the coordinator ended a hanging transaction, in its transaction log",
		zap.String("transactional_id", txnID), zap.Int64("producer_id", pid), zap.Int16("epoch", epoch),
		zap.Int32("partition", partition), zap.Duration("bound", markerSearchTimeout))
	v, _ := r.scanBack(sctx, txnLogTopic, partition, so.Offset, eo.Offset, markerMaxRecords, txnLogRecordOf(txnID, pid, epoch))
	return v
}

// txnLogRecordOf matches the coordinator's log record that decides the
// transaction of txnID's producer pid at epoch under transaction version
// 2: the producer at epoch+1 preparing or completing a commit or an
// abort. A record of pid at epoch or before (the transaction still
// Ongoing, say) is older.
func txnLogRecordOf(txnID string, pid int64, epoch int16) recordMatch {
	return func(rec *kgo.Record) (v markerVerdict, older bool) {
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
				return markerVerdict{found: true, commit: true, where: where}, false
			case kmsg.TransactionStatePrepareAbort, kmsg.TransactionStateCompleteAbort:
				return markerVerdict{found: true, where: where}, false
			}
		}
		return v, m.ProducerEpoch <= epoch
	}
}

// txnLogPartition is the partition of the transaction log that holds
// txnID, as the broker places it: Java's String.hashCode, made
// non-negative as Kafka's Utils.abs does, modulo the partition count.
func txnLogPartition(txnID string, partitions int) int32 {
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

// isAuthError reports a refusal no retry changes.
func isAuthError(err error) bool {
	return errors.Is(err, kerr.TopicAuthorizationFailed) || errors.Is(err, kerr.ClusterAuthorizationFailed)
}
