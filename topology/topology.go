// Package topology declares a pipeline as data: sources, operators and sinks
// joined into a graph that can be validated and printed before anything runs.
//
// Operators are generic functions (Go has no generic methods), so values stay
// typed from source to sink with no casts. Building never panics: mistakes
// are collected and returned by Validate, each naming its node.
package topology

import (
	"context"
	"fmt"
	"sort"

	"github.com/eosflow/eosflow/internal/graph"
)

// KV is one output of FlatMap.
type KV[T any] struct {
	Key   []byte
	Value T
}

// Kind classifies nodes for validation and description.
type Kind int

// Node kinds.
const (
	KindSource Kind = iota
	KindProcessor
	KindSink
)

// String is the kind as Describe prints it.
func (k Kind) String() string {
	switch k {
	case KindSource:
		return "Source"
	case KindSink:
		return "Sink"
	}
	return "Processor"
}

// Node is one vertex of the graph, as Describe shows it.
type Node struct {
	t        *Topology
	index    int
	name     string
	kind     Kind
	op       string
	topic    string // source or static sink topic
	codec    string
	parents  []*Node
	children []*Node
	policy   *ErrorPolicy
	source   graph.Source // sources: runs a record through the graph
	// init makes an engine's instance of a Process or Dedup node, close
	// ends it.
	init        func(context.Context) (any, error)
	close       func(any) error
	partitioned bool     // a sink with its own Partitioner
	stores      []string // the stores the node may use, in declaration order
	globals     []string // the global tables a JoinGlobal node reads
	rekeys      bool     // the node may change keys (Map, FlatMap, Process)
	// internal is the suffix of the app's internal topic that a
	// repartition sink writes or its source reads ("<node>-repartition");
	// topic then holds the name with AppIDPlaceholder.
	internal       string
	partitionCount int32        // a repartition sink's RepartitionPartitions, 0 if unset
	writer         *Node        // a repartition source's sink
	late           *ErrorPolicy // a windowed aggregation's policy for ErrLate
	windows        string       // a windowed aggregation's Windows, described
	latest         bool         // an aggregation with LatestPerCommit
	dedup          string       // a Dedup node's mode, retention and store failure handling, described
	// fuse, for a node that can join a fused chain (see fuse.go), builds
	// its part of the chain: a graph.Source for a source, else a link of
	// its input type.
	fuse func(*fusion) any
}

// Name is the node's unique name.
func (n *Node) Name() string { return n.name }

// Kind says whether n is a source, processor or sink.
func (n *Node) Kind() Kind { return n.kind }

// Op names the operator that made n, e.g. "MapValues".
func (n *Node) Op() string { return n.op }

// Topic is the topic a source reads or a static sink writes, else "".
// Internal topics (a GroupBy's repartition topic) are named with
// AppIDPlaceholder, since the application id is the runtime's.
func (n *Node) Topic() string { return n.topic }

// Internal reports whether n's topic is one of the app's internal topics,
// which the runtime names after the application id and creates.
func (n *Node) Internal() bool { return n.internal != "" }

// Stores names the state stores n uses: those connected with UseStores,
// or an aggregation's own store.
func (n *Node) Stores() []string { return n.stores }

// Parents are the nodes feeding n.
func (n *Node) Parents() []*Node { return n.parents }

// Children are the nodes n feeds.
func (n *Node) Children() []*Node { return n.children }

// Policy is the error policy that applies to n: its own, else the
// topology's default.
func (n *Node) Policy() ErrorPolicy {
	if n.policy != nil {
		return *n.policy
	}
	return n.t.defaultPolicy
}

// Topology is a pipeline graph. Create one with New, add nodes with
// Source and the operator functions, then Validate. It has no name of its
// own: the runtime's app_id names the application, its group, its
// transactional ids and its internal topics.
type Topology struct {
	nodes         []*Node
	byName        map[string]*Node
	byTopic       map[string]*Node
	problems      []error
	defaultPolicy ErrorPolicy
	policies      map[string]ErrorPolicy
	stores        []*storeDecl
	storeByName   map[string]*storeDecl
	globals       []*globalDecl
	unfused       bool // compile runs every node on its own (tests compare)
}

