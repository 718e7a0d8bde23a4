package main

import (
	"os"
	"strings"
	"testing"
)

// The README's word count shows this file's pipeline function as written.
func TestReadmeShowsThisPipeline(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(readme), "\n## A word count, start to finish\n")
	if !ok {
		t.Fatal(`README.md has no "## A word count, start to finish" section`)
	}
	_, block, ok := strings.Cut(section, "\n```go\n")
	if !ok {
		t.Fatal("the section has no ```go block")
	}
	block, _, _ = strings.Cut(block, "\n```\n")
	src, err := os.ReadFile("main.go")
	if err != nil {
		t.Fatal(err)
	}
	_, fn, ok := strings.Cut(string(src), "\nfunc pipeline() *topology.Topology {\n")
	if !ok {
		t.Fatal("main.go has no func pipeline")
	}
	fn, _, _ = strings.Cut(fn, "\n}\n")
	if want := "func pipeline() *topology.Topology {\n" + fn + "\n}"; block != want {
		t.Errorf("README.md's word count differs from main.go's pipeline; copy it over.\nREADME:\n%s\nmain.go:\n%s", block, want)
	}
}
