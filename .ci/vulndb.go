//go:build ignore

// Vulndb lays out the Go vulnerability reports of the golang.org/x/vulndb
// module (its data/osv directory, the reports vuln.go.dev serves) as a
// database govulncheck reads with -db file://DIR, so that CI needs only
// the Go module proxy, not vuln.go.dev.
//
//	go run .ci/vulndb.go OSV_DIR OUT_DIR
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
)

// entry is the part of an OSV report the index needs.
type entry struct {
	ID       string `json:"id"`
	Modified string `json:"modified"`
	Affected []struct {
		Package struct {
			Name string `json:"name"`
		} `json:"package"`
		Ranges []struct {
			Events []struct {
				Fixed string `json:"fixed"`
			} `json:"events"`
		} `json:"ranges"`
	} `json:"affected"`
}

// vuln is one report in index/modules.json.
type vuln struct {
	ID       string `json:"id"`
	Modified string `json:"modified"`
	Fixed    string `json:"fixed,omitempty"`
}

// module is one module in index/modules.json.
type module struct {
	Path  string `json:"path"`
	Vulns []vuln `json:"vulns"`
}

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: go run .ci/vulndb.go OSV_DIR OUT_DIR")
		os.Exit(2)
	}
	if err := build(os.Args[1], os.Args[2]); err != nil {
		fmt.Fprintln(os.Stderr, "vulndb:", err)
		os.Exit(1)
	}
}

// build writes ID/<id>.json for every report in src, and the index files
// index/db.json and index/modules.json, under out.
func build(src, out string) error {
	files, err := filepath.Glob(filepath.Join(src, "*.json"))
	if err != nil {
		return err
	}
	if len(files) == 0 {
		return fmt.Errorf("no reports in %s", src)
	}
	for _, d := range []string{"ID", "index"} {
		if err := os.MkdirAll(filepath.Join(out, d), 0o755); err != nil {
			return err
		}
	}
	mods := map[string][]vuln{}
	latest := "1970-01-01T00:00:00Z"
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		var e entry
		if err := json.Unmarshal(raw, &e); err != nil {
			return fmt.Errorf("%s: %w", f, err)
		}
		if err := os.WriteFile(filepath.Join(out, "ID", e.ID+".json"), raw, 0o644); err != nil {
			return err
		}
		latest = max(latest, e.Modified)
		for _, a := range e.Affected {
			v := vuln{ID: e.ID, Modified: e.Modified}
			for _, r := range a.Ranges {
				for _, ev := range r.Events {
					if ev.Fixed != "" {
						v.Fixed = ev.Fixed
					}
				}
			}
			mods[a.Package.Name] = append(mods[a.Package.Name], v)
		}
	}
	index := make([]module, 0, len(mods))
	for p, vs := range mods {
		index = append(index, module{Path: p, Vulns: vs})
	}
	sort.Slice(index, func(i, j int) bool { return index[i].Path < index[j].Path })
	if err := writeJSON(filepath.Join(out, "index", "modules.json"), index); err != nil {
		return err
	}
	return writeJSON(filepath.Join(out, "index", "db.json"), map[string]string{"modified": latest})
}

func writeJSON(path string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o644)
}
