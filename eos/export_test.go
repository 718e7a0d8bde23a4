package eos

import "github.com/twmb/franz-go/pkg/kgo"

// EncodeMirrorForTest is encodeMirror for the package's external tests,
// which write mirror records of their own.
func EncodeMirrorForTest(id [16]byte, offset int64) []byte {
	return encodeMirror(id, kgo.EpochOffset{Offset: offset, Epoch: -1})
}
