package processor

import (
	"slices"
	"strconv"
	"time"
)

// DeadLetter is what the headers of a dead-lettered record say about it:
// the node that failed, why, and where the record was read.
type DeadLetter struct {
	Node string
	// Error is the failure's message, as valid UTF-8, cut to 8 KiB so the
	// dead letter still fits where its record did.
	Error string
	// Stack is set when the node panicked, cut to 32 KiB.
	Stack     string
	Topic     string
	Partition int32
	Offset    int64
	Timestamp time.Time
	// ExpiryNode and Expiry are set when the dead letter is an expired
	// entry rather than an input record (see HeaderExpiryNode): the join
	// or window node, and what expired. Topic, Partition, Offset and
	// Timestamp then name the record whose stream time expired it.
	ExpiryNode string
	Expiry     string
}

// deadLetterHeaders are the keys DeadLetter headers use.
var deadLetterHeaders = []string{
	HeaderNode, HeaderError, HeaderStack,
	HeaderSourceTopic, HeaderSourcePartition, HeaderSourceOffset, HeaderSourceTimestamp,
	HeaderExpiryNode, HeaderExpiry,
}

// ParseDeadLetter reads the dead-letter headers of a record, as a
// consumer of a dead-letter topic sees them; ok is false when they do not
// name a source topic (not a dead letter).
func ParseDeadLetter(headers []Header) (dl DeadLetter, ok bool) {
	for _, h := range headers {
		v := string(h.Value)
		switch h.Key {
		case HeaderNode:
			dl.Node = v
		case HeaderError:
			dl.Error = v
		case HeaderStack:
			dl.Stack = v
		case HeaderSourceTopic:
			dl.Topic = v
		case HeaderSourcePartition:
			p, _ := strconv.ParseInt(v, 10, 32)
			dl.Partition = int32(p)
		case HeaderSourceOffset:
			dl.Offset, _ = strconv.ParseInt(v, 10, 64)
		case HeaderSourceTimestamp:
			ms, _ := strconv.ParseInt(v, 10, 64)
			dl.Timestamp = time.UnixMilli(ms)
		case HeaderExpiryNode:
			dl.ExpiryNode = v
		case HeaderExpiry:
			dl.Expiry = v
		}
	}
	return dl, dl.Topic != ""
}

// WithoutDeadLetter returns a copy of headers less those DeadLetter added:
// the record's headers as its source topic held them, for replaying it
// there.
func WithoutDeadLetter(headers []Header) []Header {
	return slices.DeleteFunc(slices.Clone(headers), func(h Header) bool {
		return slices.Contains(deadLetterHeaders, h.Key)
	})
}
