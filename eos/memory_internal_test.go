package eos

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
)

// A poll is capped at what the byte cap has room for, by the batch's
// average record so far.
func TestPollLimit(t *testing.T) {
	for _, tt := range []struct {
		in, n           int
		bytes, maxBytes int64
		want            int
	}{
		{0, 500, 0, 1000, 500},      // nothing taken yet: no estimate
		{10, 500, 100, 1000, 90},    // 10 bytes a record, 900 left
		{10, 50, 100, 1000, 50},     // the record cap is lower
		{3, 500, 1000, 1001, 1},     // room for part of one: still one
		{10, 500, 1000, 1000, 500},  // full: the batch is cut anyway
		{10, 500, 105, 1000, 90},    // 10.5 a record counts as 10: 895 left is 90
		{7, 500, 7 << 20, 0, 500},   // no cap
		{1, 500, 30000, 32000, 1},   // one large record
		{2, 500, 200, 1 << 30, 500}, // a large cap
	} {
		b := &batch{in: tt.in, bytes: tt.bytes, maxBytes: tt.maxBytes}
		if got := b.pollLimit(tt.n); got != tt.want {
			t.Errorf("in %d, bytes %d of %d, poll %d: got %d, want %d", tt.in, tt.bytes, tt.maxBytes, tt.n, got, tt.want)
		}
	}
	b := &batch{maxBytes: 100}
	b.taken(&kgo.Record{Key: []byte("k"), Value: make([]byte, 90), Headers: []kgo.RecordHeader{{Key: "h", Value: []byte("12345678")}}})
	if b.bytes != 100 || !b.full() || !b.cut.Load() {
		t.Fatalf("a record of 100 key, value and header bytes against a 100-byte cap: bytes %d, full %v, cut %v", b.bytes, b.full(), b.cut.Load())
	}
}
