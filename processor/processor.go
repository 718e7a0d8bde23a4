// Package processor is what user code sees of a record in flight: the
// Record type, the per-record Context that Process functions get, and the
// Processor interface for custom nodes with a life cycle (Init, Process,
// Close), in the spirit of Kafka Streams' Processor API. Wire them into a
// pipeline with topology.Process and topology.ProcessWith.
package processor

import (
	"context"
	"time"

	"github.com/eosflow/eosflow/state"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Header is a record header; an alias so records pass to franz-go uncopied.
type Header = kgo.RecordHeader

// Record is a record in flight, its value decoded to T. Topic, Partition and
// Offset name the input record it derives from.
type Record[T any] struct {
	Key       []byte
	Value     T
	Headers   []Header
	Timestamp time.Time
	Topic     string
	Partition int32
	Offset    int64
}

// Context is the handle a Process function gets with each record. As a
// context.Context it is cancelled on shutdown and when the record's input
// partition is revoked: pass it to calls that can block, and return their
// error. A record whose function fails because its context ended is not
// given to the error policy; it is left for the next run (or the
// partition's next owner) instead.
//
// What is emitted for a record reaches the next nodes only if the function
// returns nil: on an error, the record's emits are dropped.
type Context[Out any] interface {
	context.Context
	// Node is the name of the node running.
	Node() string
	// Emit passes r to every node fed by this one. Its Topic, Partition
	// and Offset are set to the input record's, and a zero Timestamp to
	// the input's timestamp.
	Emit(r Record[Out])
	// EmitTo passes r only to the node called child, one fed by this one
	// (as Kafka Streams' forward to a named child); an unknown name is an
	// error listing the children.
	EmitTo(child string, r Record[Out]) error
	// Store is the store called name of the record's task (its input
	// partition), as the batch sees it: reads see the batch's writes,
	// and writes reach the store's changelog in the batch's transaction
	// or, if the batch aborts, nowhere. Only the stores connected to the
	// node (topology.UseStores) can be used; any other name is an error
	// wrapping ErrStoreNotConnected that lists the node's stores. See KV
	// for typed access.
	//
	// When a record is not processed in the end (dead-lettered, skipped,
	// failed, or interrupted by shutdown), the runtime undoes all its
	// store writes. Under Retry, each attempt starts from the state the
	// first one found: the writes of an attempt that failed are undone
	// before the next, so a count is made once however often it is
	// retried.
	Store(name string) (state.RawKV, error)
}

// InitContext is what a Processor gets when its node starts: a context
// that ends when the pipeline stops, and the node's name.
type InitContext interface {
	context.Context
	// Node is the name of the node being started.
	Node() string
}

// Processor is a custom node with a life cycle: Init before its first
// record, Process for each record, Close when the pipeline stops. The
// runtime makes one per running pipeline instance from the function given
// to topology.ProcessWith and never calls one from two goroutines at once.
type Processor[In, Out any] interface {
	// Init prepares the processor; an error stops the pipeline.
	Init(ctx InitContext) error
	// Process handles one record; an error goes to the node's error
	// policy, as in any other node.
	Process(ctx Context[Out], r Record[In]) error
	// Close releases what Init acquired.
	Close() error
}

// Func makes a plain function a Processor whose Init and Close do nothing.
type Func[In, Out any] func(ctx Context[Out], r Record[In]) error

// Init does nothing.
func (f Func[In, Out]) Init(InitContext) error { return nil }

// Process calls f.
func (f Func[In, Out]) Process(ctx Context[Out], r Record[In]) error { return f(ctx, r) }

// Close does nothing.
func (f Func[In, Out]) Close() error { return nil }
