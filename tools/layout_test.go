package tools_test

import (
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// The library holds no tooling: no package outside tools, cmd, examples
// and integration imports tools/ or a tool's dependency directly, in its
// non-test files (the library's own packages are all checked, so the
// tooling cannot come in through one of them either).
func TestNoLibraryPackageImportsTooling(t *testing.T) {
	banned := []string{
		"github.com/eosflow/eosflow/tools",
		"github.com/spf13/cobra",
		"github.com/testcontainers/",
		"github.com/VictoriaMetrics/metricsql",
	}
	checked := 0
	err := filepath.WalkDir("..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && path != ".." {
			switch rel := filepath.ToSlash(strings.TrimPrefix(path, "../")); {
			case rel == "tools", rel == "cmd", rel == "examples", rel == "integration", strings.HasPrefix(d.Name(), "."), d.Name() == "testdata", d.Name() == "node_modules":
				return filepath.SkipDir
			}
			return nil
		}
		if d.IsDir() {
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		checked++
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			for _, b := range banned {
				if p == b || strings.HasPrefix(p, strings.TrimSuffix(b, "/")+"/") {
					t.Errorf("%s imports %s: library code must not depend on tooling", path, p)
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if checked < 100 {
		t.Fatalf("checked only %d library files: the walk missed the library", checked)
	}
}
