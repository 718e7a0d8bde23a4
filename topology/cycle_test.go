package topology

import (
	"strings"
	"testing"
)

// The typed builder cannot close a loop, so the check is tested on the data.
func TestValidateCycle(t *testing.T) {
	top := New()
	a := top.add("a", KindProcessor, "Map")
	b := top.add("b", KindProcessor, "Map", a)
	a.parents = append(a.parents, b)
	b.children = append(b.children, a)
	err := top.Validate()
	if err == nil || !strings.Contains(err.Error(), "cycle: [a b a]") {
		t.Fatalf("want a cycle error naming a and b, got %v", err)
	}
}
