package store

import (
	"sync"

	"github.com/eosflow/eosflow/state"
)

// What the external tests (package store_test) need of the package's
// internals; they are external so that they can import state/pebble.

// CommittedGet reads key from s's engine alone, without the overlay.
func CommittedGet(s *Store, key []byte) ([]byte, bool, error) { return s.b.Get(key) }

// CommittedRange ranges over s's engine alone, without the overlay.
func CommittedRange(s *Store, start, end []byte, fn func(key, value []byte) bool) error {
	return s.b.Range(start, end, fn)
}

// NewKept returns a Memory engine whose backends outlive Close, as a
// persistent engine's do, so the reopen cases run without a store on disk.
func NewKept() state.Engine { return &keptEngine{stores: map[string]state.Backend{}} }

type keptEngine struct {
	mu     sync.Mutex
	stores map[string]state.Backend
}

func (k *keptEngine) String() string { return "kept" }

func (k *keptEngine) Open(dir, name string, task state.Task) (state.Backend, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	path := state.StoreDir(dir, name, task)
	if _, ok := k.stores[path]; !ok {
		b, err := state.Memory().Open(dir, name, task)
		if err != nil {
			return nil, err
		}
		k.stores[path] = b
	}
	return keptBackend{k.stores[path]}, nil
}

// keptBackend's Close keeps the data for the next Open; Wipe and SizeBytes
// pass to the memory backend.
type keptBackend struct{ state.Backend }

func (keptBackend) Close() error { return nil }

func (k keptBackend) Wipe() error { return k.Backend.(state.Wiper).Wipe() }

func (k keptBackend) SizeBytes() (int64, error) { return k.Backend.(state.Sized).SizeBytes() }
