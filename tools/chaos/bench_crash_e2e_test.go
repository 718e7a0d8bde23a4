package chaos_test

import (
	"encoding/json"
	"os/exec"
	"testing"

	"github.com/eosflow/eosflow/tools/bench"
)

// eosctl bench's crash case on the embedded broker: a worker process
// restores a changelog of 20,000 keys into pebble, counts, is killed with
// SIGKILL, and a new one starts on its state directory. The restore's end
// flushed the stores, so the restart restores only the few records
// written after it, counts every record fed after the crash once, and
// repeats none of the first instance's counts.
func TestBenchCrashRestoresOnlyTheTail(t *testing.T) {
	t.Parallel()
	const keys = 20000
	out, err := exec.Command(eosctl(t), "bench", "--pipeline", "count", "--cases", bench.RestoreCrash,
		"--restore-keys", "20000", "--partitions", "3", "--repeat", "1", "--run-timeout", "2m", "-o", "json").Output()
	if err != nil {
		t.Fatalf("eosctl bench: %v\n%s", err, out)
	}
	var results []bench.Result
	if err := json.Unmarshal(out, &results); err != nil || len(results) != 1 {
		t.Fatalf("not one JSON result (%v):\n%s", err, out)
	}
	r := results[0]
	if r.Error != "" || r.Skipped != "" || r.Runs != 1 || r.Crash == nil {
		t.Fatalf("the crash case did not run: %+v", r)
	}
	if r.Duplicates != 0 || r.Missing != 0 {
		t.Fatalf("%d counts repeated, %d records missing across the crash", r.Duplicates, r.Missing)
	}
	// The first instance's changelog after its restore is one record per
	// key it counted: restoreTriggers' 64 at most.
	if r.Crash.Restored > 64 || r.Crash.CommitSeconds <= 0 {
		t.Fatalf("after the crash it restored %.0f of %d changelog records, committing after %.2f s; want at most the 64 written after the restore",
			r.Crash.Restored, keys, r.Crash.CommitSeconds)
	}
}
