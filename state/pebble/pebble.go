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
	"sync/atomic"
	"syscall"
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

// FlushInterval bounds in time what a crash loses, as MemTableSize bounds
// it in bytes: a write at least d after the store's last flush starts a
// flush in the background, so a store restarted on the same disk after a
// SIGKILL restores from its changelog only the writes since the last
// flush before its last write (those of about d, or of the memtables
// waiting for a flush), however slowly they came. The default is
// DefaultFlushInterval; d <= 0 flushes only full memtables, and a store
// that is never filled then restores from its last restore's end after
// every crash. Each timed flush writes one small file, which compactions
// merge.
func FlushInterval(d time.Duration) Option {
	return optionFunc(func(e *engine) { e.flushEvery = d })
}

// DefaultFlushInterval is FlushInterval's default.
const DefaultFlushInterval = 10 * time.Second

// FS keeps the stores' files on fs, overriding the operating system's
// (vfs.Default). With vfs.NewCrashableMem a test can take the image a
// crash would leave (CrashClone: unsynced writes dropped) and open the
// stores from it, as a process killed mid-write would.
func FS(fs vfs.FS) Option {
	return optionFunc(func(e *engine) { e.fs = fs })
}

// MinFreeSpace makes a store refuse writes, with a *state.DiskFullError,
// while the state directory's volume has less than n bytes free beyond
// what its unflushed memtables and the write need, overriding the default
// 16 MiB. The margin keeps pebble's flushes and compactions from running
// into ENOSPC, which pebble retries without end (a Flush never returns) or
// treats as fatal (a MANIFEST write ends the process).
func MinFreeSpace(n uint64) Option {
	return optionFunc(func(e *engine) { e.minFree = n })
}

type engine struct {
	cacheSize    int64
	memTableSize uint64
	minFree      uint64
	flushEvery   time.Duration
	fs           vfs.FS // nil: the OS
}

// defaultMinFree is MinFreeSpace's default.
const defaultMinFree = 16 << 20

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
// at most the writes since the last flush (see MemTableSize and
// FlushInterval), data and offset together, and the restore reads them
// again from the changelog; in
// exchange no Commit writes a log, let alone syncs one. The end of a
// restore starts a flush (state.Flusher), so a crash soon after reads
// only what came later. Close flushes, so a clean shutdown loses nothing.
//
// The engine is a state.Persistent, so Inspect can list its stores.
func New(opts ...Option) state.Engine {
	e := &engine{minFree: defaultMinFree, flushEvery: DefaultFlushInterval}
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
	fs := e.fs
	if fs == nil {
		fs = vfs.Default
	}
	p := &backend{fs: fs, dir: state.StoreDir(dir, name, task), minFree: e.minFree, flushEvery: e.flushEvery, flushed: time.Now()}
	// Opening writes a MANIFEST, whose failure pebble treats as fatal.
	if err := p.room(0); err != nil {
		return nil, err
	}
	opts := &pebbledb.Options{
		DisableWAL:   true, // see New
		CacheSize:    e.cacheSize,
		MemTableSize: e.memTableSize,
		FS:           fs,
		Logger:       quiet{},
		// See maxQueued.
		MemTableStopWritesThreshold: stopWrites,
		EventListener:               p.listener(),
	}
	opts.EnsureDefaults()
	p.memTableSize = opts.MemTableSize
	db, err := pebbledb.Open(p.dir, opts)
	if err != nil {
		return nil, p.full(err)
	}
	p.db = db
	return p, nil
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

type backend struct {
	db      *pebbledb.DB
	fs      vfs.FS
	dir     string
	minFree uint64
	// memTableSize is the effective memtable size: what the queued
	// memtables are measured against (see stopWrites).
	memTableSize uint64
	// failed is the last background write that failed with ENOSPC, until
	// a flush succeeds: pebble retries it, and writes would pile up.
	failed atomic.Pointer[error]
	// flushEvery is FlushInterval; flushed is when the last flush Apply
	// or Flush started began (the store's lock serializes them).
	flushEvery time.Duration
	flushed    time.Time
}

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
	size := uint64(0)
	for _, w := range writes {
		size += uint64(len(w.Key) + len(w.Value))
	}
	if err := p.waitRoom(size); err != nil {
		return err
	}
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
	if err := p.full(b.Commit(pebbledb.NoSync)); err != nil { // no WAL to sync: see New
		return err
	}
	p.flushIfDue()
	return nil
}

// flushIfDue starts a flush once flushEvery has passed since the last
// one began.
func (p *backend) flushIfDue() {
	if p.flushEvery <= 0 || time.Since(p.flushed) < p.flushEvery {
		return
	}
	// An error means the database is read-only: nothing to keep.
	_ = p.Flush()
}

