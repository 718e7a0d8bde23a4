package dedup

import (
	"container/heap"
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/eosflow/eosflow/dedup/internal/check"
)

// DefaultMaxEntries bounds a Memory store when no MaxEntries option is given:
// about 100 MB for 36-byte ids.
const DefaultMaxEntries = 1_000_000

// MemoryOption configures NewMemory.
type MemoryOption interface{ applyMemory(*memoryConfig) }

type memoryConfig struct {
	maxEntries int
	now        func() time.Time
}

type memoryOptionFunc func(*memoryConfig)

func (f memoryOptionFunc) applyMemory(c *memoryConfig) { f(c) }

// MaxEntries bounds how many live ids a Memory store keeps, overriding
// DefaultMaxEntries (1,000,000). When it is full a new id evicts the id that
// expires soonest, which the article calls premature eviction: a redelivery
// of the evicted id looks new and its effect repeats. Size it with `eosctl
// dedup size` (rate × retention) and watch Evictions.
func MaxEntries(n int) MemoryOption {
	return memoryOptionFunc(func(c *memoryConfig) { c.maxEntries = n })
}

// Clock replaces time.Now in a Memory store, for tests that move time by
// hand instead of sleeping.
func Clock(now func() time.Time) MemoryOption {
	return memoryOptionFunc(func(c *memoryConfig) { c.now = now })
}

// Memory is a Store in this process's memory, bounded by MaxEntries, for
// tests and single-instance pipelines. What it risks: everything is forgotten
// when the process exits, so redeliveries after a restart repeat their
// effects, and a second instance has a store of its own. Use a store of
// redisdedup or pgdedup when more than one process consumes the topic.
type Memory struct {
	mu        sync.Mutex
	cfg       memoryConfig
	ids       map[string]*memEntry
	byExpiry  expiryHeap
	evictions uint64
}

type memEntry struct {
	id      string
	expires time.Time
	index   int // in byExpiry
	// owner holds a pending mark until lease (Claim); empty once done.
	owner string
	lease time.Time
}

// NewMemory returns an empty Memory store.
func NewMemory(opts ...MemoryOption) (*Memory, error) {
	cfg := memoryConfig{maxEntries: DefaultMaxEntries, now: time.Now}
	for _, o := range opts {
		o.applyMemory(&cfg)
	}
	if cfg.maxEntries < 1 {
		return nil, fmt.Errorf("%w: MaxEntries(%d): a store must hold at least one id", ErrInvalid, cfg.maxEntries)
	}
	if cfg.now == nil {
		return nil, fmt.Errorf("%w: Clock(nil): pass a function such as time.Now", ErrInvalid)
	}
	return &Memory{cfg: cfg, ids: make(map[string]*memEntry)}, nil
}

// Mark records id for ttl; see Store. Expired ids are dropped as it goes, so
// the map holds at most MaxEntries live ids.
func (m *Memory) Mark(_ context.Context, id string, ttl time.Duration) (bool, error) {
	if err := check.Mark(id, ttl); err != nil {
		return false, err
	}
	now := m.cfg.now()
	m.mu.Lock()
	defer m.mu.Unlock()
	m.expire(now)
	if _, ok := m.ids[id]; ok {
		return false, nil
	}
	m.add(id, now, ttl)
	return true, nil
}

// Seen reports whether id is remembered and not expired.
func (m *Memory) Seen(_ context.Context, id string) (bool, error) {
	if err := check.ID(id); err != nil {
		return false, err
	}
	now := m.cfg.now()
	m.mu.Lock()
	defer m.mu.Unlock()
	e, ok := m.ids[id]
	return ok && now.Before(e.expires), nil
}

// Forget removes id.
func (m *Memory) Forget(_ context.Context, id string) error {
	if err := check.ID(id); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if e, ok := m.ids[id]; ok {
		m.remove(e)
	}
	return nil
}

// Claim marks id pending for owner; see Leaser.
func (m *Memory) Claim(_ context.Context, id, owner string, lease, ttl time.Duration) (Claim, error) {
	if err := check.Claim(id, owner, lease, ttl); err != nil {
		return Claim{}, err
	}
	now := m.cfg.now()
	m.mu.Lock()
	defer m.mu.Unlock()
	m.expire(now)
	e, ok := m.ids[id]
	switch {
	case !ok:
		e = m.add(id, now, ttl)
	case e.owner == "":
		return Claim{State: Done}, nil
	case e.owner != owner && now.Before(e.lease):
		return Claim{State: Pending, Owner: e.owner, Left: e.lease.Sub(now)}, nil
	default: // its own, or an expired lease: renew or take over
		m.extend(e, now, ttl)
	}
	e.owner, e.lease = owner, now.Add(time.Duration(check.Millis(lease))*time.Millisecond)
	return Claim{State: Claimed}, nil
}

// Complete marks id done; see Leaser.
func (m *Memory) Complete(_ context.Context, id string, ttl time.Duration) error {
	if err := check.Mark(id, ttl); err != nil {
		return err
	}
	now := m.cfg.now()
	m.mu.Lock()
	defer m.mu.Unlock()
	m.expire(now)
	e, ok := m.ids[id]
	if !ok {
		e = m.add(id, now, ttl)
	} else {
		m.extend(e, now, ttl)
	}
	e.owner = ""
	return nil
}

// Release removes id if it is pending for owner; see Leaser.
func (m *Memory) Release(_ context.Context, id, owner string) error {
	if err := check.ID(id); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if e, ok := m.ids[id]; ok && e.owner != "" && e.owner == owner {
		m.remove(e)
	}
	return nil
}

// add inserts id, live for ttl from now, evicting the entry that expires
// soonest when the store is full.
func (m *Memory) add(id string, now time.Time, ttl time.Duration) *memEntry {
	if len(m.ids) >= m.cfg.maxEntries {
		m.remove(m.byExpiry[0])
		m.evictions++
	}
	e := &memEntry{id: id, expires: now.Add(time.Duration(check.Millis(ttl)) * time.Millisecond)}
	m.ids[id] = e
	heap.Push(&m.byExpiry, e)
	return e
}

// extend makes e live for ttl from now.
func (m *Memory) extend(e *memEntry, now time.Time, ttl time.Duration) {
	e.expires = now.Add(time.Duration(check.Millis(ttl)) * time.Millisecond)
	heap.Fix(&m.byExpiry, e.index)
}

// Len is the number of ids held, expired ones not yet dropped included.
func (m *Memory) Len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.ids)
}

// Evictions counts live ids dropped because the store was full: each one
// is a message whose redelivery would repeat its effect. Non-zero means
// MaxEntries is too small for the rate and retention.
func (m *Memory) Evictions() uint64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.evictions
}

// expire drops every id whose expiry is not after now.
func (m *Memory) expire(now time.Time) {
	for len(m.byExpiry) > 0 && !now.Before(m.byExpiry[0].expires) {
		m.remove(m.byExpiry[0])
	}
}

func (m *Memory) remove(e *memEntry) {
	heap.Remove(&m.byExpiry, e.index)
	delete(m.ids, e.id)
}

// expiryHeap orders entries by expiry, soonest first.
type expiryHeap []*memEntry

func (h expiryHeap) Len() int           { return len(h) }
func (h expiryHeap) Less(i, j int) bool { return h[i].expires.Before(h[j].expires) }
func (h expiryHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index, h[j].index = i, j
}
func (h *expiryHeap) Push(x any) {
	e := x.(*memEntry)
	e.index = len(*h)
	*h = append(*h, e)
}
func (h *expiryHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	return e
}
