// Package pebble is the on-disk state engine: each store is a pebble
// database under the state directory, so a reassigned task restores only
// what its changelog gained since the offset the database last applied.
// It lives apart from package state so that a pipeline whose stores are
// all state.Memory does not link pebble.
package pebble

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	pebbledb "github.com/cockroachdb/pebble/v2"
	"github.com/cockroachdb/pebble/v2/vfs"

	"github.com/eosflow/eosflow/state"
)

// Option configures the engine New returns.
type Option interface{ apply(*engine) }

type optionFunc func(*engine)

func (f optionFunc) apply(e *engine) { f(e) }

// CacheSize sets each store's block cache to n bytes, overriding pebble's
// default 8 MiB. A task's stores each have their own cache, so the memory
// it takes grows with the number of assigned partitions.
func CacheSize(n int64) Option {
	return optionFunc(func(e *engine) { e.cacheSize = n })
}

// MemTableSize sets each store's memtable to n bytes, overriding pebble's
// default 4 MiB. Writes since the last memtable flush are what a crash
// loses and a restore reads again from the changelog (see New).
func MemTableSize(n uint64) Option {
	return optionFunc(func(e *engine) { e.memTableSize = n })
}

// FS keeps the stores' files on fs, overriding the operating system's
// (vfs.Default). With vfs.NewCrashableMem a test can take the image a
// crash would leave (CrashClone: unsynced writes dropped) and open the
// stores from it, as a process killed mid-write would.
func FS(fs vfs.FS) Option {
	return optionFunc(func(e *engine) { e.fs = fs })
}

type engine struct {
	cacheSize    int64
	memTableSize uint64
	fs           vfs.FS // nil: the OS
}

// New returns the pebble engine. It keeps each store in its own pebble
// database, in the directory state.StoreDir names
// (<dir>/<topic>-<partition>/<store> under the state directory), so a
// reassigned task restores only what its changelog gained since the offset
// the database last applied.
//
// The offset lives in the database, in the same batch as the data it
// belongs to, with the offsets of the batches not yet read back as
// committed (see state.Position), and pebble applies a batch atomically,
// so data and position never disagree. The write-ahead log is disabled:
// the changelog, not the database, is the source of truth. A crash loses
// at most the writes since the last memtable flush, data and offset
// together, and the restore reads them again from the changelog; in
// exchange no Commit writes a log, let alone syncs one. Close flushes, so
// a clean shutdown loses nothing.
//
// The engine is a state.Persistent, so Inspect can list its stores.
func New(opts ...Option) state.Engine {
	e := &engine{}
	for _, o := range opts {
		o.apply(e)
	}
	return e
}

func (e *engine) String() string { return "pebble" }

func (e *engine) Open(dir, name string, task state.Task) (state.Backend, error) {
	if dir == "" {
		return nil, fmt.Errorf("%w: the pebble engine needs a state directory", state.ErrInvalid)
	}
	opts := &pebbledb.Options{
		DisableWAL:   true, // see New
		CacheSize:    e.cacheSize,
		MemTableSize: e.memTableSize,
		FS:           e.fs,
		Logger:       quiet{},
	}
	db, err := pebbledb.Open(state.StoreDir(dir, name, task), opts)
	if err != nil {
		return nil, err
	}
	return &backend{db: db}, nil
}

// quiet drops pebble's informational log lines (one per flush and
// compaction); its error reports still go to pebble's default logger.
type quiet struct{}

func (quiet) Infof(string, ...any)              {}
func (quiet) Errorf(format string, args ...any) { pebbledb.DefaultLogger.Errorf(format, args...) }
func (quiet) Fatalf(format string, args ...any) { pebbledb.DefaultLogger.Fatalf(format, args...) }

// Keys are namespaced so the offset cannot collide with a user's key.
const (
	dataPrefix = 'd'
	metaPrefix = 'm'
)

var (
	offsetKey = []byte{metaPrefix, 'o', 'f', 'f', 's', 'e', 't'}
	// timeKey holds the wall-clock time of the last Apply, in Unix
	// milliseconds: how long the store went without catching up.
	timeKey = []byte{metaPrefix, 't', 'i', 'm', 'e'}
	// checkKey holds the offset read back as committed, then the last
	// offset of each batch applied since (see Position).
	checkKey = []byte{metaPrefix, 'c', 'h', 'e', 'c', 'k'}
)

type backend struct{ db *pebbledb.DB }

func dataKey(buf, key []byte) []byte { return append(append(buf[:0], dataPrefix), key...) }

func (p *backend) Get(key []byte) ([]byte, bool, error) {
	var buf [64]byte
	v, closer, err := p.db.Get(dataKey(buf[:], key))
	if errors.Is(err, pebbledb.ErrNotFound) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	defer closer.Close()
	return append([]byte{}, v...), true, nil
}

