// Package graph is the seam between a topology and the engine that runs
// it: package topology compiles its typed nodes into a Graph of plain
// functions and data, and internal/engine calls them. Keeping the seam
// internal leaves users one way to write a pipeline (package topology) and
// one way to write custom logic (package processor).
package graph

import (
	"context"
	"time"

	"github.com/eosflow/eosflow/internal/store"

	"github.com/eosflow/eosflow/state"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Exec is the engine side of a node call.
type Exec interface {
	// Context is the context of the record being processed: cancelled on
	// shutdown and when its partition is revoked.
	Context() context.Context
	// Enter records that user code of node is about to run, so a panic
	// can be attributed to it.
	Enter(node int)
	// Retry reports whether node should be called again after its
	// attempt'th call (0-based) failed with err, having waited as its
	// policy says.
	Retry(node int, attempt int, err error) bool
	// Attempt is called before each call of the user code of node that
	// can write stores, attempt counting from 0: a later attempt first
	// has the store writes of the attempts before it undone, so that
	// each starts from the state the first one found.
	Attempt(node int, attempt int)
	// Emit buffers a sink's output until the whole input record succeeds.
	Emit(node int, out Output) error
	// EmitRecord is Emit of an output the sink built itself, for a topic
	// that is not internal; it saves copying the output twice. The
	// engine owns r from then on.
	EmitRecord(node int, r *kgo.Record) error
	// Slot is what node's Init returned in this engine.
	Slot(node int) any
	// Partitions is the partition count of an output topic.
	Partitions(topic string) (int32, error)
	// Store is the store called name of the current record's task (its
	// input partition), restored and with the batch's overlay.
	Store(name string) (*store.Store, error)
	// Global is the global table called name, as the batch sees it: the
	// same for every task, changed only between batches.
	Global(name string) (GlobalStore, error)
	// Hold keeps run, the update an aggregation made of key for the
	// current record's task, to be run at the end of the batch instead of
	// now (topology.LatestPerCommit): a later Hold by node of the same
	// task and key replaces it, so only a key's last update runs. Like an
	// output, it is kept only if the whole record succeeds.
	Hold(node int, key []byte, run func(Exec) error)
	// Expire runs emit, the emission of an expired entry x, as a unit of
	// work of its own inside the current record's: a failure in it is
	// charged to x under the failing node's final policy (Skip drops it,
	// DeadLetter dead-letters x itself), and whatever emit emitted, held
	// or wrote before failing is undone, so that the record goes on. It
	// returns nil when x was emitted or settled, and the caller then
	// removes x from its store in the same record; an error (the Fail
	// policy, or a failure after the context ended) fails the record.
	Expire(x Expiry, emit func() error) error
}

// AnyPartition in Output.Partition lets the producer choose the partition
// from the key.
const AnyPartition int32 = -1

// Output is what a sink hands to the engine to produce.
type Output struct {
	Topic     string
	Partition int32 // AnyPartition: Kafka's murmur2 hash of the key
	Key       []byte
	Value     []byte
	Headers   []kgo.RecordHeader
	Timestamp time.Time
	// Internal says Topic is the suffix of one of the app's internal
	// topics: the engine writes to "<app_id>-<Topic>".
	Internal bool
}

// Source runs one input record through the graph from a source node.
type Source func(Exec, *kgo.Record) error

// Node is what the engine knows of a node.
type Node struct {
	Name   string
	Policy Policy // its own, else the topology's default
	// Late, when set, is the policy for a record the node found late
	// (an error matching topology.ErrLate) instead of Policy.
	Late *Policy
	// Init, when set, makes the node's per-engine state (its Slot) before
	// the first record; Close releases it when the engine stops.
	Init  func(ctx context.Context) (slot any, err error)
	Close func(slot any) error
}

// Store is a state store the topology declares. Its tasks are the
// partitions of Source: the input topic whose records reach the nodes that
// use it or, when records of several topics do, the first of their
// co-partitioned group (see Graph.TaskTopics). Its changelog has as many
// partitions.
type Store struct {
	Name   string
	Engine state.Engine
	Source string
}

// Global is a global table the topology declares: every instance reads
// all of Topic into a store of Engine called Name, outside the consumer
// group, with no changelog.
type Global struct {
	Name   string
	Topic  string
	Engine state.Engine
}

// GlobalStore is what a join reads of a global table.
type GlobalStore interface {
	// Get returns key's row, and whether the table has one.
	Get(key []byte) (value []byte, ok bool, err error)
}

// Repartition is an internal topic through which records are re-keyed:
// written by one sub-topology and read as a source by another.
type Repartition struct {
	Topic string // resolved with the app id
	// Partitions is the count to create it with; 0 means as many as the
	// largest of From, the input topics upstream of the writing node.
	Partitions int32
	From       []string
}

// Graph is a compiled topology.
type Graph struct {
	Stores       []Store
	Repartitions []Repartition
	// Globals lists the global tables, each read whole by every engine's
	// runtime.
	Globals []Global
	// CoPartitioned lists the groups of input topics whose partitions
	// of one number form one task, because a store is used from records
	// of each (a join's stream and table): they must have as many
	// partitions, and partition p of each must go to the same instance.
	// Each group is sorted; its first topic names the task.
	CoPartitioned [][]string
	// TaskTopics maps each topic of a co-partitioned group to the topic
	// that names its tasks, the group's first.
	TaskTopics map[string]string
	Nodes      []Node
	Sources    map[string]Source // by input topic
	Default    Policy
	// Partitioned says a sink chooses its own partitions (Output.Partition
	// is not always AnyPartition).
	Partitioned bool
	// Holds says a node may call Exec.Hold, which needs the input record.
	Holds bool
	// Cursor is shared by the engine and the fused chains compiled into
	// Sources; each compiled Graph has its own.
	Cursor *Cursor
}

// Cursor is the state of the call in progress that the engine and the
// fused chains of a compiled graph share, so that a fused node reads and
// sets it with a plain field access instead of an Exec call per node.
type Cursor struct {
	// Node is the index of the node whose user code runs, set before it
	// runs so a panic can be attributed to it (what Exec.Enter sets).
	Node int
	// Ctx is the context of the record being processed (what
	// Exec.Context returns).
	Ctx context.Context
}

// Compile turns a validated *topology.Topology into a Graph for the app
// whose id is appID, which names the internal topics. Package topology
// sets it when it is initialized, so that the engine can reach what the
// topology keeps unexported.
var Compile func(topology any, appID string) (*Graph, error)
