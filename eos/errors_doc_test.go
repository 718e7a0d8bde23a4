package eos_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"unicode"
)

// errorPackages are the directories, from the repository root, whose
// errors a caller of Run, New or Close can meet; docs/errors.md must name
// every one.
var errorPackages = []string{"eos", "config", "topology", "processor", "state", "dedup", "sink/pgsink"}

// TestErrorsDocNamesEveryError keeps docs/errors.md complete: every
// exported Err… variable and every exported type named …Error in the
// packages above must appear there as pkg.Name, so a new error cannot be
// added without saying what it means and what to do about it.
func TestErrorsDocNamesEveryError(t *testing.T) {
	root := ".."
	doc, err := os.ReadFile(filepath.Join(root, "docs", "errors.md"))
	if err != nil {
		t.Fatal(err)
	}
	var missing []string
	total := 0
	for _, dir := range errorPackages {
		names := exportedErrors(t, filepath.Join(root, dir))
		if len(names) == 0 {
			t.Errorf("%s: found no exported errors; is the path right?", dir)
		}
		total += len(names)
		for _, n := range names {
			if !mentions(string(doc), n) {
				missing = append(missing, n)
			}
		}
	}
	for _, n := range missing {
		t.Errorf("docs/errors.md does not mention %s: add what it means and what to do about it", n)
	}
	t.Logf("%d errors checked", total)
}

// exportedErrors parses the non-test Go files of dir and returns, as
// pkg.Name, its exported package-level Err… variables and its exported
// types whose name ends in Error.
func exportedErrors(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	seen := map[string]bool{}
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(dir, name), nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		pkg := f.Name.Name
		for _, d := range f.Decls {
			gd, ok := d.(*ast.GenDecl)
			if !ok {
				continue
			}
			for _, spec := range gd.Specs {
				switch s := spec.(type) {
				case *ast.ValueSpec:
					if gd.Tok != token.VAR {
						continue
					}
					for _, id := range s.Names {
						if id.IsExported() && isErrName(id.Name) {
							seen[pkg+"."+id.Name] = true
						}
					}
				case *ast.TypeSpec:
					if s.Name.IsExported() && strings.HasSuffix(s.Name.Name, "Error") {
						seen[pkg+"."+s.Name.Name] = true
					}
				}
			}
		}
	}
	out := make([]string, 0, len(seen))
	for n := range seen {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// isErrName reports whether name is a sentinel's name: Err followed by
// an upper-case letter, as ErrFenced.
func isErrName(name string) bool {
	rest, ok := strings.CutPrefix(name, "Err")
	return ok && rest != "" && unicode.IsUpper([]rune(rest)[0])
}

// mentions reports whether doc names ref as a whole identifier, so that
// eos.ErrClosed is not taken as mentioned by eos.ErrClosedX or
// xeos.ErrClosed.
func mentions(doc, ref string) bool {
	for i := 0; ; {
		j := strings.Index(doc[i:], ref)
		if j < 0 {
			return false
		}
		start, end := i+j, i+j+len(ref)
		if !identByte(doc, start-1) && !identByte(doc, end) {
			return true
		}
		i = start + 1
	}
}

// identByte reports whether doc[i] exists and can be part of a Go
// identifier.
func identByte(doc string, i int) bool {
	if i < 0 || i >= len(doc) {
		return false
	}
	c := doc[i]
	return c == '_' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}
