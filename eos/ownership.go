package eos

import (
	"context"
	"fmt"
	"time"

	"github.com/eosflow/eosflow/config"
	"github.com/eosflow/eosflow/internal/kafkautil"
	"github.com/eosflow/eosflow/state"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"
)

// ownership is what taskStores keeps to check its view of the tasks it
// owns against the group's, since a revoke callback may never come:
// franz-go's transact session passes on only the first revoke or loss
// after an End and drops the rest until the next End ends. At each new
// generation (a classic group's, or a consumer group member's epoch) the
// tasks owned stop being served until the group, described by its
// coordinator, lists them as this member's; those it does not list are
// revoked.
type ownership struct {
	gen     int32 // the generation last seen; genSeen false: none yet
	genSeen bool
	checked bool // the group was described at gen and settled what is owned
	// round counts the times every owned task was unconfirmed: a view
	// of the group described before the latest is not applied.
	round uint64
	// unconfirmed are owned tasks the group has not listed as this
	// member's since the generation changed: they are not served.
	unconfirmed map[state.Task]bool
	// taken are owned tasks the group listed as another member's or
	// none's: not served, and not owned for queries.
	taken map[state.Task]bool
	// holders are the group.instance.ids of the members holding each
	// task, as the group was last described (see KeyLocation.Holder).
	holders map[state.Task]string
}

// groupView is the group as its coordinator described it, seen from one
// member.
type groupView struct {
	// settled: the coordinator lists this member with the assignment of
	// the generation the client is at (a classic group that is Stable, a
	// consumer group member at the same epoch).
	settled bool
	mine    map[state.Task]bool   // the tasks listed as this member's
	holders map[state.Task]string // every listed task's member's group.instance.id
	why     error                 // not settled: the describe's error, or what the coordinator said
}

// describeTimeout bounds describing the group between batches.
const describeTimeout = 5 * time.Second

// genWatchEvery is how often watchGeneration looks at the client's
// generation.
const genWatchEvery = 250 * time.Millisecond

// watchGeneration stops serving the owned tasks as soon as the client's
// group generation changes, until the group confirms them (see
// newGeneration), and ends the batch loop's idle poll whenever a check
// of the group is due, so that an idle instance checks the tasks it owns
// (syncState) within genWatchEvery rather than at its next idle check. A
// revoke franz-go's transact session swallows comes with no callback,
// and on a busy instance the batch loop checks only between batches.
// metadata is the client's GroupMetadata. stop ends the watch and waits
// for it.
func (r *Runner) watchGeneration(metadata func() (string, int32)) (stop func()) {
	quit, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(genWatchEvery)
		defer tick.Stop()
		for {
			select {
			case <-quit:
				return
			case <-tick.C:
			}
			_, gen := metadata()
			r.state.newGeneration(gen)
			if r.state.checkDue(gen) {
				r.idleWake.wake()
			}
		}
	}()
	return func() { close(quit); <-done }
}

// syncState applies the rebalances noted since the last batch, first
// checking the tasks owned against the group when its generation changed
// or the last check did not settle (see reconcile).
func (l *streamLoop) syncState(s session) {
	cl := s.client()
	member, gen := cl.GroupMetadata()
	if l.state.checkDue(gen) {
		round := l.state.newGeneration(gen)
		v := l.viewGroup(cl, member, gen)
		l.state.confirm(round, v)
		l.unsettled.note(time.Now(), v, gen, l.cfg.AppID, l.log)
	}
	l.state.sync()
}

// unsettledWarnAfter is how long a check of the group may stay unsettled
// before the log says so; unsettledWarnEvery spaces the warnings after.
const (
	unsettledWarnAfter = 5 * time.Second
	unsettledWarnEvery = 30 * time.Second
)

// unsettledGroup tracks checks of the group that did not settle: while
// they do not, every owned task answers queries with ErrAwaitingGroup,
// which an operator can only tell from the log.
type unsettledGroup struct {
	since, warned time.Time // zero: settled; zero warned: not logged yet
}

// note records a check at now that saw v, logging a warning once the
// checks have not settled for unsettledWarnAfter, then at most every
// unsettledWarnEvery, and when they settle again after one.
func (u *unsettledGroup) note(now time.Time, v groupView, gen int32, group string, log *zap.Logger) {
	switch {
	case v.settled:
		if !u.warned.IsZero() {
			log.Info("the group's coordinator confirmed this member's assignment; its partitions answer queries again once caught up",
				zap.String("group", group), zap.Int32("generation", gen), zap.Duration("unsettled_for", now.Sub(u.since).Round(time.Second)))
		}
		*u = unsettledGroup{}
		return
	case u.since.IsZero():
		u.since = now
		return
	case now.Sub(u.since) < unsettledWarnAfter, !u.warned.IsZero() && now.Sub(u.warned) < unsettledWarnEvery:
		return
	}
	u.warned = now
	log.Warn("the group's coordinator has not confirmed this member's assignment; queries of its partitions answer ErrAwaitingGroup (restoring) until it does: check the brokers and the group with `eosctl group lag "+group+"`",
		zap.String("group", group), zap.Int32("generation", gen), zap.Duration("unsettled_for", now.Sub(u.since).Round(time.Second)), zap.Error(v.why))
}

