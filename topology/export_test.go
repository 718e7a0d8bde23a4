package topology

// Unfused makes t compile without fused chains, every node run on its own
// as it was declared, so tests can compare the two.
func Unfused(t *Topology) *Topology {
	t.unfused = true
	return t
}
