package topology_test

import (
	"os/exec"
	"strings"
	"testing"
)

// A pipeline that uses Dedup with the memory store, or no Dedup, links
// topology and dedup alone: not the Redis or PostgreSQL client, which only
// a pipeline that builds a store of redisdedup or pgdedup links.
func TestTopologyLinksNoDedupClient(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("no go command to list dependencies with: %v", err)
	}
	const pkg = "github.com/eosflow/eosflow/topology"
	out, err := exec.Command(goTool, "list", "-deps", pkg).Output()
	if err != nil {
		if ee, ok := err.(*exec.ExitError); ok {
			t.Fatalf("go list -deps %s: %v\n%s", pkg, err, ee.Stderr)
		}
		t.Fatalf("go list -deps %s: %v", pkg, err)
	}
	deps := strings.Fields(string(out))
	seen := false
	for _, d := range deps {
		for _, banned := range []string{"github.com/redis/go-redis/", "github.com/jackc/pgx/", "github.com/eosflow/eosflow/dedup/redisdedup", "github.com/eosflow/eosflow/dedup/pgdedup"} {
			if strings.HasPrefix(d, banned) {
				t.Errorf("%s links %s", pkg, d)
			}
		}
		seen = seen || d == "github.com/eosflow/eosflow/dedup"
	}
	if !seen {
		t.Errorf("go list -deps %s does not list github.com/eosflow/eosflow/dedup, whose Store Dedup takes: %v", pkg, deps)
	}
}
