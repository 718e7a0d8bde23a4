package sim

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync/atomic"
)

// runs numbers the runs of this process, to label each one's goroutines.
var runs atomic.Int64

// labelled runs fn with its goroutines, and every goroutine they start,
// labelled as one run's, so that stacks can tell them from other runs'.
func labelled(ctx context.Context, fn func(ctx context.Context, label string)) {
	label := strconv.FormatInt(runs.Add(1), 10)
	pprof.Do(ctx, pprof.Labels("sim-run", label), func(ctx context.Context) { fn(ctx, label) })
}

// dumpStacks writes the stacks of the goroutines of run label to a file
// and returns its path: a hang or a silent wait that does not replay can
// still be read there.
func dumpStacks(label string, sched Schedule) (string, error) {
	var all bytes.Buffer
	if err := pprof.Lookup("goroutine").WriteTo(&all, 1); err != nil {
		return "", err
	}
	tag := `"sim-run":"` + label + `"`
	var mine strings.Builder
	fmt.Fprintf(&mine, "%v\n\n", sched)
	_, entries, _ := strings.Cut(all.String(), "\n") // the profile's header line
	for _, block := range strings.Split(entries, "\n\n") {
		if strings.Contains(block, tag) {
			mine.WriteString(block)
			mine.WriteString("\n\n")
		}
	}
	path := filepath.Join(os.TempDir(), fmt.Sprintf("sim-stacks-%d-%s-%d-%s.txt", sched.Seed, sched.Pipeline, os.Getpid(), label))
	return path, os.WriteFile(path, []byte(mine.String()), 0o644)
}
