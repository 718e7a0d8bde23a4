package topology

import (
	"fmt"
	"strings"
)

// Describe prints the graph as text, one block per connected sub-topology,
// in the spirit of Kafka Streams' Topology#describe (a repartition topic
// ends one sub-topology and starts another), then the repartition
// topics, the state stores
// with their engines, changelog topics (the application id is the
// runtime's, so it is shown as <app_id>) and the nodes that use them.
func (t *Topology) Describe() string {
	var b strings.Builder
	b.WriteString("Topology\n")
	sub := t.subTopologies()
	for i, nodes := range sub {
		fmt.Fprintf(&b, "  Sub-topology: %d\n", i)
		for _, n := range nodes {
			describeNode(&b, n)
		}
	}
	for _, n := range t.nodes {
		if n.kind != KindSink || n.internal == "" {
			continue
		}
		parts := fmt.Sprintf("as many as the largest of %s", strings.Join(sourceTopics(n.parents), ", "))
		if n.partitionCount > 0 {
			parts = fmt.Sprint(n.partitionCount)
		}
		fmt.Fprintf(&b, "  Repartition topic: %s (partitions: %s)\n", n.topic, parts)
		fmt.Fprintf(&b, "      written by: %s, read by: %s-repartition-source\n", n.name, n.name)
	}
	users := t.storeUsers()
	for _, d := range t.stores {
		engine := "<nil>"
		if d.engine != nil {
			engine = d.engine.String()
		}
		fmt.Fprintf(&b, "  Store: %s (engine: %s, changelog: %s)\n", d.name, engine, ChangelogTopic("<app_id>", d.name))
		if us := users[d.name]; len(us) > 0 {
			fmt.Fprintf(&b, "      used by: %s\n", joinNames(us))
		}
	}
	for _, g := range t.globals {
		b.WriteString(g.describe())
	}
	fmt.Fprintf(&b, "  Default on error: %s\n", t.defaultPolicy)
	return b.String()
}

// describeNode writes node n of a sub-topology, with its links and its
// error policy.
func describeNode(b *strings.Builder, n *Node) {
	switch n.kind {
	case KindSource:
		kind := "topic"
		if n.internal != "" {
			kind = "repartition topic"
		}
		store := ""
		if len(n.stores) > 0 {
			store = ", table in store: " + strings.Join(n.stores, ", ")
		}
		fmt.Fprintf(b, "    Source: %s (%s: %s, codec: %s%s)\n", n.name, kind, n.topic, n.codec, store)
	case KindSink:
		if n.internal != "" {
			fmt.Fprintf(b, "    Sink: %s (%s, repartition topic: %s, codec: %s)\n", n.name, n.op, n.topic, n.codec)
			break
		}
		topic := n.topic
		if topic == "" {
			topic = "<chosen per record>"
		}
		part := ""
		if n.partitioned {
			part = ", partitioner: custom"
		}
		fmt.Fprintf(b, "    Sink: %s (topic: %s, codec: %s%s)\n", n.name, topic, n.codec, part)
	default:
		stores := ""
		if len(n.stores) > 0 {
			stores = ", stores: " + strings.Join(n.stores, ", ")
		}
		if len(n.globals) > 0 {
			stores += ", global table: " + strings.Join(n.globals, ", ")
		}
		if n.windows != "" {
			stores += ", windows: " + n.windows
		}
		if n.latest {
			stores += ", emit: latest per commit"
		}
		if n.dedup != "" {
			stores += ", " + n.dedup
		}
		fmt.Fprintf(b, "    Processor: %s (%s%s)\n", n.name, n.op, stores)
	}
	if len(n.children) > 0 {
		fmt.Fprintf(b, "      --> %s\n", joinNames(n.children))
	}
	if len(n.parents) > 0 {
		fmt.Fprintf(b, "      <-- %s\n", joinNames(n.parents))
	}
	if n.policy != nil {
		fmt.Fprintf(b, "      on error: %s\n", n.policy)
	}
}

func joinNames(ns []*Node) string {
	names := make([]string, len(ns))
	for i, n := range ns {
		names[i] = n.name
	}
	return strings.Join(names, ", ")
}

// subTopologies groups nodes into connected components, each in the order
// the nodes were added.
func (t *Topology) subTopologies() [][]*Node {
	comp := map[*Node]int{}
	var groups [][]*Node
	for _, n := range t.nodes {
		if _, ok := comp[n]; ok {
			continue
		}
		id := len(groups)
		groups = append(groups, nil)
		stack := []*Node{n}
		comp[n] = id
		for len(stack) > 0 {
			c := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			for _, m := range append(append([]*Node(nil), c.parents...), c.children...) {
				if _, ok := comp[m]; !ok {
					comp[m] = id
					stack = append(stack, m)
				}
			}
		}
	}
	for _, n := range t.nodes {
		groups[comp[n]] = append(groups[comp[n]], n)
	}
	return groups
}
