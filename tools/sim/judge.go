package sim

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/eosflow/eosflow/tools/chaos"
	"github.com/eosflow/eosflow/tools/verdict"
	"github.com/eosflow/eosflow/topology"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

const readBound = 15 * time.Second

// read reads topic to its end, read_committed (or not), once every member
// is closed.
func (s *sim) read(ctx context.Context, topic string, committed bool) ([]*kgo.Record, error) {
	if committed {
		return verdict.DrainWithin(ctx, s.base(), topic, 0, 50*time.Millisecond, readBound)
	}
	rctx, cancel := context.WithTimeout(ctx, readBound)
	defer cancel()
	return verdict.DrainAll(rctx, s.base(), topic, 0, 50*time.Millisecond)
}

// lostToFlips returns the records of topic in the transactions a
// CommitLost ended aborted: their inputs may be missing from the output.
func (s *sim) lostToFlips(ctx context.Context, topic string) ([]*kgo.Record, error) {
	s.mu.Lock()
	flipped := slices.Clone(s.flipped)
	s.mu.Unlock()
	if len(flipped) == 0 {
		return nil, nil
	}
	all, err := s.read(ctx, topic, false)
	if err != nil {
		return nil, fmt.Errorf("reading %s read_uncommitted: %w", topic, err)
	}
	var lost []*kgo.Record
	for _, r := range all {
		if slices.Contains(flipped, producerEpoch{r.ProducerID, r.ProducerEpoch}) {
			lost = append(lost, r)
		}
	}
	return lost, nil
}

// judge checks the output, read_committed: every input record once, in
// order per key (for counts: each key's counts 1, 2, … n, its changelog
// ending at n). A record of a commit that was lost may be missing, and
// its key's counts may skip, but nothing may come out twice.
func (s *sim) judge(ctx context.Context) error {
	if s.sched.Pipeline == PgSink {
		return s.judgeRows(ctx)
	}
	lost, err := s.lostToFlips(ctx, output)
	if err != nil {
		return err
	}
	out, err := s.read(ctx, output, true)
	if err != nil {
		return fmt.Errorf("reading the output: %w", err)
	}
	switch s.sched.Pipeline {
	case Stateless:
		return as(KindOutput, judgeRecords(s.inputs, out, lost))
	case DedupAfter, DedupBefore:
		if err := judgeRecords(s.inputs, out, lost); err != nil {
			return as(KindOutput, err)
		}
		return as(KindEffects, s.judgeEffects())
	case Windowed, StreamJoin:
		return s.seeded.judge(out)
	case Timers:
		if err := judgeRecords(s.inputs, out, lost); err != nil {
			return as(KindOutput, err)
		}
		return s.judgeFires(ctx)
	}
	changelog, err := s.read(ctx, topology.ChangelogTopic(appID, chaos.CountStore), true)
	if err != nil {
		return fmt.Errorf("reading the changelog: %w", err)
	}
	lostPerKey := map[string]int64{}
	for _, r := range lost {
		lostPerKey[string(r.Key)]++
	}
	return as(KindCounts, judgeCounts(s.want, out, changelog, lostPerKey))
}

// judgeRecords is verdict.Judge, with the records of lost commits allowed
// to be missing.
func judgeRecords(n int, out, lost []*kgo.Record) error {
	v := verdict.Judge(n, out)
	if len(lost) == 0 {
		if !v.OK() {
			return errors.New(v.String())
		}
		return nil
	}
	may, got := map[int]bool{}, map[int]bool{}
	for _, r := range lost {
		id, _ := verdict.ID(r.Value)
		may[id] = true
	}
	for _, r := range out {
		id, _ := verdict.ID(r.Value)
		got[id] = true
	}
	v.Missing = 0
	for id := range n {
		if !got[id] && !may[id] {
			v.Missing++
		}
	}
	if v.Missing+v.Duplicates+v.OutOfOrder+v.Unknown > 0 {
		return fmt.Errorf("%v (%d records of lost commits may be missing)", v, len(lost))
	}
	return nil
}

// judgeCounts checks each key's counts in out: 1, 2, … want, each once.
// A key with records in lost commits (lost, per key) may skip that many
// counts in all, and end that much short; it never repeats one. Every
// key's changelog ends at its last count.
func judgeCounts(want map[string]int64, out, changelog []*kgo.Record, lost map[string]int64) error {
	var bad []string
	last, skipped := map[string]int64{}, map[string]int64{}
	for _, r := range out {
		k := string(r.Key)
		c, ok := verdict.ParseCount(r.Value)
		prev := last[k]
		switch {
		case !ok || want[k] == 0:
			bad = append(bad, fmt.Sprintf("unknown output %s=%q at %d/%d", k, r.Value, r.Partition, r.Offset))
		case c == prev+1:
		case c > prev && skipped[k]+c-prev-1 <= lost[k]:
			skipped[k] += c - prev - 1
		default:
			bad = append(bad, fmt.Sprintf("key %s: count %d after %d at %d/%d", k, c, prev, r.Partition, r.Offset))
		}
		last[k] = c
	}
	fold := foldCounts(changelog)
	for k, w := range want {
		if got := last[k]; got > w || got < w-lost[k] {
			bad = append(bad, fmt.Sprintf("key %s: last count %d, want %d", k, got, w))
		}
		if fold[k] != last[k] {
			bad = append(bad, fmt.Sprintf("key %s: changelog ends at %d, output at %d", k, fold[k], last[k]))
		}
	}
	if len(bad) == 0 {
		return nil
	}
	slices.Sort(bad)
	return fmt.Errorf("%d count violations (%d keys with records of lost commits): %s", len(bad), len(lost), strings.Join(bad[:min(len(bad), 5)], "; "))
}

// foldCounts is each key's last count in a counting store's changelog.
func foldCounts(changelog []*kgo.Record) map[string]int64 {
	fold := map[string]int64{}
	for _, r := range changelog {
		if len(r.Value) == 8 {
			fold[string(r.Key)] = int64(binary.BigEndian.Uint64(r.Value))
		}
	}
	return fold
}

// inputEnds is the end offset of each input partition.
func (s *sim) inputEnds(ctx context.Context) (map[int32]int64, error) {
	cl, err := kgo.NewClient(s.base()...)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	listed, err := kadm.NewClient(cl).ListEndOffsets(ctx, input)
	if err == nil {
		err = listed.Error()
	}
	if err != nil {
		return nil, err
	}
	ends := map[int32]int64{}
	listed.Each(func(o kadm.ListedOffset) { ends[o.Partition] = o.Offset })
	return ends, nil
}
