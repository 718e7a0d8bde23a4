package topology

import (
	"fmt"

	"github.com/eosflow/eosflow/internal/graph"
)

func init() {
	graph.Compile = func(v any, appID string) (*graph.Graph, error) {
		t, ok := v.(*Topology)
		if !ok || t == nil {
			return nil, fmt.Errorf("topology: no topology to run (got %T); build one with topology.New", v)
		}
		return t.compile(appID)
	}
}

// compile validates t and returns what the engine runs for the app appID.
func (t *Topology) compile(appID string) (*graph.Graph, error) {
	if err := t.Validate(); err != nil {
		return nil, err
	}
	if appID == "" {
		appID = AppIDPlaceholder
	}
	g := &graph.Graph{
		Nodes:   make([]graph.Node, len(t.nodes)),
		Sources: make(map[string]graph.Source, len(t.byTopic)),
		Default: t.defaultPolicy.p,
	}
	for i, n := range t.nodes {
		g.Nodes[i] = graph.Node{Name: n.name, Policy: n.Policy().p, Init: n.init, Close: n.close}
		if n.late != nil {
			late := n.late.p
			g.Nodes[i].Late = &late
		}
		g.Partitioned = g.Partitioned || n.partitioned
	}
	users := t.storeUsers()
	for _, d := range t.stores {
		// Validate made sure that every store has users fed by one topic.
		g.Stores = append(g.Stores, graph.Store{Name: d.name, Engine: d.engine, Source: resolveAll(t, sourceTopics(users[d.name]), appID)[0]})
	}
	for topic, n := range t.byTopic {
		g.Sources[topic] = n.source
	}
	for _, n := range t.nodes {
		if n.kind == KindSource && n.internal != "" {
			topic := n.resolvedTopic(appID)
			if user := t.byTopic[topic]; user != nil {
				return nil, &ValidationError{Node: user.name, Problem: fmt.Sprintf(
					"source reads %s, the repartition topic of %s %q under app id %q; read another topic, or rename the node",
					topic, n.writer.op, n.writer.name, appID)}
			}
			g.Sources[topic] = n.source
		}
	}
	g.Repartitions = t.repartitions(appID)
	return g, nil
}
