package processor_test

import (
	"bytes"
	"slices"
	"strconv"
	"testing"

	"github.com/eosflow/eosflow/processor"
)

// FuzzParseDeadLetter reads arbitrary headers, as a consumer of a
// dead-letter topic anyone can write to would: ParseDeadLetter never
// panics, takes the last value of each dead-letter header and is ok only
// when a source topic or an expiry node is named; WithoutDeadLetter leaves its argument alone
// and drops exactly the dead-letter headers.
func FuzzParseDeadLetter(f *testing.F) {
	f.Add([]byte(processor.HeaderSourceTopic + "=in\n" + processor.HeaderSourcePartition + "=3\n" + processor.HeaderSourceOffset + "=99\ntrace=t1"))
	f.Add([]byte(processor.HeaderSourcePartition + "=99999999999\n" + processor.HeaderSourceOffset + "=-1\n" + processor.HeaderSourceTimestamp + "=9223372036854775807"))
	f.Add([]byte(processor.HeaderSourceTopic + "=\n" + processor.HeaderError + "=\xff\n" + processor.HeaderSourceTopic + "=b"))
	f.Add([]byte("=\n\n=="))
	f.Add([]byte(processor.HeaderExpiryNode + "=match\n" + processor.HeaderExpirySourceTopic + "=orders\n" + processor.HeaderExpirySourceOffset + "=7"))
	f.Fuzz(func(t *testing.T, raw []byte) {
		var headers []processor.Header
		for line := range bytes.SplitSeq(raw, []byte("\n")) {
			k, v, _ := bytes.Cut(line, []byte("="))
			headers = append(headers, processor.Header{Key: string(k), Value: v})
		}
		before := slices.Clone(headers)
		last := map[string]string{}
		for _, h := range headers {
			last[h.Key] = string(h.Value)
		}

		dl, ok := processor.ParseDeadLetter(headers)
		if ok != (last[processor.HeaderSourceTopic] != "" || last[processor.HeaderExpiryNode] != "") || dl.Topic != last[processor.HeaderSourceTopic] {
			t.Fatalf("ParseDeadLetter: topic %q ok=%v; the last %s header is %q, the last %s %q", dl.Topic, ok,
				processor.HeaderSourceTopic, last[processor.HeaderSourceTopic], processor.HeaderExpiryNode, last[processor.HeaderExpiryNode])
		}
		if dl.Node != last[processor.HeaderNode] || dl.Error != last[processor.HeaderError] || dl.Stack != last[processor.HeaderStack] ||
			dl.ExpiryNode != last[processor.HeaderExpiryNode] || dl.ExpiryWhat != last[processor.HeaderExpiryWhat] ||
			dl.ExpirySourceTopic != last[processor.HeaderExpirySourceTopic] {
			t.Fatalf("ParseDeadLetter: %+v, want the last value of each header %v", dl, last)
		}
		if off, err := strconv.ParseInt(last[processor.HeaderSourceOffset], 10, 64); err == nil && dl.Offset != off {
			t.Fatalf("offset %d, want %d", dl.Offset, off)
		}
		if off, err := strconv.ParseInt(last[processor.HeaderExpirySourceOffset], 10, 64); err == nil && dl.ExpirySourceOffset != off {
			t.Fatalf("expiry source offset %d, want %d", dl.ExpirySourceOffset, off)
		}

		kept := processor.WithoutDeadLetter(headers)
		if !slices.EqualFunc(headers, before, func(a, b processor.Header) bool { return a.Key == b.Key && bytes.Equal(a.Value, b.Value) }) {
			t.Fatal("WithoutDeadLetter changed its argument")
		}
		var want []processor.Header
		for _, h := range headers {
			switch h.Key {
			case processor.HeaderNode, processor.HeaderError, processor.HeaderStack, processor.HeaderSourceTopic,
				processor.HeaderSourcePartition, processor.HeaderSourceOffset, processor.HeaderSourceTimestamp,
				processor.HeaderExpiryNode, processor.HeaderExpiryWhat, processor.HeaderExpirySourceTopic,
				processor.HeaderExpirySourcePartition, processor.HeaderExpirySourceOffset, processor.HeaderExpirySourceTimestamp:
			default:
				want = append(want, h)
			}
		}
		if !slices.EqualFunc(kept, want, func(a, b processor.Header) bool { return a.Key == b.Key && bytes.Equal(a.Value, b.Value) }) {
			t.Fatalf("WithoutDeadLetter = %v, want %v", kept, want)
		}
	})
}
