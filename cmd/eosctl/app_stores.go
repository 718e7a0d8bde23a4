package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eosflow/eosflow/state"
	"github.com/eosflow/eosflow/state/pebble"
	"github.com/eosflow/eosflow/topology"
)

// Restore states of a local store in `app describe`.
const (
	restoreDone        = "restored"           // applied everything committed to its changelog partition
	restoreBehind      = "behind"             // a restore would read BehindRecords committed records
	restoreInUse       = "in use"             // a running instance has it open
	restoreAhead       = "ahead of changelog" // applied more than the changelog holds: the runtime refuses it
	restoreNoChangelog = "no changelog"       // its changelog partition does not exist
	restoreUnknown     = "unknown"            // its offset or the changelog's end could not be read
)

// maxCountedOffsets bounds how much of a changelog describe reads to count
// the committed records a store is behind; past it, only the distance in
// offsets is shown.
const maxCountedOffsets = 100_000

// storeStateJSON is one local persistent store of `app describe` and its
// restore state: how its applied changelog offset compares with the
// changelog partition's end.
type storeStateJSON struct {
	Instance     string `json:"instance"`
	Store        string `json:"store"`
	Topic        string `json:"topic"` // the task: an input partition
	Partition    int32  `json:"partition"`
	Dir          string `json:"dir"`
	Changelog    string `json:"changelog"`
	Applied      int64  `json:"applied_offset"` // -1: nothing applied, or unknown (see restore)
	ChangelogEnd int64  `json:"changelog_end"`  // the high watermark; -1 when unknown
	Restore      string `json:"restore"`
	// BehindRecords is how many committed changelog records a restore
	// would read; -1 when not counted. Transaction markers and aborted
	// records are offsets too, so BehindOffsets is larger.
	BehindRecords int64  `json:"behind_records"`
	BehindOffsets int64  `json:"behind_offsets"`
	Detail        string `json:"detail,omitempty"`
}

// stores finds the pebble stores of every instance under base
// (<state_dir>/<app_id>) and judges each against its changelog.
func (d *appDescriber) stores(base string, internal []internalTopicJSON) ([]storeStateJSON, error) {
	out := []storeStateJSON{}
	instances, err := os.ReadDir(base)
	if errors.Is(err, os.ErrNotExist) {
		return out, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading the state directory %s: %w — check --state-dir", base, err)
	}
	ends := map[string]map[int32]int64{}
	for _, t := range internal {
		if t.Kind != kindChangelog {
			continue
		}
		ends[t.Topic] = map[int32]int64{}
		for _, e := range t.EndOffsets {
			ends[t.Topic][e.Partition] = e.EndOffset
		}
	}
	for _, inst := range instances {
		if !inst.IsDir() {
			continue
		}
		infos, err := pebble.Inspect(filepath.Join(base, inst.Name()))
		if err != nil {
			return nil, fmt.Errorf("%w — check --state-dir", err)
		}
		for _, info := range infos {
			s := storeStateJSON{Instance: inst.Name(), Store: info.Name, Topic: info.Task.Topic, Partition: info.Task.Partition, Dir: info.Dir,
				Changelog: topology.ChangelogTopic(d.cfg.AppID, info.Name), Applied: info.Offset, ChangelogEnd: -1, BehindRecords: -1, BehindOffsets: -1}
			end, ok := ends[s.Changelog][s.Partition]
			if ok {
				s.ChangelogEnd = end
			}
			switch {
			case errors.Is(info.Err, state.ErrInUse):
				s.Restore, s.Applied = restoreInUse, -1
				s.Detail = "a running instance has it open; its progress is the committed offset of its task"
			case info.Err != nil:
				s.Restore, s.Applied = restoreUnknown, -1
				s.Detail = fmt.Sprintf("cannot read its applied offset: %v", info.Err)
			case !ok:
				s.Restore = restoreNoChangelog
				s.Detail = fmt.Sprintf("%s has no partition %d", s.Changelog, s.Partition)
				if s.Applied >= 0 {
					s.Detail += fmt.Sprintf(": the runtime would create it empty and refuse this store, which applied offset %d; delete %s to start the store afresh", s.Applied, s.Dir)
				}
			case end < 0:
				s.Restore = restoreUnknown
				s.Detail = "the changelog's end offset could not be read"
			case s.Applied+1 > end:
				s.Restore = restoreAhead
				s.Detail = fmt.Sprintf("applied offset %d, but %s/%d ends at %d: the changelog was deleted or truncated, and the runtime refuses the store; delete %s to restore it in full",
					s.Applied, s.Changelog, s.Partition, end, s.Dir)
			case s.Applied+1 == end:
				s.Restore, s.BehindRecords, s.BehindOffsets = restoreDone, 0, 0
			default:
				s.Restore, s.BehindOffsets = restoreBehind, end-(s.Applied+1)
			}
			out = append(out, s)
		}
	}
	d.countBehind(out)
	return out, nil
}