func (p *backend) Range(start, end []byte, fn func(key, value []byte) bool) error {
	o := &pebbledb.IterOptions{LowerBound: dataKey(nil, start), UpperBound: []byte{dataPrefix + 1}}
	if end != nil {
		o.UpperBound = dataKey(nil, end)
	}
	it, err := p.db.NewIter(o)
	if err != nil {
		return err
	}
	for ok := it.First(); ok; ok = it.Next() {
		v, err := it.ValueAndErr()
		if err != nil {
			return errors.Join(err, it.Close())
		}
		if !fn(it.Key()[1:], v) {
			break
		}
	}
	return it.Close()
}

// Position reads the applied offset and what of it is checked. A store
// written before the check was kept has only its offset: its last record
// is read back, as it was then.
func (p *backend) Position() (state.Position, error) {
	off, err := p.offset()
	if err != nil || off == state.NoOffset {
		return state.Position{Offset: state.NoOffset, Checked: state.NoOffset}, err
	}
	v, closer, err := p.db.Get(checkKey)
	if errors.Is(err, pebbledb.ErrNotFound) {
		return state.Position{Offset: off, Checked: off - 1, Unchecked: []int64{off}}, nil
	}
	if err != nil {
		return state.Position{}, err
	}
	defer closer.Close()
	if len(v) < 8 || len(v)%8 != 0 {
		return state.Position{}, fmt.Errorf("stored changelog check has %d bytes, want a multiple of 8: the directory holds something else", len(v))
	}
	at := state.Position{Offset: off, Checked: int64(binary.BigEndian.Uint64(v))}
	for v = v[8:]; len(v) > 0; v = v[8:] {
		at.Unchecked = append(at.Unchecked, int64(binary.BigEndian.Uint64(v)))
	}
	return at, nil
}

func (p *backend) offset() (int64, error) {
	v, closer, err := p.db.Get(offsetKey)
	if errors.Is(err, pebbledb.ErrNotFound) {
		return state.NoOffset, nil
	}
	if err != nil {
		return 0, err
	}
	defer closer.Close()
	if len(v) != 8 {
		return 0, fmt.Errorf("stored changelog offset has %d bytes, want 8: the directory holds something else", len(v))
	}
	return int64(binary.BigEndian.Uint64(v)), nil
}

// Apply writes the data, the offset, the check and the time in one batch.
func (p *backend) Apply(writes []state.Write, at state.Position) error {
	b := p.db.NewBatch()
	defer b.Close()
	var buf []byte
	for _, w := range writes {
		buf = dataKey(buf, w.Key)
		var err error
		if w.Value == nil {
			err = b.Delete(buf, nil)
		} else {
			err = b.Set(buf, w.Value, nil)
		}
		if err != nil {
			return err
		}
	}
	if err := b.Set(offsetKey, binary.BigEndian.AppendUint64(nil, uint64(at.Offset)), nil); err != nil {
		return err
	}
	check := binary.BigEndian.AppendUint64(make([]byte, 0, 8*(1+len(at.Unchecked))), uint64(at.Checked))
	for _, o := range at.Unchecked {
		check = binary.BigEndian.AppendUint64(check, uint64(o))
	}
	if err := b.Set(checkKey, check, nil); err != nil {
		return err
	}
	if err := b.Set(timeKey, binary.BigEndian.AppendUint64(nil, uint64(time.Now().UnixMilli())), nil); err != nil {
		return err
	}
	return b.Commit(pebbledb.NoSync) // no WAL to sync: see New
}

// AppliedAt implements state.Dated.
func (p *backend) AppliedAt() (time.Time, error) {
	v, closer, err := p.db.Get(timeKey)
	if errors.Is(err, pebbledb.ErrNotFound) {
		return time.Time{}, nil
	}
	if err != nil {
		return time.Time{}, err
	}
	defer closer.Close()
	if len(v) != 8 {
		return time.Time{}, fmt.Errorf("stored apply time has %d bytes, want 8: the directory holds something else", len(v))
	}
	return time.UnixMilli(int64(binary.BigEndian.Uint64(v))), nil
}

// Wipe implements state.Wiper: every data key, the offset, the check and
// the time go in one batch. A crash before the next flush brings the old
// store back, whole, and the runtime wipes it again.
func (p *backend) Wipe() error {
	b := p.db.NewBatch()
	defer b.Close()
	if err := b.DeleteRange([]byte{dataPrefix}, []byte{dataPrefix + 1}, nil); err != nil {
		return err
	}
	if err := b.Delete(offsetKey, nil); err != nil {
		return err
	}
	if err := b.Delete(timeKey, nil); err != nil {
		return err
	}
	if err := b.Delete(checkKey, nil); err != nil {
		return err
	}
	return b.Commit(pebbledb.NoSync)
}

// SizeBytes implements state.Sized: the store's files on disk plus its
// memtables (compressed data, obsolete files awaiting deletion included).
func (p *backend) SizeBytes() (int64, error) {
	m := p.db.Metrics()
	return int64(m.DiskSpaceUsage() + m.MemTable.Size), nil
}

func (p *backend) Close() error {
	return errors.Join(p.db.Flush(), p.db.Close())
}
