package eos

import "github.com/twmb/franz-go/pkg/kgo"

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
