package sim_test

import (
	"flag"
	"os"
	"testing"
)

// TestMain runs 16 parallel tests at once unless -parallel says
// otherwise: a schedule mostly waits on timeouts, not on the CPU, and go
// test's default is the number of cores.
func TestMain(m *testing.M) {
	flag.Parse()
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == "test.parallel" })
	if !set {
		_ = flag.Set("test.parallel", "16")
	}
	os.Exit(m.Run())
}