// Flush implements state.Flusher: it starts a flush of the memtables and
// returns. It leaves a flush that failed for want of space to pebble,
// which retries it; the next write is refused meanwhile (room). While
// waitAt memtables' worth wait for a flush already, it starts none:
// pebble's AsyncFlush would stall, without a bound, until they shrink,
// which on a filling disk they never do.
func (p *backend) Flush() error {
	if _, unflushed := p.memtables(); p.failed.Load() != nil || unflushed >= waitAt*p.memTableSize {
		return nil
	}
	p.flushed = time.Now()
	_, err := p.db.AsyncFlush()
	return err
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

// Close flushes the memtables, unless the disk has no room for them: a
// flush that fails with ENOSPC is retried until it succeeds, and pebble's
// Flush waits for it. Unflushed writes are lost, data and offset together,
// and the next restore reads them again from the changelog.
func (p *backend) Close() error {
	if err := p.room(0); err != nil {
		return errors.Join(p.db.Close(), err)
	}
	done, err := p.db.AsyncFlush()
	if err != nil {
		return errors.Join(err, p.db.Close())
	}
	deadline := time.Now().Add(flushWait)
	for {
		select {
		case <-done:
			return p.db.Close()
		case <-time.After(5 * time.Millisecond):
		}
		if err := p.room(0); err != nil || time.Now().After(deadline) {
			if err == nil {
				err = fmt.Errorf("pebble: %s: the flush at close took over %s; closed without it", p.dir, flushWait)
			}
			return errors.Join(p.db.Close(), err)
		}
	}
}

// pebble stalls a write, without a bound, once its queued memtables
// (the mutable one included) hold stopWrites memtable sizes: while a flush
// fails for want of space, that write would never return. Apply waits
// instead, up to flushWait, while they hold waitAt sizes: one Apply
// rotates the memtable at most once, so pebble's stall never begins.
const (
	stopWrites = 4
	waitAt     = stopWrites - 1
	// flushWait bounds how long Apply and Close wait for a flush.
	flushWait = 30 * time.Second
)

// waitRoom waits, up to flushWait, until the queued memtables hold less
// than waitAt memtable sizes, and returns room's error for a write of
// size bytes.
func (p *backend) waitRoom(size uint64) error {
	deadline := time.Now().Add(flushWait)
	for {
		if err := p.room(size); err != nil {
			return err
		}
		if _, unflushed := p.memtables(); unflushed < waitAt*p.memTableSize {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("pebble: %s: memtables waited over %s for a flush: the disk is slow or failing", p.dir, flushWait)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// memtables is the number of memtables, the mutable one included, and
// the bytes a flush of them would write.
func (p *backend) memtables() (queued int64, unflushed uint64) {
	if p.db == nil {
		return 0, 0
	}
	m := p.db.Metrics()
	return m.MemTable.Count, m.MemTable.Size
}

// room returns a *state.DiskFullError if a background write failed with
// ENOSPC since the last successful flush while memtables wait for one, or
// if the volume has less than minFree free beyond the unflushed memtables
// and a write of size bytes. A file system that cannot tell its free
// space is taken at its failed writes' word.
func (p *backend) room(size uint64) error {
	queued, unflushed := p.memtables()
	need := p.minFree + size + unflushed
	var failed error
	if e := p.failed.Load(); e != nil {
		failed = *e
	}
	u, err := p.fs.GetDiskUsage(p.existing())
	known := err == nil
	if failed != nil && (known && u.AvailBytes >= need || !known && queued < 2) {
		// Space is back, or nothing waits on the failed write (a
		// compaction's): pebble's next flush tells, and waitRoom keeps
		// a write from stalling meanwhile.
		failed = nil
	}
	if failed != nil || known && u.AvailBytes < need {
		return &state.DiskFullError{Dir: p.dir, Free: u.AvailBytes, Need: need, Err: failed}
	}
	return nil
}

// existing is the store's directory, or its nearest ancestor that exists
// (a new store's directory is made by Open).
func (p *backend) existing() string {
	d := p.dir
	if p.db != nil {
		return d
	}
	for {
		if _, err := p.fs.Stat(d); err == nil {
			return d
		}
		up := p.fs.PathDir(d)
		if up == d {
			return d
		}
		d = up
	}
}

// full turns an error that is ENOSPC into a *state.DiskFullError naming
// the directory.
func (p *backend) full(err error) error {
	if err == nil || !errors.Is(err, syscall.ENOSPC) {
		return err
	}
	df := &state.DiskFullError{Dir: p.dir, Need: p.minFree, Err: err}
	if u, uerr := p.fs.GetDiskUsage(p.existing()); uerr == nil {
		df.Free = u.AvailBytes
	}
	return df
}

// listener notes background writes that failed for want of space, and
// forgets them once a flush succeeds; pebble's own reports still go to
// its logger.
func (p *backend) listener() *pebbledb.EventListener {
	l := &pebbledb.EventListener{
		BackgroundError: func(err error) {
			if !errors.Is(err, syscall.ENOSPC) {
				pebbledb.DefaultLogger.Errorf("pebble: %s: background error: %v", p.dir, err)
				return
			}
			// pebble retries at once, without end: report the first.
			if p.failed.Swap(&err) == nil {
				pebbledb.DefaultLogger.Errorf("pebble: %s: background write failed, the disk is full; writes stop until a flush succeeds: %v", p.dir, err)
			}
		},
		FlushEnd: func(info pebbledb.FlushInfo) {
			if info.Err == nil {
				p.failed.Store(nil)
			}
		},
		CompactionEnd: func(info pebbledb.CompactionInfo) {
			if info.Err == nil {
				p.failed.Store(nil)
			}
		},
	}
	return l
}
