package chaos

import (
	"strconv"
	"time"

	"github.com/eosflow/eosflow/codec"
	"github.com/eosflow/eosflow/processor"
	"github.com/eosflow/eosflow/state"
	"github.com/eosflow/eosflow/topology"
)

// The timer pipeline's names and intervals.
const (
	// FiresStore is the store where TimerPipeline counts each task's
	// firings, per kind; its changelog is
	// topology.ChangelogTopic(app, FiresStore).
	FiresStore = "verify-fires"
	// TimerNode is the node that schedules the timers.
	TimerNode = "tick"
	// StreamEvery is the stream-time timer's interval: small against the
	// input's timestamps, so that most records move stream time past one.
	StreamEvery = time.Millisecond
	// WallEvery is the wall-clock timer's interval.
	WallEvery = 25 * time.Millisecond
)

// The kinds of firing, as the key of a firing's record and of its count.
const (
	StreamFire = "stream"
	WallFire   = "wall"
)

// TimerPipeline copies every record of in to out, and fires two timers per
// task: a stream-time one every StreamEvery and a wall-clock one every
// WallEvery. Each firing adds one to its kind's count in the task's store
// FiresStore (engine e) and writes the new count to fired, keyed by its
// kind, to its task's partition (fired has as many partitions as in).
// So, exactly once, each task's counts of each kind run 1, 2, … n with
// none repeated, and the store's changelog ends at n.
// before runs ahead of each record and onFire ahead of each firing; nil
// skips them.
func TimerPipeline(in, out, fired string, e state.Engine, before, onFire func()) *topology.Topology {
	top := topology.New()
	top.AddStore(FiresStore, e)
	src := topology.Source(top, in, codec.Bytes(), topology.Named("input"))
	ticks := topology.ProcessWith(src, TimerNode, func() processor.Processor[[]byte, []byte] {
		return &ticker{before: before, onFire: onFire}
	}, topology.UseStores(FiresStore), topology.Timers())
	topology.To(ticks, out, codec.Bytes(), topology.Named("output"))
	// A firing's record carries its task's partition: fired keeps it, so
	// that each task's counts are read in their order.
	topology.To(ticks, fired, codec.Bytes(), topology.Partitioner(func(r topology.Record[[]byte], _ int32) int32 { return r.Partition }), topology.Named("fired"))
	return top
}

// FireKey names a task's firings of kind, as a judge keys them.
func FireKey(kind string, partition int32) string {
	return kind + "/" + strconv.Itoa(int(partition))
}

// ticker is TimerPipeline's processor.
type ticker struct{ before, onFire func() }

// Init schedules both timers.
func (t *ticker) Init(ctx processor.InitContext) error {
	if err := processor.Schedule(ctx, processor.StreamTime, StreamEvery, t.fire(StreamFire)); err != nil {
		return err
	}
	return processor.Schedule(ctx, processor.WallClock, WallEvery, t.fire(WallFire))
}

// Process copies the record to out.
func (t *ticker) Process(ctx processor.Context[[]byte], r processor.Record[[]byte]) error {
	if t.before != nil {
		t.before()
	}
	return ctx.EmitTo("output", processor.Record[[]byte]{Key: r.Key, Value: r.Value})
}

// Close has nothing to release.
func (t *ticker) Close() error { return nil }

// fire counts a firing of kind in the task's store and reports the count.
func (t *ticker) fire(kind string) processor.TimerFunc[[]byte] {
	return func(ctx processor.Context[[]byte], _ time.Time) error {
		if t.onFire != nil {
			t.onFire()
		}
		// Count's own codec, so that one fold reads both pipelines' changelogs.
		fires, err := processor.KV(ctx, FiresStore, codec.String(), codec.Int64())
		if err != nil {
			return err
		}
		n, _, err := fires.Get(kind)
		if err != nil {
			return err
		}
		if err := fires.Put(kind, n+1); err != nil {
			return err
		}
		return ctx.EmitTo("fired", processor.Record[[]byte]{Key: []byte(kind), Value: strconv.AppendInt(nil, n+1, 10)})
	}
}