// viewGroup describes the group for member at generation gen; not
// settled when the coordinator cannot say.
func (l *streamLoop) viewGroup(cl *kgo.Client, member string, gen int32) groupView {
	ctx, cancel := context.WithTimeout(context.Background(), describeTimeout)
	defer cancel()
	g, err := kafkautil.DescribeGroup(ctx, cl, l.cfg.AppID)
	if err != nil {
		return groupView{why: fmt.Errorf("describing the group: %w", err)}
	}
	return l.state.view(g, member, gen)
}

// view is g seen from member at generation gen.
func (ts *taskStores) view(g kafkautil.Group, member string, gen int32) groupView {
	v := groupView{mine: map[state.Task]bool{}, holders: map[state.Task]string{},
		why: fmt.Errorf("the coordinator does not list member %s", member)}
	for _, m := range g.Members {
		for topic, parts := range m.Assigned {
			for _, p := range parts {
				t := ts.task(topic, p)
				v.holders[t] = m.InstanceID
				if m.MemberID == member {
					v.mine[t] = true
				}
			}
		}
		if m.MemberID != member {
			continue
		}
		switch g.Protocol {
		case config.GroupProtocolConsumer:
			v.settled = m.Epoch == gen
			v.why = fmt.Errorf("the coordinator lists this member at epoch %d, the client is at %d", m.Epoch, gen)
		default:
			v.settled = g.State == "Stable"
			v.why = fmt.Errorf("the group is %s, not Stable", g.State)
		}
	}
	if v.settled {
		v.why = nil
	}
	return v
}

// checkDue reports whether reconcile must run at generation gen: it
// changed, or the last check did not settle. Before a first join (gen
// < 0) nothing is owned to check.
func (ts *taskStores) checkDue(gen int32) bool {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	return gen >= 0 && (!ts.owner.genSeen || gen != ts.owner.gen || !ts.owner.checked)
}

// reconcile checks the tasks owned against v, the group described at
// generation gen (newGeneration, then confirm).
func (ts *taskStores) reconcile(gen int32, v groupView) {
	ts.confirm(ts.newGeneration(gen), v)
}

// newGeneration notes the client's generation gen: when it changed, every
// owned task stops being served until confirm finds it listed as this
// member's. It returns the round to confirm. The generation watch calls
// it from its own goroutine, so a busy instance stops serving at once
// rather than when the batch under way ends.
func (ts *taskStores) newGeneration(gen int32) (round uint64) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if !ts.owner.genSeen || gen != ts.owner.gen {
		ts.unconfirmAll(gen)
	}
	return ts.owner.round
}

// newAssignment is newGeneration for an assignment the client just took,
// whether or not its generation changed: under the consumer protocol a
// member told to give partitions up keeps its epoch until it has.
func (ts *taskStores) newAssignment(gen int32) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	ts.unconfirmAll(gen)
}

// unconfirmAll stops serving every owned task until the group, described
// after this, lists it as this member's; ts.mu is held.
func (ts *taskStores) unconfirmAll(gen int32) {
	ts.owner.gen, ts.owner.genSeen, ts.owner.checked = gen, true, false
	ts.owner.round++
	for t := range ts.own {
		ts.owner.unconfirmed[t] = true
		ts.serve.drop(t)
	}
}

// confirm applies v, the group described since round began: a settled
// view serves again the tasks it lists as this member's (once caught
// up) and marks the others taken. A task assigned since the last sync
// that the view does not list yet waits for the next check. A view of a
// round since overtaken (a new generation or assignment seen while the
// group was described) is dropped: the check is due again.
func (ts *taskStores) confirm(round uint64, v groupView) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if round != ts.owner.round || !v.settled {
		return
	}
	ts.owner.checked = true
	ts.owner.holders = v.holders
	for t := range ts.own {
		switch {
		case v.mine[t]:
			delete(ts.owner.unconfirmed, t)
			delete(ts.owner.taken, t)
			if ts.ready[t] && !ts.assigned[t] && ts.open[t] != nil {
				ts.serve.add(t, ts.open[t])
			}
		case ts.assigned[t]:
			ts.owner.checked = false
		default:
			ts.serve.drop(t)
			ts.owner.taken[t] = true
			delete(ts.owner.unconfirmed, t)
		}
	}
}

// holder is the group.instance.id of the member the group last listed
// as holding t, "" when none was.
func (ts *taskStores) holder(t state.Task) string {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	return ts.owner.holders[t]
}

// forgetOwnership resets what reconcile learnt of task t (nil: of every
// task), which a callback or a new client just settled.
func (ts *taskStores) forgetOwnership(t *state.Task) {
	if t == nil {
		ts.owner.genSeen, ts.owner.checked = false, false
		ts.owner.round++
		clear(ts.owner.unconfirmed)
		clear(ts.owner.taken)
		ts.owner.holders = nil
		return
	}
	delete(ts.owner.unconfirmed, *t)
	delete(ts.owner.taken, *t)
}
