package topology

import (
	"fmt"
	"slices"
	"strings"

	"github.com/eosflow/eosflow/state"
)

// storeDecl is one declared state store and the nodes that use it.
type storeDecl struct {
	name   string
	engine state.Engine
	owner  *Node // the aggregation that made it, nil for AddStore
}

// AddStore declares the state store name, kept by engine (state.Memory(),
// state/pebble.New()), for Process and ProcessWith nodes to use: connect it to
// them with UseStores. Each task (input partition) gets its own store,
// backed by the changelog topic ChangelogTopic names. Mistakes (an empty,
// duplicate or invalid name, a nil engine) are reported by Validate.
func (t *Topology) AddStore(name string, e state.Engine) *Topology {
	t.declareStore(name, e, nil)
	return t
}

// declareStore registers a store, recording mistakes for Validate.
func (t *Topology) declareStore(name string, e state.Engine, owner *Node) {
	node := ""
	if owner != nil {
		node = owner.name
	}
	if p := storeNameProblem(name); p != "" {
		t.problem(node, "%s", p)
	}
	if e == nil {
		t.problem(node, "store %q has a nil engine; pass state.Memory() or pebble.New() (package state/pebble)", name)
	}
	if old := t.storeByName[name]; old != nil {
		t.problem(node, "duplicate store name %q (already declared by %s); store names must be unique", name, old.declaredBy())
		return
	}
	d := &storeDecl{name: name, engine: e, owner: owner}
	t.stores = append(t.stores, d)
	t.storeByName[name] = d
}

func (d *storeDecl) declaredBy() string {
	if d.owner != nil {
		return fmt.Sprintf("%s node %q", d.owner.op, d.owner.name)
	}
	return "AddStore"
}

// maxStoreName leaves room for "<app_id>-" and "-changelog" in the
// changelog topic's name, within Kafka's 249 characters.
const maxStoreName = 249 - len("a--changelog")

// storeNameProblem says why name cannot be a store name, or "".
func storeNameProblem(name string) string {
	return topicPartProblem("store name", "the changelog topic's name", name, maxStoreName)
}

// topicPartProblem says why name, a what that becomes part of topic (and
// of a directory), cannot be one, or "": Kafka allows [a-zA-Z0-9._-] in
// topic names, up to 249 characters, so name may have up to limit.
func topicPartProblem(what, topic, name string, limit int) string {
	if name == "" || name == "." || name == ".." || len(name) > limit {
		return fmt.Sprintf("%s %q is not valid: it is part of %s, "+
			"so use 1 to %d of [a-zA-Z0-9._-], not . or ..", what, name, topic, limit)
	}
	for _, c := range name {
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-'
		if !ok {
			return fmt.Sprintf("%s %q has %q, which Kafka does not allow in %s; use only [a-zA-Z0-9._-]", what, name, c, topic)
		}
	}
	return ""
}

// ChangelogTopic is the topic that backs store for the pipeline whose
// application id is appID: "<appID>-<store>-changelog", the name Kafka
// Streams uses, so that the topics of both are recognizable side by side.
// It has one partition per partition of the store's source topic.
func ChangelogTopic(appID, store string) string {
	return appID + "-" + store + "-changelog"
}

// OffsetsTopic is the compacted topic where an exactly-once pipeline whose
// application id is appID mirrors its committed input offsets:
// "<appID>-eos-offsets". Each transaction writes there, to partition p,
// the offset it commits for partition p of each input topic (keyed by the
// topic), so the offsets survive a group coordinator that forgets them.
func OffsetsTopic(appID string) string {
	return appID + "-eos-offsets"
}

// ProcessOption tunes Process and ProcessWith.
type ProcessOption interface{ applyProcess(*procConf) }

type procConf struct {
	stores []string
	timers bool // Timers: the node keeps a timer store
}

type procOpt func(*procConf)

func (f procOpt) applyProcess(c *procConf) { f(c) }

// UseStores connects the stores called names, declared with AddStore, to
// the node, overriding the default of none: its function reaches them
// with ctx.Store or processor.KV. A node may use only the stores
// connected to it, which is how the topology knows each store's input
// topic. Options accumulate.
func UseStores(names ...string) ProcessOption {
	return procOpt(func(c *procConf) {
		for _, n := range names {
			if !slices.Contains(c.stores, n) {
				c.stores = append(c.stores, n)
			}
		}
	})
}

// storeUsers lists the nodes that use each declared store, in node order.
func (t *Topology) storeUsers() map[string][]*Node {
	users := map[string][]*Node{}
	for _, n := range t.nodes {
		for _, s := range n.stores {
			users[s] = append(users[s], n)
		}
	}
	return users
}

// sourceTopics lists, sorted, the topics of the sources upstream of nodes.
func sourceTopics(nodes []*Node) []string {
	seen := map[*Node]bool{}
	var topics []string
	stack := slices.Clone(nodes)
	for len(stack) > 0 {
		n := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if seen[n] {
			continue
		}
		seen[n] = true
		if n.kind == KindSource && n.topic != "" && !slices.Contains(topics, n.topic) {
			topics = append(topics, n.topic)
		}
		stack = append(stack, n.parents...)
	}
	slices.Sort(topics)
	return topics
}

// storeProblems reports stores that are unknown or unused. A store used
// from several input topics makes them co-partitioned (see
// graph.Graph.CoPartitioned); the runtime checks their partition counts.
func (t *Topology) storeProblems(add func(node, format string, args ...any)) {
	declared := make([]string, len(t.stores))
	for i, d := range t.stores {
		declared[i] = d.name
	}
	for _, n := range t.nodes {
		for _, s := range n.stores {
			if t.storeByName[s] == nil {
				add(n.name, "uses store %q, which is not declared; declare it with AddStore (declared stores: [%s])", s, strings.Join(declared, ", "))
			}
		}
	}
	users := t.storeUsers()
	for _, d := range t.stores {
		us := users[d.name]
		if len(us) == 0 {
			add("", "store %q is declared but no node uses it; connect it with topology.UseStores(%q) or remove it", d.name, d.name)
			continue
		}
	}
}

func quoteNames(ns []*Node) string {
	q := make([]string, len(ns))
	for i, n := range ns {
		q[i] = fmt.Sprintf("%q", n.name)
	}
	return strings.Join(q, ", ")
}
