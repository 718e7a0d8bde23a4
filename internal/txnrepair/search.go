package txnrepair

import (
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
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
func (f *Finder) markerOutcome(ctx context.Context, all kadm.DescribedProducersTopics, h kadm.DescribedProducer) Verdict {
	if !f.TransactionsV2(ctx) {
		return Verdict{}
	}
	var cands []kadm.DescribedProducer
	all.EachProducer(func(p kadm.DescribedProducer) {
		if p.ProducerID == h.ProducerID && p.ProducerEpoch > h.ProducerEpoch && (p.Topic != h.Topic || p.Partition != h.Partition) {
			cands = append(cands, p)
		}
	})
	if len(cands) == 0 {
		return Verdict{}
	}
	slices.SortStableFunc(cands, func(a, b kadm.DescribedProducer) int { return cmp.Compare(a.ProducerEpoch, b.ProducerEpoch) })
	cands = cands[:min(len(cands), markerMaxPartitions)]
	sctx, cancel := context.WithTimeout(ctx, markerSearchTimeout)
	defer cancel()
	set := kadm.TopicsSet{}
	for _, c := range cands {
		set.Add(c.Topic, c.Partition)
	}
	starts, serr := f.adm.ListStartOffsets(sctx, set.Topics()...)
	ends, eerr := f.adm.ListEndOffsets(sctx, set.Topics()...)
	if serr != nil || eerr != nil {
		f.log.Info("cannot list offsets to look for the marker of a hanging transaction", zap.NamedError("start", serr), zap.NamedError("end", eerr))
		return Verdict{Unsure: true}
	}
	f.log.Info("looking for how the coordinator ended a hanging transaction, on the partitions it also wrote",
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
		v, read := f.scanBack(sctx, c.Topic, c.Partition, so.Offset, eo.Offset, budget, markerOf(h.ProducerID, h.ProducerEpoch))
		budget -= read
		unsure = unsure || v.Unsure
		if v.Proven() {
			return v
		}
		if budget <= 0 || sctx.Err() != nil {
			return Verdict{Unsure: true}
		}
	}
	return Verdict{Unsure: unsure}
}

// recordMatch judges one record of a backward search: whether it decides
// the transaction (v.Proven()), or shows that nothing further back can
// (older).
type recordMatch func(rec *kgo.Record) (v Verdict, older bool)

// markerOf matches the marker of the transaction of pid at epoch under
// transaction version 2: a control record of pid at epoch+1 (type 0
// ABORT, 1 COMMIT). A record of pid at epoch or before is older: the
// marker would come after it.
func markerOf(pid int64, epoch int16) recordMatch {
	return func(rec *kgo.Record) (v Verdict, older bool) {
		if rec.ProducerID != pid {
			return v, false
		}
		if rec.ProducerEpoch == epoch+1 && rec.Attrs.IsControl() && len(rec.Key) >= 4 {
			switch binary.BigEndian.Uint16(rec.Key[2:4]) {
			case 0, 1:
				return markerFound(rec.Key[3] == 1, fmt.Sprintf("%s/%d", rec.Topic, rec.Partition)), false
			}
		}
		return v, rec.ProducerEpoch <= epoch
	}
}

// scanBack reads partition topic/partition back from end towards start,
// in windows growing from markerFirstWindow by markerWindowGrowth, until
// match finds the outcome or an older record, reading at most budget
// records. It returns what it found and how many records it read.
func (f *Finder) scanBack(ctx context.Context, topic string, partition int32, start, end int64, budget int, match recordMatch) (Verdict, int) {
	read := 0
	hi, window := end, int64(markerFirstWindow)
	for hi > start && read < budget && ctx.Err() == nil {
		lo := max(start, hi-min(window, int64(budget-read)))
		v, older, n, err := f.readRange(ctx, topic, partition, lo, hi, match)
		read += n
		if err != nil {
			f.log.Info("cannot read a partition to look for how a hanging transaction ended",
				zap.String("topic", topic), zap.Int32("partition", partition), zap.Error(err))
			// Refused for good (no Read on the transaction log, say):
			// this source cannot tell, which is not a passing failure.
			return Verdict{Unsure: !isAuthError(err)}, read
		}
		if v.Proven() || older {
			return v, read
		}
		hi, window = lo, window*markerWindowGrowth
	}
	// Read to the start: nothing there. Stopped by a bound: unknown.
	return Verdict{Unsure: hi > start}, read
}

// readRange reads [lo, hi) of topic/partition with match, forwards: the
// first record it finds the outcome in ends the read. A fetch error, or
// a poll that brings nothing for markerPollWait, is an error: the range
// was not read, and its outcome is unknown.
func (f *Finder) readRange(ctx context.Context, topic string, partition int32, lo, hi int64, match recordMatch) (v Verdict, older bool, n int, err error) {
	cl, err := f.read(topic, partition, lo)
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
			if v.Proven() {
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
		if v.Proven() {
			break
		}
		if !got {
			// Below the end offset listed before, every offset that
			// compaction left is readable: silence is a failure.
			return v, older, n, fmt.Errorf("no record at %d of %s/%d within %s", next, topic, partition, markerPollWait)
		}
	}
	if !v.Proven() && next < hi {
		return v, older, n, ctx.Err()
	}
	return v, older, n, nil
}

// itoa16 prints an epoch.
func itoa16(n int16) string { return strconv.Itoa(int(n)) }

// markerFound is the verdict of a marker: COMMIT (commit) or ABORT.
func markerFound(commit bool, where string) Verdict {
	if commit {
		return Verdict{Outcome: Committed, Where: where}
	}
	return Verdict{Outcome: Aborted, Where: where}
}

// ProducerAt reads the producer id and epoch of the record at offset of
// topic/partition. At a partition's CurrentTxnStartOffset it names the
// transaction that opened what the partition holds open: under
// transaction version 2 every transaction of a producer has an epoch of
// its own, so an epoch older than the producer's now shows that a later
// transaction joined one whose marker was skipped.
func (f *Finder) ProducerAt(ctx context.Context, topic string, partition int32, offset int64) (int64, int16, error) {
	pid, epoch := int64(-1), int16(-1)
	first := func(rec *kgo.Record) (Verdict, bool) {
		if pid < 0 && rec.Offset == offset {
			pid, epoch = rec.ProducerID, rec.ProducerEpoch
		}
		return Verdict{}, true
	}
	if _, _, _, err := f.readRange(ctx, topic, partition, offset, offset+1, first); err != nil {
		return -1, -1, err
	}
	if pid < 0 {
		return -1, -1, fmt.Errorf("no record at offset %d of %s/%d: compacted or deleted", offset, topic, partition)
	}
	return pid, epoch, nil
}
