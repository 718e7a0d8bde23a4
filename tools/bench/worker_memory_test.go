package bench

import (
	"encoding/json"
	"testing"

	"github.com/eosflow/eosflow/config"
)

// Options.MaxMemory reaches a worker process's configuration through the
// spec's JSON; unset, the worker keeps max_memory's default.
func TestWorkerSpecMaxMemory(t *testing.T) {
	for _, mm := range []config.ByteSize{0, 48 * config.MiB} {
		js, err := specJSON(WorkerSpec{Case: ExactlyOnce, Brokers: []string{"127.0.0.1:9092"}, AppID: "app", BatchRecords: 100, MaxMemory: mm})
		if err != nil {
			t.Fatal(err)
		}
		var spec WorkerSpec
		if err := json.Unmarshal([]byte(js), &spec); err != nil {
			t.Fatal(err)
		}
		cfg, err := spec.Config()
		if err != nil {
			t.Fatal(err)
		}
		if cfg.MaxMemory != mm {
			t.Errorf("max_memory %s came through as %s (spec %s)", mm, cfg.MaxMemory, js)
		}
	}
}
