package eos

import (
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eosflow/eosflow/config"
	"github.com/eosflow/eosflow/topology"
)

// NewWorkerForTest is New of a worker's configuration (runcfg.ForWorker),
// which Validate refuses: the package's external tests stand up one worker
// of an instance on its own, as a second copy of that instance would.
func NewWorkerForTest(cfg config.Config, t *topology.Topology, opts ...Option) (*Runner, error) {
	return newChecked(cfg, t, opts)
}

// EncodeMirrorForTest is encodeMirror for the package's external tests,
// which write mirror records of their own.
func EncodeMirrorForTest(id [16]byte, offset int64) []byte {
	return encodeMirror(id, kgo.EpochOffset{Offset: offset, Epoch: -1})
}

// GroupGenerationForTest is the generation (or member epoch) r's client
// is at, -1 without a client.
func GroupGenerationForTest(r *Runner) int32 {
	cl := r.health.client.Load()
	if cl == nil {
		return -1
	}
	_, gen := cl.GroupMetadata()
	return gen
}
