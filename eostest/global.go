package eostest

import (
	"bytes"
	"fmt"
	"sync"

	"github.com/eosflow/eosflow/internal/graph"
)

// globals are the driver's global tables (topology.GlobalTableFrom): a
// record piped to a global table's topic sets or, as a tombstone, deletes
// its key's row at once, as the runtime applies a committed update
// between batches.
type globals struct {
	mu      sync.Mutex
	byName  map[string]*globalRows
	byTopic map[string]*globalRows
}

// globalRows is one global table's rows, by key.
type globalRows struct {
	mu   sync.Mutex
	rows map[string][]byte
}

func newGlobals(specs []graph.Global) *globals {
	g := &globals{byName: map[string]*globalRows{}, byTopic: map[string]*globalRows{}}
	for _, s := range specs {
		rows := &globalRows{rows: map[string][]byte{}}
		g.byName[s.Name], g.byTopic[s.Topic] = rows, rows
	}
	return g
}

// table is the engine's way to the global table called name.
func (g *globals) table(name string) (graph.GlobalStore, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if t := g.byName[name]; t != nil {
		return t, nil
	}
	return nil, fmt.Errorf("no global table %q in this topology", name)
}

// pipe applies a record of a global table's topic, and reports whether
// topic is one.
func (g *globals) pipe(topic string, key, value []byte) bool {
	g.mu.Lock()
	t := g.byTopic[topic]
	g.mu.Unlock()
	if t == nil {
		return false
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if value == nil {
		delete(t.rows, string(key))
	} else {
		t.rows[string(key)] = bytes.Clone(value)
	}
	return true
}

// Get implements graph.GlobalStore.
func (t *globalRows) Get(key []byte) ([]byte, bool, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	v, ok := t.rows[string(key)]
	return bytes.Clone(v), ok, nil
}
