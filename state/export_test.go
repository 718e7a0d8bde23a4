package state

import "sync"

// What the external tests (package state_test) need of the package's
// internals; they are external so that they can import state/pebble.

// CommittedGet reads key from s's engine alone, without the overlay.
func CommittedGet(s *Store, key []byte) ([]byte, bool, error) { return s.b.Get(key) }

// CommittedRange ranges over s's engine alone, without the overlay.
func CommittedRange(s *Store, start, end []byte, fn func(key, value []byte) bool) error {
	return s.b.Range(start, end, fn)
}

// NewKept returns a Memory engine whose backends outlive Close, as a
// persistent engine's do, so the reopen cases run without a store on disk.
func NewKept() Engine { return &keptEngine{stores: map[string]*memoryBackend{}} }

type keptEngine struct {
	mu     sync.Mutex
	stores map[string]*memoryBackend
}

func (k *keptEngine) String() string { return "kept" }

func (k *keptEngine) Open(dir, name string, task Task) (Backend, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	path := StoreDir(dir, name, task)
	if _, ok := k.stores[path]; !ok {
		b, err := Memory().Open(dir, name, task)
		if err != nil {
			return nil, err
		}
		k.stores[path] = b.(*memoryBackend)
	}
	return keptBackend{k.stores[path]}, nil
}

// keptBackend's Close keeps the data for the next Open; embedding the
// memory backend keeps its Wiper and Sized.
type keptBackend struct{ *memoryBackend }

func (keptBackend) Close() error { return nil }
