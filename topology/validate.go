package topology

import (
	"errors"
	"fmt"
	"sort"
)

// Validate reports every mistake in the topology, each a *ValidationError
// naming its node, joined into one error; nil means the pipeline can run.
func (t *Topology) Validate() error {
	errs := append([]error(nil), t.problems...)
	add := func(node, format string, args ...any) {
		errs = append(errs, &ValidationError{Node: node, Problem: fmt.Sprintf(format, args...)})
	}
	var sources, sinks int
	for _, n := range t.nodes {
		switch n.kind {
		case KindSource:
			sources++
			if n.writer != nil && len(n.children) == 0 {
				add(n.writer.name, "%s output goes nowhere; %s", n.writer.op, endPath(n.writer.op))
			}
		case KindSink:
			sinks++
		default:
			if len(n.children) == 0 {
				add(n.name, "%s output goes nowhere; %s", n.op, endPath(n.op))
			}
		}
	}
	if sources == 0 {
		add("", "the topology has no source; add one with topology.Source")
	}
	if sinks == 0 {
		add("", "the topology has no sink; add one with topology.To")
	}
	names := make([]string, 0, len(t.policies))
	for name := range t.policies {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		if t.byName[name] == nil {
			add(name, "OnError names an unknown node; known nodes: %v", t.nodeNames())
		}
		if p := t.policies[name].check(); p != "" {
			add(name, "%s", p)
		}
	}
	if p := t.defaultPolicy.check(); p != "" {
		add("", "default error policy: %s", p)
	}
	t.storeProblems(add)
	t.globalProblems(add)
	if cyc := t.cycle(); cyc != nil {
		add(cyc[0], "cycle: %v; a pipeline must be acyclic", cyc)
	}
	return errors.Join(errs...)
}

// endPath says how to use the output of a node made by op.
func endPath(op string) string {
	switch op {
	case "GroupByKey", "GroupBy":
		return "aggregate it with Count, Reduce or Aggregate"
	case "Through":
		return "end the path with To or ToTopicFunc, or aggregate it"
	case "Count", "Reduce", "Aggregate", "CountWindows", "ReduceWindows", "AggregateWindows", "JoinTables":
		return "write its updates with ToTable, or turn them into a stream with ToStream"
	}
	return "end the path with To or ToTopicFunc"
}

func (t *Topology) nodeNames() []string {
	out := make([]string, 0, len(t.nodes))
	for _, n := range t.nodes {
		out = append(out, n.name)
	}
	return out
}

// cycle returns the names along a cycle, or nil. The typed builder cannot
// make one, but the graph is data and must be checked as such.
func (t *Topology) cycle() []string {
	const (
		unseen = iota
		active
		done
	)
	state := map[*Node]int{}
	var path []*Node
	var found []string
	var visit func(n *Node) bool
	visit = func(n *Node) bool {
		state[n] = active
		path = append(path, n)
		for _, c := range n.children {
			switch state[c] {
			case active:
				for i, p := range path {
					if p == c {
						for _, q := range path[i:] {
							found = append(found, q.name)
						}
						found = append(found, c.name)
						return true
					}
				}
			case unseen:
				if visit(c) {
					return true
				}
			}
		}
		path = path[:len(path)-1]
		state[n] = done
		return false
	}
	for _, n := range t.nodes {
		if state[n] == unseen && visit(n) {
			return found
		}
	}
	return nil
}
