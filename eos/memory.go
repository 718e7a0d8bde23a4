package eos

import "github.com/twmb/franz-go/pkg/kgo"

// recordBytes is what a record counts against a batch's byte cap: its key,
// value and header bytes, as the producer counts its buffer.
func recordBytes(rec *kgo.Record) int64 {
	n := len(rec.Key) + len(rec.Value)
	for _, h := range rec.Headers {
		n += len(h.Key) + len(h.Value)
	}
	return int64(n)
}

// taken counts a processed record against the byte cap and ends the batch
// once the cap is reached, as the commit interval would: later records are
// left for the next batch.
func (b *batch) taken(rec *kgo.Record) {
	b.bytes += recordBytes(rec)
	if b.full() {
		b.cut.Store(true)
	}
}

// full reports whether the batch reached its byte cap.
func (b *batch) full() bool { return b.maxBytes > 0 && b.bytes >= b.maxBytes }

// pollLimit caps a poll of n records at what the byte cap has room for,
// judged by the batch's average record so far, so that a batch ending on
// bytes leaves few polled records to rewind.
func (b *batch) pollLimit(n int) int {
	left := b.maxBytes - b.bytes
	if b.in == 0 || b.bytes == 0 || left <= 0 {
		return n
	}
	avg := max(b.bytes/int64(b.in), 1)
	return int(max(min(int64(n), (left+avg-1)/avg), 1))
}
