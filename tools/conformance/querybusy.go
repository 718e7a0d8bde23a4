package conformance

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/eosflow/eosflow/config"
	"github.com/eosflow/eosflow/eos"
	"github.com/eosflow/eosflow/state"
	"github.com/eosflow/eosflow/tools/kafkatest"
	"github.com/eosflow/eosflow/tools/verdict"
)

// busyHook is a BeforeCommit hook that, while held, keeps the batch
// under way busy until release (at most a minute), ignoring its context,
// which a revoke cancels, as user code busy elsewhere would.
type busyHook struct {
	held    atomic.Bool
	entered chan struct{} // a held batch is busy
	release chan struct{}
	once    sync.Once
}

func newBusyHook() *busyHook {
	return &busyHook{entered: make(chan struct{}, 1), release: make(chan struct{})}
}

func (h *busyHook) option() eos.Option {
	return eos.BeforeCommit(func(context.Context, eos.BatchInfo) error {
		if h.held.Load() {
			select {
			case h.entered <- struct{}{}:
			default:
			}
			select {
			case <-h.release:
			case <-time.After(time.Minute):
			}
		}
		return nil
	})
}

func (h *busyHook) free() { h.once.Do(func() { h.held.Store(false); close(h.release) }) }

// QueriesOnBusyInstance keeps instance a busy in one batch under group
// protocol gp, records arriving all along, while b joins and then c: a's
// second revoke comes before its next End, and franz-go's transact
// session swallows it. Every instance is queried for every key all
// along. No answer, on any instance, is smaller than one that ended
// before it started: a, in the middle of its batch, never answers for a
// partition another instance already counted past it. It fails t also
// unless a answered values before b joined and c answered values while
// a was busy.
func QueriesOnBusyInstance(t *testing.T, env *kafkatest.Env, gp config.GroupProtocol) {
	names := topics(t, env, 6, "in", "out")
	in, out := names[0], names[1]
	app := env.Name("busy")
	const keys = 24
	var keyNames []string
	for i := range keys {
		keyNames = append(keyNames, string(verdict.Key(i, keys)))
	}
	cfg := env.Config(app, "a", config.ExactlyOnce)
	cfg.GroupProtocol = gp
	tally := newAnswers()
	stopQueries := make(chan struct{})
	var waits []func()
	start := func(id string, opts ...eos.Option) *Run {
		c := cfg
		c.InstanceID, c.StateDir = id, t.TempDir()
		r := Start(t, c, CountTopology(in, out, state.Memory()), opts...)
		waits = append(waits, queryAll(t, id, r.R, keyNames, stopQueries, tally))
		return r
	}
	hook := newBusyHook()
	defer hook.free()
	a := start("a", hook.option())
	WaitAssigned(t, env, app, "a")
	produced := map[string]int64{}
	stop := sync.OnceFunc(produce(t, env.Client(t), in, keys, produced))
	defer stop()
	a.WaitCommitted(t, 20, 60*time.Second)
	hook.held.Store(true)
	<-hook.entered
	busy := time.Now()
	start("b")
	WaitAssigned(t, env, app, "b")
	c := start("c")
	WaitAssigned(t, env, app, "c")
	c.WaitCommitted(t, 50, 60*time.Second)
	time.Sleep(time.Second) // c counts on while a is still busy
	hook.free()
	a.WaitCommitted(t, a.R.Stats().RecordsIn+1, 60*time.Second)
	stop()
	close(stopQueries)
	for _, wait := range waits {
		wait()
	}
	tally.checkHistory(t)
	if n := tally.count("a", time.Time{}, busy); n == 0 {
		t.Fatal("a answered no value before it was busy: nothing it served could go stale")
	}
	if n := tally.count("c", busy, time.Now()); n == 0 {
		t.Fatal("c answered no value: nothing could show a's answers stale")
	}
}

// count is how many values who answered between from and to.
func (a *answers) count(who string, from, to time.Time) (n int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, h := range a.history {
		for _, x := range h {
			if x.who == who && x.value > 0 && x.end.After(from) && x.end.Before(to) {
				n++
			}
		}
	}
	return n
}