// Option configures a Topology.
type Option interface{ apply(*Topology) }

type optFunc func(*Topology)

func (f optFunc) apply(t *Topology) { f(t) }

// DefaultErrorPolicy sets the policy of every node that has none of its
// own, overriding the default Fail().
func DefaultErrorPolicy(p ErrorPolicy) Option {
	return optFunc(func(t *Topology) { t.defaultPolicy = p })
}

// New starts an empty topology.
func New(opts ...Option) *Topology {
	t := &Topology{
		byName:        map[string]*Node{},
		byTopic:       map[string]*Node{},
		defaultPolicy: Fail(),
		policies:      map[string]ErrorPolicy{},
		storeByName:   map[string]*storeDecl{},
	}
	for _, o := range opts {
		o.apply(t)
	}
	return t
}

// Nodes lists the nodes in the order they were added.
func (t *Topology) Nodes() []*Node { return t.nodes }

// Node returns the node called name, or nil.
func (t *Topology) Node(name string) *Node { return t.byName[name] }

// OnError sets the error policy of the node called name. An unknown name is
// reported by Validate.
func (t *Topology) OnError(name string, p ErrorPolicy) *Topology {
	t.policies[name] = p
	if n := t.byName[name]; n != nil {
		n.policy = &p
	}
	return t
}

// InputTopics lists the topics the sources read, sorted; internal topics
// (see RepartitionTopic) are not included.
func (t *Topology) InputTopics() []string {
	out := make([]string, 0, len(t.byTopic))
	for topic := range t.byTopic {
		out = append(out, topic)
	}
	sort.Strings(out)
	return out
}

// OutputTopics lists the topics known before running: static sinks and
// dead-letter topics, sorted. Topics chosen per record and internal
// topics are not included.
func (t *Topology) OutputTopics() []string {
	set := map[string]bool{}
	for _, n := range t.nodes {
		if n.kind == KindSink && n.topic != "" && n.internal == "" {
			set[n.topic] = true
		}
		own := n.Policy().p
		for p := &own; p != nil; p = p.Then {
			if p.Kind == graph.PolicyDeadLetter {
				set[p.Topic] = true
			}
		}
	}
	out := make([]string, 0, len(set))
	for topic := range set {
		out = append(out, topic)
	}
	sort.Strings(out)
	return out
}

func (t *Topology) problem(node, format string, args ...any) {
	t.problems = append(t.problems, &ValidationError{Node: node, Problem: fmt.Sprintf(format, args...)})
}

// namedHint says how to tell apart two nodes named alike when either is a
// source or sink, named after its topic by default.
func namedHint(old *Node, kind Kind) string {
	if old.kind == KindProcessor && kind == KindProcessor {
		return ""
	}
	return ` (sources and sinks are named after their topic: name one with topology.Named("…"))`
}

// add registers a node, recording naming mistakes for Validate.
func (t *Topology) add(name string, kind Kind, op string, parents ...*Node) *Node {
	n := &Node{t: t, index: len(t.nodes), name: name, kind: kind, op: op}
	switch op {
	case "Map", "FlatMap", "Process", "ProcessWith":
		n.rekeys = true
	}
	switch {
	case name == "":
		t.problem("", "a %s node has an empty name; give every node a unique name", op)
	case t.byName[name] != nil && t.byName[name].writer != nil:
		t.problem(name, "the name is taken by the source that %s %q made for its repartition topic; rename this %s",
			t.byName[name].writer.op, t.byName[name].writer.name, op)
	case t.byName[name] != nil:
		t.problem(name, "duplicate node name (used by a %s and a %s); names must be unique%s", t.byName[name].op, op, namedHint(t.byName[name], kind))
	default:
		t.byName[name] = n
	}
	if p, ok := t.policies[name]; ok {
		n.policy = &p
	}
	for _, p := range parents {
		if p == nil {
			t.problem(name, "input stream is unknown (a zero Stream); pass a stream returned by Source or an operator")
			continue
		}
		if p.t != t {
			t.problem(name, "input stream %q belongs to another topology; build each pipeline on one", p.name)
			continue
		}
		n.parents = append(n.parents, p)
		p.children = append(p.children, n)
	}
	t.nodes = append(t.nodes, n)
	return n
}
