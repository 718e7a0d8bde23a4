package topology

import (
	"fmt"
	"slices"
	"strings"

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
		Cursor:  &graph.Cursor{},
	}
	for i, n := range t.nodes {
		g.Nodes[i] = graph.Node{Name: n.name, Policy: n.Policy().p, Init: n.init, Close: n.close}
		if n.late != nil {
			late := n.late.p
			g.Nodes[i].Late = &late
		}
		g.Partitioned = g.Partitioned || n.partitioned
		g.Holds = g.Holds || n.latest
	}
	users := t.storeUsers()
	g.CoPartitioned, g.TaskTopics = t.coPartitioned(appID)
	for _, d := range t.stores {
		// Validate made sure that every store has users fed by a topic.
		src := resolveAll(t, sourceTopics(users[d.name]), appID)[0]
		if c, ok := g.TaskTopics[src]; ok {
			src = c
		}
		g.Stores = append(g.Stores, graph.Store{Name: d.name, Engine: d.engine, Source: src})
	}
	for topic, n := range t.byTopic {
		g.Sources[topic] = t.sourceOf(n, g.Cursor)
	}
	for _, n := range t.nodes {
		if n.kind == KindSource && n.internal != "" {
			topic := n.resolvedTopic(appID)
			if user := t.byTopic[topic]; user != nil {
				return nil, &ValidationError{Node: user.name, Problem: fmt.Sprintf(
					"source reads %s, the repartition topic of %s %q under app id %q; read another topic, or rename the node",
					topic, n.writer.op, n.writer.name, appID)}
			}
			g.Sources[topic] = t.sourceOf(n, g.Cursor)
		}
	}
	g.Repartitions = t.repartitions(appID)
	g.Globals = t.compileGlobals()
	return g, nil
}

// coPartitioned groups the input topics (resolved for appID) that share
// tasks: the topics feeding the users of one store, merged where groups
// overlap. It returns the groups of two or more topics, each sorted, and
// each such topic's task topic, its group's first.
func (t *Topology) coPartitioned(appID string) ([][]string, map[string]string) {
	parent := map[string]string{}
	var find func(string) string
	find = func(x string) string {
		if p, ok := parent[x]; ok && p != x {
			root := find(p)
			parent[x] = root
			return root
		}
		parent[x] = x
		return x
	}
	users := t.storeUsers()
	for _, d := range t.stores {
		topics := resolveAll(t, sourceTopics(users[d.name]), appID)
		for _, topic := range topics[min(1, len(topics)):] {
			a, b := find(topics[0]), find(topic)
			if a != b {
				parent[max(a, b)] = min(a, b)
			}
		}
	}
	members := map[string][]string{}
	for topic := range parent {
		root := find(topic)
		members[root] = append(members[root], topic)
	}
	var groups [][]string
	taskTopic := map[string]string{}
	for _, m := range members {
		if len(m) < 2 {
			continue
		}
		slices.Sort(m)
		groups = append(groups, m)
		for _, topic := range m {
			taskTopic[topic] = m[0]
		}
	}
	slices.SortFunc(groups, func(a, b []string) int { return strings.Compare(a[0], b[0]) })
	return groups, taskTopic
}
