package dedup_test

import (
	"os/exec"
	"strings"
	"testing"
)

// deps lists the packages pkg links, from go list -deps, and whether each
// is in the standard library.
func deps(t *testing.T, pkg string) map[string]bool {
	t.Helper()
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skipf("no go command to list dependencies with: %v", err)
	}
	out, err := exec.Command(goTool, "list", "-deps", "-f", "{{.ImportPath}} {{.Standard}}", pkg).Output()
	if err != nil {
		if ee, ok := err.(*exec.ExitError); ok {
			t.Fatalf("go list -deps %s: %v\n%s", pkg, err, ee.Stderr)
		}
		t.Fatalf("go list -deps %s: %v", pkg, err)
	}
	m := map[string]bool{}
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		path, std, _ := strings.Cut(l, " ")
		m[path] = std == "true"
	}
	return m
}

// The root package is dependency-free: topology imports it, so that a
// pipeline that uses only Memory, or no store, links neither the Redis nor
// the PostgreSQL client. Those live in redisdedup and pgdedup, whose lists
// must show them, or this test could not see a client at all.
func TestOnlyTheSubpackagesLinkClients(t *testing.T) {
	const mod = "github.com/eosflow/eosflow/dedup"
	for _, pkg := range []string{mod, mod + "/lease", mod + "/deduptest"} {
		for path, std := range deps(t, pkg) {
			if !std && path != mod && !strings.HasPrefix(path, mod+"/") {
				t.Errorf("%s links %s: the dedup root links the standard library alone; move what needs it to a subpackage", pkg, path)
			}
			if path == mod+"/redisdedup" || path == mod+"/pgdedup" {
				t.Errorf("%s links %s", pkg, path)
			}
		}
	}
	for pkg, client := range map[string]string{
		mod + "/redisdedup": "github.com/redis/go-redis/v9",
		mod + "/pgdedup":    "github.com/jackc/pgx/v5",
	} {
		if _, ok := deps(t, pkg)[client]; !ok {
			t.Errorf("go list -deps %s does not show %s: the check cannot see clients", pkg, client)
		}
	}
}
