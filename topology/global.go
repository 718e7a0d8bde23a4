package topology

import (
	"fmt"
	"slices"

	"github.com/eosflow/eosflow/codec"
	"github.com/eosflow/eosflow/internal/graph"
	"github.com/eosflow/eosflow/state"
)

// GlobalTable is a table of which every instance, and every worker of an
// instance, holds the whole topic, all partitions (Kafka Streams'
// GlobalKTable). A stream joins it with JoinGlobal or LeftJoinGlobal by a
// key it computes from each record, so the two need not be
// co-partitioned. Make one with GlobalTableFrom.
type GlobalTable[V any] struct {
	t     *Topology
	name  string
	topic string
	c     codec.Codec[V]
}

// globalDecl is one declared global table.
type globalDecl struct {
	name, topic string
	engine      state.Engine
	codec       string
	used        bool // a join reads it
}

// GlobalTableFrom declares a global table of topic: every instance and
// every worker reads all of topic's partitions, read_committed, into a
// store of engine (state.Memory(), or pebble.New() to keep a large table
// out of memory) before it processes any record, and keeps reading as the
// topic grows; a record with a nil value, a tombstone, deletes its key's
// row. The topic is the table's only source of truth: the store has no
// changelog and belongs to no task, and it is rebuilt from the topic at
// every start. Updates become visible between batches, never inside one,
// so a batch joins one consistent version of the table (see JoinGlobal
// for what that means for exactly-once).
//
// The table is named after the topic unless Named says otherwise; Named
// is its only option. The name must not be used by a node or a store, and
// the topic must not also be read by Source or TableFrom. A global table
// that no join reads is reported by Validate, as an unused store is.
func GlobalTableFrom[V any](t *Topology, topic string, c codec.Codec[V], engine state.Engine, opts ...SourceOption[V]) GlobalTable[V] {
	name := nodeOptions(t, topic, "does not apply to a global table; GlobalTableFrom takes only Named", opts, func(SourceOption[V]) bool { return false })
	switch {
	case topic == "":
		t.problem(name, "GlobalTableFrom has no topic; pass the topic to read")
		return GlobalTable[V]{}
	case c == nil:
		t.problem(name, "global table has no codec; pass codec.JSON[T]() or your own")
	case engine == nil:
		t.problem(name, "global table %q has a nil engine; pass state.Memory() or pebble.New() (package state/pebble)", name)
	}
	if p := storeNameProblem(name); p != "" {
		t.problem(name, "global table: %s", p)
	}
	for _, g := range t.globals {
		switch {
		case g.name == name:
			t.problem(name, "duplicate global table name %q; name one of them with topology.Named", name)
			return GlobalTable[V]{}
		case g.topic == topic:
			t.problem(name, "topic %q is already read by global table %q; declare each global table once and join it from several streams", topic, g.name)
			return GlobalTable[V]{}
		}
	}
	t.globals = append(t.globals, &globalDecl{name: name, topic: topic, engine: engine, codec: codec.Name(c)})
	return GlobalTable[V]{t: t, name: name, topic: topic, c: c}
}

// Name is the global table's name: its store's name in the state
// directory, in logs and in errors.
func (g GlobalTable[V]) Name() string { return g.name }

// GlobalTopics lists the topics of the global tables, sorted: the runtime
// reads them whole, outside the consumer group, and checks they exist.
func (t *Topology) GlobalTopics() []string {
	out := make([]string, 0, len(t.globals))
	for _, g := range t.globals {
		out = append(out, g.topic)
	}
	slices.Sort(out)
	return out
}

// global finds the declared global table called name.
func (t *Topology) global(name string) *globalDecl {
	for _, g := range t.globals {
		if g.name == name {
			return g
		}
	}
	return nil
}

// globalProblems reports global tables whose name or topic clashes with
// a node, a store or a source, and global tables no join reads.
func (t *Topology) globalProblems(add func(node, format string, args ...any)) {
	for _, g := range t.globals {
		if n := t.byName[g.name]; n != nil {
			add(g.name, "global table %q has the name of %s node %q; name one of them with topology.Named", g.name, n.op, n.name)
		}
		if d := t.storeByName[g.name]; d != nil {
			add(g.name, "global table %q has the name of the store declared by %s; name one of them with topology.Named", g.name, d.declaredBy())
		}
		if n := t.byTopic[g.topic]; n != nil {
			add(g.name, "topic %q is read both by global table %q and by %s %q; read it once: join the global table, "+
				"or read the topic as a stream or a co-partitioned table", g.topic, g.name, n.op, n.name)
		}
		if !g.used {
			add(g.name, "global table %q is read by no join; join it with topology.JoinGlobal or LeftJoinGlobal, or remove it", g.name)
		}
	}
}

// compileGlobals lists the global tables for the runtime.
func (t *Topology) compileGlobals() []graph.Global {
	out := make([]graph.Global, len(t.globals))
	for i, g := range t.globals {
		out[i] = graph.Global{Name: g.name, Topic: g.topic, Engine: g.engine}
	}
	return out
}

// describe is g's line in Describe.
func (g *globalDecl) describe() string {
	engine := "<nil>"
	if g.engine != nil {
		engine = g.engine.String()
	}
	return fmt.Sprintf("  Global table: %s (topic: %s, codec: %s, engine: %s, read whole by every instance, no changelog)\n",
		g.name, g.topic, g.codec, engine)
}
