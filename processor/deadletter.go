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
	// The Expiry fields are set, and the source fields above left zero,
	// when the dead letter is an expired entry rather than an input record
	// (see HeaderExpiryNode), which cannot be replayed: the join or window
	// node, what expired, and the record whose stream time expired it.
	ExpiryNode            string
	ExpiryWhat            string
	ExpirySourceTopic     string
	ExpirySourcePartition int32
	ExpirySourceOffset    int64
	ExpirySourceTimestamp time.Time
}

// deadLetterHeaders are the keys DeadLetter headers use.
var deadLetterHeaders = []string{
	HeaderNode, HeaderError, HeaderStack,
	HeaderSourceTopic, HeaderSourcePartition, HeaderSourceOffset, HeaderSourceTimestamp,
	HeaderExpiryNode, HeaderExpiryWhat,
	HeaderExpirySourceTopic, HeaderExpirySourcePartition, HeaderExpirySourceOffset, HeaderExpirySourceTimestamp,
}

// ParseDeadLetter reads the dead-letter headers of a record, as a
// consumer of a dead-letter topic sees them; ok is false when they name
// neither a source topic nor an expiry node (not a dead letter). Only a
// letter with a Topic can be replayed: an expired entry's has none.
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
			dl.Partition = parsePartition(v)
		case HeaderSourceOffset:
			dl.Offset, _ = strconv.ParseInt(v, 10, 64)
		case HeaderSourceTimestamp:
			dl.Timestamp = parseMillis(v)
		case HeaderExpiryNode:
			dl.ExpiryNode = v
		case HeaderExpiryWhat:
			dl.ExpiryWhat = v
		case HeaderExpirySourceTopic:
			dl.ExpirySourceTopic = v
		case HeaderExpirySourcePartition:
			dl.ExpirySourcePartition = parsePartition(v)
		case HeaderExpirySourceOffset:
			dl.ExpirySourceOffset, _ = strconv.ParseInt(v, 10, 64)
		case HeaderExpirySourceTimestamp:
			dl.ExpirySourceTimestamp = parseMillis(v)
		}
	}
	return dl, dl.Topic != "" || dl.ExpiryNode != ""
}

func parsePartition(v string) int32 {
	p, _ := strconv.ParseInt(v, 10, 32)
	return int32(p)
}

func parseMillis(v string) time.Time {
	ms, _ := strconv.ParseInt(v, 10, 64)
	return time.UnixMilli(ms)
}

// WithoutDeadLetter returns a copy of headers less those DeadLetter added:
// the record's headers as its source topic held them, for replaying it
// there.
func WithoutDeadLetter(headers []Header) []Header {
	return slices.DeleteFunc(slices.Clone(headers), func(h Header) bool {
		return slices.Contains(deadLetterHeaders, h.Key)
	})
}
