package eos

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/eosflow/eosflow/internal/kafkautil"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/plugin/kzap"
	"go.uber.org/zap"
)

// mirrorReadBound bounds one read of the mirror; a failed read is tried
// again every second, up to recovery_timeout.
const mirrorReadBound = 30 * time.Second

// learnMirror returns where the mirror says the last commit of each of
// fetched's partitions reached, and raises the floor to it. It tries until
// it can read the mirror, for up to recovery_timeout: consuming from the
// group's offsets unchecked could process records again.
func (rc *resumeCheck) learnMirror(ctx context.Context, fetched map[string]map[int32]kgo.Offset) (map[string]map[int32]kgo.EpochOffset, error) {
	if rc.mirror() == nil || len(fetched) == 0 {
		return nil, nil
	}
	var since time.Time
	for next := time.Now(); ; {
		rctx, cancel := context.WithTimeout(ctx, mirrorReadBound)
		got, err := rc.readMirror(rctx, fetched)
		cancel()
		switch {
		case err == nil:
			rc.floor.raiseTo(got)
			if !since.IsZero() {
				rc.log.Info("read the offsets mirror", zap.String("topic", rc.mirrorTopic), zap.Duration("waited", time.Since(since)))
			}
			return got, nil
		case ctx.Err() != nil:
			return nil, ctx.Err()
		case isFatal(err):
			return nil, rc.authz.errOp(fmt.Errorf("reading the offsets mirror %s: %w", rc.mirrorTopic, err), "Read", rc.mirrorTopic)
		}
		since = rc.floor.waitUnread(mirrorParts(rc.mirrorTopic, fetched), rc.cfg.RebalanceTimeout)
		rc.floor.failed(err)
		if time.Now().After(next) {
			rc.log.Warn("cannot read the offsets mirror; waiting, since the group's offsets alone may be a broker's that forgot them",
				zap.String("topic", rc.mirrorTopic), zap.Duration("waited", time.Since(since)), zap.Duration("bound", rc.cfg.RecoveryTimeout), zap.Error(err))
			next = time.Now().Add(10 * time.Second)
		}
		if err := rc.floor.bound(rc.cfg.AppID, rc.cfg.RecoveryTimeout); err != nil {
			return nil, err
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(time.Second):
		}
	}
}

// mirrorParts names the mirror partitions a read of fetched needs.
func mirrorParts(topic string, fetched map[string]map[int32]kgo.Offset) []string {
	var ps []int32
	for _, parts := range fetched {
		for p := range parts {
			ps = append(ps, p)
		}
	}
	slices.Sort(ps)
	var out []string
	for _, p := range slices.Compact(ps) {
		out = append(out, fmt.Sprintf("%s/%d", topic, p))
	}
	return out
}

// mirrorWindow is how far back from its end the first read of a mirror
// partition starts; each read that misses a key starts eight times as far.
const mirrorWindow = 256

// readMirror returns the last committed offset that the mirror holds for
// each of fetched's partitions. It reads each mirror partition backwards
// from its last stable offset, in growing windows, until every input topic
// it needs is found or the partition's start is reached. A mirror
// partition that does not exist (an input grew) holds nothing.
func (rc *resumeCheck) readMirror(ctx context.Context, fetched map[string]map[int32]kgo.Offset) (map[string]map[int32]kgo.EpochOffset, error) {
	starts, ends, err := rc.mirrorBounds(ctx, resuming(fetched))
	if err != nil {
		return nil, err
	}
	topic := rc.mirrorTopic
	need := map[int32]int{} // mirror partition → input topics to find there
	for _, ps := range fetched {
		for p := range ps {
			s, e, exists, err := bounds(starts, ends, topic, p)
			if err != nil {
				return nil, fmt.Errorf("partition %d: %w", p, err)
			}
			if exists && e > s {
				need[p]++
			}
		}
	}
	out := map[string]map[int32]kgo.EpochOffset{}
	for span := int64(mirrorWindow); len(need) > 0; span *= 8 {
		consume, end := map[int32]kgo.Offset{}, map[int32]int64{}
		for p := range need {
			s, e, _, _ := bounds(starts, ends, topic, p)
			from := max(s, e-span)
			consume[p], end[p] = kgo.NewOffset().At(from), e
			if from == s {
				need[p] = -1 // read from its start: nothing more to find
			}
		}
		if err := rc.consumeMirror(ctx, consume, end, fetched, out); err != nil {
			return nil, err
		}
		for p, n := range need {
			if n < 0 || found(out, p) >= n {
				delete(need, p)
			}
		}
	}
	return out, nil
}

// found counts the input topics out has an offset for in partition p.
func found(out map[string]map[int32]kgo.EpochOffset, p int32) int {
	n := 0
	for _, ps := range out {
		if _, ok := ps[p]; ok {
			n++
		}
	}
	return n
}

