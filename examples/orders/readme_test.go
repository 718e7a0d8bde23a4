package main

import (
	"os"
	"strings"
	"testing"
)

// The README's quickstart is the region of main.go between the quickstart
// markers, one tab of indentation less, so it compiles as written because
// this program does.
func TestReadmeQuickstartIsThisProgram(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(readme), "\n## Quickstart\n")
	if !ok {
		t.Fatal(`README.md has no "## Quickstart" section`)
	}
	section, _, _ = strings.Cut(section, "\n## ")
	_, block, ok := strings.Cut(section, "\n```go\n")
	if !ok {
		t.Fatal("README.md's Quickstart has no ```go block")
	}
	block, _, ok = strings.Cut(block, "\n```\n")
	if !ok {
		t.Fatal("README.md's Quickstart go block is not closed")
	}

	src, err := os.ReadFile("main.go")
	if err != nil {
		t.Fatal(err)
	}
	_, region, ok := strings.Cut(string(src), "\t// quickstart:begin\n")
	if !ok {
		t.Fatal("main.go has no // quickstart:begin line")
	}
	region, _, ok = strings.Cut(region, "\t// quickstart:end\n")
	if !ok {
		t.Fatal("main.go has no // quickstart:end line")
	}
	lines := strings.Split(strings.TrimSuffix(region, "\n"), "\n")
	for i, l := range lines {
		lines[i] = strings.TrimPrefix(l, "\t")
	}
	if want := strings.Join(lines, "\n"); block != want {
		t.Errorf("README.md's quickstart differs from main.go's quickstart region; copy the region over.\nREADME:\n%s\nmain.go:\n%s", block, want)
	}
}
