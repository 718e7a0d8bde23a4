package topology

// Named names a source or sink node, which is otherwise named after its
// topic. Pass it to Source, TableFrom, To or ToTable when one topic would
// name two nodes: a topic written by two sinks, or read and written by one
// topology. A node's name is how OnError, metrics, logs and errors refer
// to it, and TableFrom's store (with its changelog topic) is named after
// it.
func Named(name string) NodeName { return NodeName(name) }

// NodeName is the option Named returns; it serves any source or sink.
type NodeName string

func (NodeName) sourceOption() {}
func (NodeName) sinkOption()   {}

// nodeOptions applies opts with apply and returns the node's name: def
// unless Named says otherwise. An option apply refuses is a problem of the
// node, refused says why: one made for another value type (SourceTimestamp
// of another T) compiles, since Named serves every type.
func nodeOptions[O any](t *Topology, def, refused string, opts []O, apply func(O) bool) string {
	name := def
	var wrong []O
	for _, o := range opts {
		switch n := any(o).(type) {
		case nil:
		case NodeName:
			name = string(n)
		default:
			if !apply(o) {
				wrong = append(wrong, o)
			}
		}
	}
	for _, o := range wrong {
		t.problem(name, "option %T %s", o, refused)
	}
	return name
}
