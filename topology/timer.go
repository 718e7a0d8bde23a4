package topology

import (
	"fmt"
	"slices"
	"time"

	"github.com/eosflow/eosflow/internal/graph"
	"github.com/eosflow/eosflow/processor"
	"github.com/eosflow/eosflow/state"
)

// Timers lets a ProcessWith node schedule timers (processor.Schedule) in
// its processor's Init, overriding the default of none. It declares the
// node's timer store, TimerStore(node), in memory: per task it keeps the
// task's stream time and each wall-clock timer's last firing, written in
// the same transactions as the node's outputs, so that timers fire exactly
// once relative to what committed. Like any store it needs the node fed by
// one input topic (its tasks are that topic's partitions), and a guarantee
// that writes changelogs (not at-most-once). The node may read the store
// like its others; writing it would change when its timers fire.
func Timers() ProcessOption { return procOpt(func(c *procConf) { c.timers = true }) }

// TimerStore names the store that keeps the timer state of node (see
// Timers); its changelog is ChangelogTopic(appID, TimerStore(node)).
func TimerStore(node string) string { return node + "-timers" }

// declareTimers declares the timer store of n, when conf asks for timers.
func declareTimers(t *Topology, n *Node, conf *procConf) {
	if n == nil || !conf.timers {
		return
	}
	name := TimerStore(n.name)
	t.declareStore(name, state.Memory(), n)
	n.stores = append(slices.Clip(n.stores), name)
}

// timerSet is what a node's Init scheduled.
type timerSet struct {
	store  string // "" without the Timers option
	timers []graph.Timer
}

// Timers implements graph.Timed.
func (st *procState[In, Out]) Timers() (string, []graph.Timer) {
	return st.timers.store, st.timers.timers
}

// scheduler returns what the node's InitContext calls for
// processor.Schedule: it checks the callback's type and keeps the timer.
func (st *procState[In, Out]) scheduler(n *Node, p *port[Out], timers bool) func(processor.TimerKind, time.Duration, any) error {
	return func(kind processor.TimerKind, interval time.Duration, f any) error {
		fn, ok := f.(processor.TimerFunc[Out])
		if !ok {
			return fmt.Errorf("processor.Schedule on node %q: the callback is a %T, but the node emits %T records: "+
				"its callback must be a func(processor.Context[%T], time.Time) error", n.name, f, *new(Out), *new(Out))
		}
		if !timers {
			return fmt.Errorf("processor.Schedule on node %q: the node keeps no timer state; add topology.Timers() to its ProcessWith options", n.name)
		}
		st.timers.store = TimerStore(n.name)
		st.timers.timers = append(st.timers.timers, graph.Timer{
			WallClock: kind == processor.WallClock,
			Interval:  interval,
			Fire:      st.fire(n, p, fn),
		})
		return nil
	}
}

// fire runs fn for one task, retrying as the node's policy says, and passes
// its emits on once it succeeds, as the node does for a record.
func (st *procState[In, Out]) fire(n *Node, p *port[Out], fn processor.TimerFunc[Out]) func(graph.Exec, graph.Tick) error {
	return func(x graph.Exec, t graph.Tick) error {
		for attempt := 0; ; attempt++ {
			x.Enter(n.index)
			x.Attempt(n.index, attempt)
			st.ctx.Context, st.ctx.out, st.ctx.x = x.Context(), st.ctx.out[:0], x
			st.ctx.topic, st.ctx.partition, st.ctx.offset, st.ctx.timestamp = t.Topic, t.Partition, t.Offset, t.Now
			err := fn(&st.ctx, t.Now)
			if err == nil {
				break
			}
			if !x.Retry(n.index, attempt, err) {
				return &NodeError{Node: n.name, Err: err}
			}
		}
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
}
