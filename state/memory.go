package state

import (
	"bytes"
	"slices"
	"sync"

	"github.com/google/btree"
)

type memoryEngine struct{}

// Memory keeps each store in an ordered in-memory tree. Nothing survives
// Close, so every assignment restores the whole changelog partition: the
// right engine for small state, tests, and pipelines that restart rarely.
func Memory() Engine { return memoryEngine{} }

func (memoryEngine) String() string { return "memory" }

func (memoryEngine) Open(string, string, Task) (Backend, error) {
	return &memoryBackend{tree: btree.NewG(32, lessWrite), at: Position{Offset: NoOffset, Checked: NoOffset}}, nil
}

// memoryBackend applies a write under one lock, so readers see all of it
// or none of it. Range iterates a copy-on-write clone of the tree, so a
// slow reader neither blocks Apply nor sees half of one.
type memoryBackend struct {
	mu    sync.RWMutex
	tree  *btree.BTreeG[Write]
	at    Position
	bytes int64 // keys and values held
}

func writeBytes(w Write) int64 { return int64(len(w.Key) + len(w.Value)) }

func (m *memoryBackend) Get(key []byte) ([]byte, bool, error) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	w, ok := m.tree.Get(Write{Key: key})
	if !ok {
		return nil, false, nil
	}
	return bytes.Clone(w.Value), true, nil
}

func (m *memoryBackend) Range(start, end []byte, fn func(key, value []byte) bool) error {
	m.mu.Lock() // Clone writes to the tree's copy-on-write bookkeeping
	t := m.tree.Clone()
	m.mu.Unlock()
	visit := func(w Write) bool { return fn(w.Key, w.Value) }
	if end == nil {
		t.AscendGreaterOrEqual(Write{Key: start}, visit)
	} else {
		t.AscendRange(Write{Key: start}, Write{Key: end}, visit)
	}
	return nil
}

func (m *memoryBackend) Position() (Position, error) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	at := m.at
	at.Unchecked = slices.Clone(at.Unchecked)
	return at, nil
}

func (m *memoryBackend) Apply(writes []Write, at Position) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, w := range writes {
		if w.Value == nil {
			if old, ok := m.tree.Delete(w); ok {
				m.bytes -= writeBytes(old)
			}
			continue
		}
		nw := Write{Key: bytes.Clone(w.Key), Value: bytes.Clone(w.Value)}
		if old, ok := m.tree.ReplaceOrInsert(nw); ok {
			m.bytes -= writeBytes(old)
		}
		m.bytes += writeBytes(nw)
	}
	m.at = at
	m.at.Unchecked = slices.Clone(at.Unchecked)
	return nil
}

// Wipe empties the tree; nothing of it outlives the process anyway.
func (m *memoryBackend) Wipe() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.tree.Clear(false)
	m.at, m.bytes = Position{Offset: NoOffset, Checked: NoOffset}, 0
	return nil
}

// SizeBytes implements Sized: the keys and values in the tree.
func (m *memoryBackend) SizeBytes() (int64, error) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.bytes, nil
}

func (m *memoryBackend) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.tree.Clear(false)
	m.bytes = 0
	return nil
}

func lessWrite(a, b Write) bool { return bytes.Compare(a.Key, b.Key) < 0 }
