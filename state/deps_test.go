package state

import (
	"os/exec"
	"strings"
	"testing"
)

// pipelinePackages are what a pipeline program is built from: the runtime,
// the topology that describes it, its state, codecs, processors and
// configuration.
var pipelinePackages = []string{
	"github.com/eosflow/eosflow/eos",
	"github.com/eosflow/eosflow/topology",
	"github.com/eosflow/eosflow/state",
	"github.com/eosflow/eosflow/codec",
	"github.com/eosflow/eosflow/config",
	"github.com/eosflow/eosflow/processor",
}

// isPebble reports whether path is pebble or the engine built on it.
func isPebble(path string) bool {
	return path == "github.com/eosflow/eosflow/state/pebble" ||
		path == "github.com/cockroachdb/pebble" || strings.HasPrefix(path, "github.com/cockroachdb/pebble/")
}

// A pipeline that keeps its state in memory does not link pebble: only
// importing state/pebble does.
func TestMemoryPipelineDoesNotLinkPebble(t *testing.T) {
	// One line per dependency: its path, then what it imports.
	args := append([]string{"list", "-deps", "-f", `{{.ImportPath}} {{join .Imports " "}}`}, pipelinePackages...)
	out, err := exec.Command("go", args...).CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	listed := map[string]bool{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		listed[f[0]] = true
		for _, imp := range f[1:] {
			if isPebble(imp) && !isPebble(f[0]) {
				t.Errorf("%s imports %s, so a memory-only pipeline links pebble: only a program that chooses the pebble engine should", f[0], imp)
			}
		}
	}
	for _, p := range pipelinePackages {
		if !listed[p] {
			t.Errorf("go list -deps did not list %s itself:\n%s", p, out)
		}
	}
}
