package topology

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/eosflow/eosflow/internal/store"

	"github.com/eosflow/eosflow/internal/graph"
	"github.com/eosflow/eosflow/processor"
	"github.com/eosflow/eosflow/state"
)

// Process runs fn for each record with the whole record at hand (key,
// value, headers, timestamp, source partition and offset) and a
// processor.Context to emit any number of records with. If fn fails, what
// it emitted for that record is dropped and the node's error policy
// applies. With UseStores, fn reads and writes state stores through ctx.
func Process[In, Out any](s Stream[In], name string, fn func(ctx processor.Context[Out], r Record[In]) error, opts ...ProcessOption) Stream[Out] {
	return process(s, name, "Process", fn == nil, func() processor.Processor[In, Out] { return processor.Func[In, Out](fn) }, opts)
}

// ProcessWith runs a custom processor.Processor. newProcessor is called
// once per running pipeline instance, before its first record; Init runs
// then, and Close when the pipeline stops. An Init error stops the
// pipeline before anything is consumed. With UseStores, the processor
// reads and writes state stores through the Context of each record (not
// in Init: a store belongs to the task of the record at hand).
func ProcessWith[In, Out any](s Stream[In], name string, newProcessor func() processor.Processor[In, Out], opts ...ProcessOption) Stream[Out] {
	return process(s, name, "ProcessWith", newProcessor == nil, newProcessor, opts)
}

// procState is one engine's instance of a Process node.
type procState[In, Out any] struct {
	proc   processor.Processor[In, Out]
	ctx    procCtx[Out]
	timers timerSet // scheduled in Init; see timer.go
}

// procCtx implements processor.Context; it is reused for every record.
type procCtx[Out any] struct {
	context.Context
	node string
	port *port[Out]
	out  []emitted[Out]
	x    graph.Exec // the engine running the record
	// stores are the node's connected stores; views are the typed
	// views processor.KV made of them.
	stores []string
	views  map[string]any
	// The input record's coordinates and timestamp, given to what it
	// emits.
	topic     string
	partition int32
	offset    int64
	timestamp time.Time
}

// derive sets what an emitted record takes from the input record.
func (c *procCtx[Out]) derive(r Record[Out]) Record[Out] {
	r.Topic, r.Partition, r.Offset = c.topic, c.partition, c.offset
	if r.Timestamp.IsZero() {
		r.Timestamp = c.timestamp
	}
	return r
}

// emitted is one Emit (to == "") or EmitTo.
type emitted[Out any] struct {
	to string
	r  Record[Out]
}

func (c *procCtx[Out]) Node() string { return c.node }

func (c *procCtx[Out]) Emit(r Record[Out]) { c.out = append(c.out, emitted[Out]{r: c.derive(r)}) }

func (c *procCtx[Out]) EmitTo(child string, r Record[Out]) error {
	if child == "" || !c.port.has(child) {
		return fmt.Errorf("EmitTo(%q): no such node fed by %q; its children are: %s", child, c.node, c.port.names())
	}
	c.out = append(c.out, emitted[Out]{to: child, r: c.derive(r)})
	return nil
}

// Store implements processor.Context: the connected store name of the
// record's task.
func (c *procCtx[Out]) Store(name string) (state.RawKV, error) {
	if !slices.Contains(c.stores, name) {
		if len(c.stores) == 0 {
			return nil, fmt.Errorf("%w: store %q: node %q has no stores; connect it with topology.UseStores(%q)",
				processor.ErrStoreNotConnected, name, c.node, name)
		}
		return nil, fmt.Errorf("%w: store %q: node %q uses only [%s]; connect it with topology.UseStores(%q)",
			processor.ErrStoreNotConnected, name, c.node, strings.Join(c.stores, ", "), name)
	}
	s, err := taskStore(c.x, name)
	if err != nil {
		return nil, err // not a nil *store.Store inside a non-nil RawKV
	}
	return s, nil
}

// StoreViews keeps the typed views processor.KV makes.
func (c *procCtx[Out]) StoreViews() map[string]any {
	if c.views == nil {
		c.views = map[string]any{}
	}
	return c.views
}

// taskStore is the store called name of the record's task.
func taskStore(x graph.Exec, name string) (*store.Store, error) {
	s, err := x.Store(name)
	if err == nil && s == nil {
		err = fmt.Errorf("store %q: the runtime has no store of that name for this record's task", name)
	}
	return s, err
}

type initCtx struct {
	context.Context
	node     string
	schedule func(processor.TimerKind, time.Duration, any) error
}

func (c initCtx) Node() string { return c.node }

// ScheduleTimer is how processor.Schedule reaches the node.
func (c initCtx) ScheduleTimer(kind processor.TimerKind, interval time.Duration, fn any) error {
	return c.schedule(kind, interval, fn)
}

var errNotStarted = errors.New("processor not started: the engine did not initialize this node")

func process[In, Out any](s Stream[In], name, op string, isNil bool, newProc func() processor.Processor[In, Out], opts []ProcessOption) Stream[Out] {
	var conf procConf
	for _, o := range opts {
		if o != nil {
			o.applyProcess(&conf)
		}
	}
	p := &port[Out]{}
	n := attach(s, name, KindProcessor, op, func(n *Node) func(graph.Exec, Record[In]) error {
		return func(x graph.Exec, r Record[In]) error {
			st, _ := x.Slot(n.index).(*procState[In, Out])
			if st == nil {
				return &NodeError{Node: n.name, Err: errNotStarted}
			}
			for attempt := 0; ; attempt++ {
				x.Enter(n.index)
				if len(n.stores) > 0 {
					x.Attempt(n.index, attempt)
				}
				st.ctx.Context, st.ctx.out, st.ctx.x = x.Context(), st.ctx.out[:0], x
				st.ctx.topic, st.ctx.partition, st.ctx.offset, st.ctx.timestamp = r.Topic, r.Partition, r.Offset, r.Timestamp
				err := st.proc.Process(&st.ctx, r)
				if err == nil {
					break
				}
				if !x.Retry(n.index, attempt, err) {
					return &NodeError{Node: n.name, Err: err}
				}
			}
			// The graph is acyclic, so pushing cannot re-enter this node
			// and reuse st.ctx.out before the loop is done.
			for _, e := range st.ctx.out {
				var err error
				if e.to == "" {
					err = p.push(x, e.r)
				} else {
					err = p.pushTo(x, e.to, e.r)
				}
				if err != nil {
					return err
				}
			}
			return nil
		}
	})
	t := s.topology()
	t.nilFunc(n, isNil)
	if n != nil {
		n.stores = conf.stores
	}
	declareTimers(t, n, &conf)
	if n != nil && !isNil {
		n.init = func(ctx context.Context) (any, error) {
			proc := newProc()
			if proc == nil {
				return nil, &NodeError{Node: name, Err: errors.New("ProcessWith's function returned a nil processor")}
			}
			st := &procState[In, Out]{proc: proc, ctx: procCtx[Out]{node: name, port: p, stores: n.stores}}
			if err := proc.Init(initCtx{ctx, name, st.scheduler(n, p, conf.timers)}); err != nil {
				return nil, &NodeError{Node: name, Err: fmt.Errorf("init: %w", err)}
			}
			return st, nil
		}
		n.close = func(v any) error {
			if st, ok := v.(*procState[In, Out]); ok {
				return st.proc.Close()
			}
			return nil
		}
	}
	return Stream[Out]{n: n, p: p}
}
