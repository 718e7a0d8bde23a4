package sim

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/eosflow/eosflow/internal/store"

	"github.com/cockroachdb/pebble/v2/vfs"
	"github.com/eosflow/eosflow/state"
	"github.com/eosflow/eosflow/state/pebble"
	"github.com/eosflow/eosflow/topology"
	"github.com/twmb/franz-go/pkg/kgo"
)

// auditStores fails a run in which a store applied a batch on End's word
// before reading back those an earlier incarnation applied so (see
// applyBackend), then checks every pebble store each member left on its disk,
// as it lies there after the run: a store whose applied batches all read
// back as committed from its changelog must hold exactly the fold of the
// committed changelog records up to its offset. A store that kept a
// batch whose changelog ended aborted, yet lists it as checked, does not.
// A store still listing a batch the changelog never committed is left
// alone: its next start rebuilds it.
func (s *sim) auditStores(ctx context.Context) error {
	s.mu.Lock()
	disks := maps.Clone(s.disks)
	trusts := slices.Clone(s.trusts)
	s.mu.Unlock()
	if len(trusts) > 0 {
		return as(KindAudit, errors.New(trusts[0]))
	}
	logs := map[string]*changelog{}
	for _, idx := range slices.Sorted(maps.Keys(disks)) {
		dir := filepath.Join(stateDir, appID, memberID(idx))
		for _, sl := range storesOn(disks[idx], dir) {
			cl := logs[sl.name]
			if cl == nil {
				recs, err := s.read(ctx, topology.ChangelogTopic(appID, sl.name), true)
				if err != nil {
					return as(KindSetup, fmt.Errorf("reading the changelog of %s: %w", sl.name, err))
				}
				cl = newChangelog(recs)
				logs[sl.name] = cl
			}
			if err := auditStore(disks[idx], dir, sl, cl); err != nil {
				return fmt.Errorf("member %d, store %s of %s: %w", idx, sl.name, sl.task, err)
			}
		}
	}
	return nil
}

// storeLoc is one store on a disk.
type storeLoc struct {
	name string
	task state.Task
}

// storesOn lists the stores under dir: <topic>-<partition>/<store>.
func storesOn(fs vfs.FS, dir string) []storeLoc {
	var out []storeLoc
	tasks, _ := fs.List(dir)
	for _, td := range tasks {
		i := strings.LastIndexByte(td, '-')
		if i < 0 {
			continue
		}
		p, err := strconv.ParseInt(td[i+1:], 10, 32)
		if err != nil {
			continue
		}
		names, _ := fs.List(filepath.Join(dir, td))
		for _, n := range names {
			out = append(out, storeLoc{name: n, task: state.Task{Topic: td[:i], Partition: int32(p)}})
		}
	}
	return out
}

// changelog is a store's committed changelog, per partition, by offset.
type changelog struct {
	parts map[int32][]*kgo.Record
}

// newChangelog indexes recs, read in offset order per partition. kfake
// never compacts within a run, so the fold of all of them is the store's.
func newChangelog(recs []*kgo.Record) *changelog {
	c := &changelog{parts: map[int32][]*kgo.Record{}}
	for _, r := range recs {
		c.parts[r.Partition] = append(c.parts[r.Partition], r)
	}
	return c
}

// committed reports whether partition p holds a committed record at
// offset o.
func (c *changelog) committed(p int32, o int64) bool {
	_, ok := slices.BinarySearchFunc(c.parts[p], o, func(r *kgo.Record, o int64) int { return int(r.Offset - o) })
	return ok
}

// fold is partition p's key → value up to offset (a nil value deletes).
func (c *changelog) fold(p int32, upTo int64) map[string]string {
	out := map[string]string{}
	for _, r := range c.parts[p] {
		if r.Offset > upTo {
			break
		}
		if r.Value == nil {
			delete(out, string(r.Key))
		} else {
			out[string(r.Key)] = string(r.Value)
		}
	}
	return out
}

// auditStore opens one store and compares it with its changelog's fold.
func auditStore(fs vfs.FS, dir string, sl storeLoc, cl *changelog) error {
	st, err := store.Open(pebble.New(pebble.FS(fs)), dir, sl.name, sl.task)
	if err != nil {
		return as(KindSetup, err)
	}
	defer st.Close()
	pos := st.Position()
	p := sl.task.Partition
	for _, u := range pos.Unchecked {
		if !cl.committed(p, u) {
			return nil // its next start rebuilds it
		}
	}
	want := cl.fold(p, pos.Offset)
	got := map[string]string{}
	for e, err := range st.Range(nil, nil) {
		if err != nil {
			return as(KindSetup, err)
		}
		got[string(e.Key)] = string(e.Value)
	}
	for _, k := range slices.Sorted(maps.Keys(got)) {
		v := got[k]
		if w, ok := want[k]; !ok || w != v {
			return as(KindAudit, fmt.Errorf("at offset %d (checked %d) key %q holds %q, but the committed changelog holds %q (present %v)", pos.Offset, pos.Checked, k, v, w, ok))
		}
	}
	if len(got) != len(want) {
		return as(KindAudit, fmt.Errorf("at offset %d (checked %d) it holds %d keys, the committed changelog %d", pos.Offset, pos.Checked, len(got), len(want)))
	}
	return nil
}
