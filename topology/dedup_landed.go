package topology

import "sync"

// landedEffects are the ids whose effect ran in one engine while the store
// did not take the mark after it. They stay in memory until a redelivery
// marks them: an id whose redelivery goes to another engine stays until
// the process ends (with leases, that engine waits for the lease first).
type landedEffects struct {
	mu  sync.Mutex
	ids map[string]struct{}
}

func newLandedEffects() *landedEffects { return &landedEffects{ids: map[string]struct{}{}} }

func (l *landedEffects) has(id string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	_, ok := l.ids[id]
	return ok
}

func (l *landedEffects) add(id string) {
	l.mu.Lock()
	l.ids[id] = struct{}{}
	l.mu.Unlock()
}

func (l *landedEffects) remove(id string) {
	l.mu.Lock()
	delete(l.ids, id)
	l.mu.Unlock()
}