// mirrorBounds lists the mirror's start offsets and last stable offsets.
// Before a partition resumes from the mirror, the transactions open there
// are given up to transaction_timeout to end: one whose EndTxn committed
// but whose markers a restarted broker has not written yet holds the
// newest offsets.
func (rc *resumeCheck) mirrorBounds(ctx context.Context, resume bool) (starts, ends kadm.ListedOffsets, err error) {
	adm := kadm.NewClient(rc.admin())
	if starts, err = adm.ListStartOffsets(ctx, rc.mirrorTopic); err != nil {
		return nil, nil, err
	}
	var high kadm.ListedOffsets
	if resume {
		if high, err = adm.ListEndOffsets(ctx, rc.mirrorTopic); err != nil {
			return nil, nil, err
		}
	}
	for begin := time.Now(); ; {
		if ends, err = adm.ListCommittedOffsets(ctx, rc.mirrorTopic); err != nil || !resume || settled(ends, high) {
			return starts, ends, err
		}
		if time.Since(begin) > rc.cfg.TransactionTimeout {
			rc.log.Warn("transactions stay open on the offsets mirror; resuming from what it holds committed", zap.String("topic", rc.mirrorTopic),
				zap.Duration("waited", time.Since(begin)), zap.String("inspect", "eosctl txn hanging --topic "+rc.mirrorTopic))
			return starts, ends, nil
		}
		select {
		case <-ctx.Done():
			return nil, nil, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// settled reports whether every partition's last stable offset reached
// the high watermark listed before.
func settled(ends, high kadm.ListedOffsets) bool {
	ok := true
	high.Each(func(h kadm.ListedOffset) {
		if e, found := ends.Lookup(h.Topic, h.Partition); h.Err == nil && (!found || e.Err != nil || e.Offset < h.Offset) {
			ok = false
		}
	})
	return ok
}

// resuming reports whether some partition of fetched has no committed
// offset in the group, so may resume from the mirror.
func resuming(fetched map[string]map[int32]kgo.Offset) bool {
	for _, ps := range fetched {
		for _, o := range ps {
			if o.EpochOffset().Offset < 0 {
				return true
			}
		}
	}
	return false
}

// bounds returns partition p's start and last stable offset, an error of
// either (only the partitions a read needs must answer), and whether the
// partition exists.
func bounds(starts, ends kadm.ListedOffsets, topic string, p int32) (start, end int64, exists bool, err error) {
	s, sok := starts.Lookup(topic, p)
	e, eok := ends.Lookup(topic, p)
	if !sok || !eok {
		return 0, 0, false, nil
	}
	if err = s.Err; err == nil {
		err = e.Err
	}
	return s.Offset, e.Offset, true, err
}

// consumeMirror reads each partition of consume until a record (a marker
// included) at or past its end comes, keeping in out the last committed
// offset of each of fetched's partitions.
func (rc *resumeCheck) consumeMirror(ctx context.Context, consume map[int32]kgo.Offset, end map[int32]int64, fetched map[string]map[int32]kgo.Offset, out map[string]map[int32]kgo.EpochOffset) error {
	opts, err := kafkautil.ConnOptions(rc.cfg, rc.extra...)
	if err != nil {
		return err
	}
	opts = append(opts, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{rc.mirrorTopic: consume}),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.KeepControlRecords(),
		kgo.WithLogger(kzap.New(rc.log.Named("kgo"), kzap.LevelFn(rc.clientLevel))))
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return err
	}
	defer cl.Close()
	left := len(end)
	for left > 0 {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			return fmt.Errorf("%w with partitions %s of %s left to read", ctx.Err(), unread(end), rc.mirrorTopic)
		}
		if err := fatalFetch(fs); err != nil {
			return err
		}
		fs.EachRecord(func(rec *kgo.Record) {
			e, reading := end[rec.Partition]
			if !reading || e < 0 {
				return
			}
			if !rec.Attrs.IsControl() {
				rc.mirror().take(rec, fetched, out)
			}
			if rec.Offset >= e-1 {
				end[rec.Partition] = -1
				left--
			}
		})
	}
	return nil
}

// take keeps rec's offset in out when it is of a partition of fetched.
func (m *offsetsMirror) take(rec *kgo.Record, fetched map[string]map[int32]kgo.Offset, out map[string]map[int32]kgo.EpochOffset) {
	topic := string(rec.Key)
	if _, ok := fetched[topic][rec.Partition]; !ok {
		return
	}
	id, o, ok := decodeMirror(rec.Value)
	if !ok || !m.sameTopic(topic, id) {
		return
	}
	if out[topic] == nil {
		out[topic] = map[int32]kgo.EpochOffset{}
	}
	out[topic][rec.Partition] = o
}

// fatalFetch returns the first fetch error no retry heals.
func fatalFetch(fs kgo.Fetches) error {
	for _, fe := range fs.Errors() {
		if isFatal(fe.Err) || errors.Is(fe.Err, kerr.UnknownTopicOrPartition) {
			return fe.Err
		}
	}
	return nil
}

// unread names the partitions of end not read to their end yet.
func unread(end map[int32]int64) string {
	var ps []int
	for p, e := range end {
		if e >= 0 {
			ps = append(ps, int(p))
		}
	}
	slices.Sort(ps)
	s := make([]string, len(ps))
	for i, p := range ps {
		s[i] = strconv.Itoa(p)
	}
	return strings.Join(s, ",")
}