// countBehind counts, for stores that are behind, the committed records
// between their applied offset and the changelog's last stable offset, by
// reading that span read_committed: the offsets in between may be only a
// commit marker (a store's offset is its last record's, the marker comes
// after it) or aborted records, which a restore skips. A store with none
// is restored.
func (d *appDescriber) countBehind(stores []storeStateJSON) {
	type key struct {
		topic     string
		partition int32
	}
	var topics []string
	byPart := map[key][]int{}
	for i, s := range stores {
		if s.Restore == restoreBehind && s.BehindOffsets <= maxCountedOffsets {
			k := key{s.Changelog, s.Partition}
			if len(byPart[k]) == 0 && !slices.Contains(topics, s.Changelog) {
				topics = append(topics, s.Changelog)
			}
			byPart[k] = append(byPart[k], i)
		}
	}
	if len(byPart) == 0 {
		return
	}
	lso, err := d.adm.ListCommittedOffsets(d.ctx, topics...)
	if err != nil {
		return // uncounted: the offsets still say how far behind
	}
	spans := map[string]map[int32]*countSpan{}
	for k, idx := range byPart {
		l, ok := lso.Lookup(k.topic, k.partition)
		if !ok || l.Err != nil {
			continue
		}
		// Stores of one task in several instances' directories start
		// at different offsets: count from the earliest, per store.
		from := stores[idx[0]].Applied + 1
		for _, i := range idx {
			from = min(from, stores[i].Applied+1)
		}
		if spans[k.topic] == nil {
			spans[k.topic] = map[int32]*countSpan{}
		}
		spans[k.topic][k.partition] = &countSpan{from: from, to: l.Offset}
	}
	d.countCommitted(spans)
	for k, idx := range byPart {
		sp := spans[k.topic][k.partition]
		if sp == nil || !sp.done {
			continue
		}
		for _, i := range idx {
			s := &stores[i]
			s.BehindRecords = sp.recordsFrom(s.Applied + 1)
			switch {
			case sp.to < s.ChangelogEnd && s.BehindRecords == 0:
				s.Detail = fmt.Sprintf("a transaction is open on %s/%d; a restore waits for it", s.Changelog, s.Partition)
			case sp.to < s.ChangelogEnd:
				s.Detail = fmt.Sprintf("counted up to the last stable offset %d; a transaction is open after it", sp.to)
			case s.BehindRecords == 0:
				// A store's offset is its batch's last record; the
				// commit marker follows it, which a restore skips.
				s.Restore = restoreDone
				if s.BehindOffsets > 1 {
					s.Detail = fmt.Sprintf("the %d offsets after it are transaction markers or aborted records", s.BehindOffsets)
				}
			}
		}
	}
}

// countSpan is one changelog partition read by countCommitted: the
// offsets of the committed records in [from, to).
type countSpan struct {
	from, to int64
	records  []int64
	done     bool
}

// recordsFrom is how many committed records the span holds at or after
// offset.
func (c *countSpan) recordsFrom(offset int64) int64 {
	n := int64(0)
	for _, o := range c.records {
		if o >= offset {
			n++
		}
	}
	return n
}

// countCommitted reads each span read_committed until its end, or until
// the command's time is up or reading stops making progress; spans not
// read to their end stay not done.
func (d *appDescriber) countCommitted(spans map[string]map[int32]*countSpan) {
	consume := map[string]map[int32]kgo.Offset{}
	left := 0
	for topic, ps := range spans {
		for p, sp := range ps {
			if sp.from >= sp.to {
				sp.done = true
				continue
			}
			if consume[topic] == nil {
				consume[topic] = map[int32]kgo.Offset{}
			}
			consume[topic][p] = kgo.NewOffset().At(sp.from)
			left++
		}
	}
	if left == 0 {
		return
	}
	opts, err := d.cfg.KgoOpts()
	if err != nil {
		return
	}
	opts = append(opts, kgo.ConsumePartitions(consume), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.KeepControlRecords(), // the end is often a marker: its offset tells a span is read
		kgo.ConsumeResetOffset(kgo.NoResetOffset()))
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return
	}
	defer cl.Close()
	idle := 0
	for left > 0 && d.ctx.Err() == nil && idle < 3 {
		pctx, cancel := context.WithTimeout(d.ctx, time.Second)
		fs := cl.PollFetches(pctx)
		cancel()
		progressed := false
		fs.EachPartition(func(p kgo.FetchTopicPartition) {
			sp := spans[p.Topic][p.Partition]
			if sp == nil || sp.done {
				return
			}
			for _, r := range p.Records {
				if r.Offset >= sp.to {
					break
				}
				progressed = true
				if !r.Attrs.IsControl() {
					sp.records = append(sp.records, r.Offset)
				}
				if r.Offset+1 >= sp.to {
					sp.done = true
					left--
					break
				}
			}
		})
		if progressed {
			idle = 0
		} else {
			idle++
		}
	}
}

// storesTable is the text form of the stores.
func storesTable(stores []storeStateJSON) *table {
	t := newTable("INSTANCE", "STORE", "TASK", "APPLIED", "CHANGELOG END", "RESTORE", "DETAIL")
	for _, s := range stores {
		restore := s.Restore
		if s.Restore == restoreBehind {
			switch {
			case s.BehindRecords == 0:
				restore = "behind (open transaction)"
			case s.BehindRecords > 0:
				restore = fmt.Sprintf("behind by %d record(s)", s.BehindRecords)
			default:
				restore = fmt.Sprintf("behind by %d offset(s)", s.BehindOffsets)
			}
		}
		t.add(s.Instance, s.Store, fmt.Sprintf("%s-%d", s.Topic, s.Partition), offsetCell(s.Applied), offsetCell(s.ChangelogEnd), restore, orDash(s.Detail))
	}
	return t
}
