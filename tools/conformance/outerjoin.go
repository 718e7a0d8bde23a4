package conformance

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sync/atomic"
	"testing"
	"time"

	"github.com/eosflow/eosflow/codec"
	"github.com/eosflow/eosflow/eos"
	"github.com/eosflow/eosflow/state"
	"github.com/eosflow/eosflow/tools/kafkatest"
	"github.com/eosflow/eosflow/tools/verdict"
	"github.com/eosflow/eosflow/topology"
)

// outerGrace is the grace of OuterJoinTopology: longer than the event
// times of OuterJoinExactlyOnce span, so that no record expires or is late
// before the closing records, whatever order the two topics are read in.
// It stays far below an hour: Kafka 4 refuses record timestamps more than
// an hour ahead (log.message.timestamp.after.max.ms), and the closing
// records lie beyond it.
const outerGrace = 10 * time.Minute

// OuterJoinTopology outer-joins orders with payments of the same key
// within matchWithin of event time, writing "<order>+<payment>" to out,
// "none" standing for the side without a record.
func OuterJoinTopology(orders, payments, out string, e state.Engine) *topology.Topology {
	top := topology.New()
	ords := topology.Source(top, orders, codec.String(), topology.Named("orders"))
	ps := topology.Source(top, payments, codec.String(), topology.Named("payments"))
	joined := topology.OuterJoinStreams(ords, ps, "match", topology.Within(matchWithin).Grace(outerGrace),
		func(_ context.Context, _ []byte, o, p string, hasO, hasP bool) (string, error) {
			if !hasO {
				o = "none"
			}
			if !hasP {
				p = "none"
			}
			return o + "+" + p, nil
		}, e, codec.String(), codec.String())
	topology.To(joined, out, codec.String(), topology.Named("out"))
	return top
}

// OuterJoinExactlyOnce outer-joins orders with payments, some of which
// have no partner, through the faults of StreamJoinExactlyOnce; then one
// record per partition, far ahead in event time, closes every record's
// window, and the first batch that emits the unmatched records is vetoed:
// it aborts, its instance stops and starts again on a fresh state
// directory, restoring the stores from their changelogs. The committed
// output must hold exactly once each pair within matchWithin, each order
// that joined no payment with "none", and each payment that joined no
// order, as computed from the seed in plain Go: no record that joined
// comes out unmatched, and none is lost. Stores use engine e.
func OuterJoinExactlyOnce(t *testing.T, env *kafkatest.Env, e state.Engine) {
	orders, payments := ordersAndPayments(600, 0, 2)
	pairs, lonelyOrders, lonelyPayments := streamJoinModel(orders, payments, matchWithin)
	want := maps.Clone(pairs)
	for _, o := range lonelyOrders {
		want[o.value+"+none"] = true
	}
	for _, p := range lonelyPayments {
		want["none+"+p.value] = true
	}
	if len(pairs) == 0 || len(lonelyOrders) == 0 || len(lonelyPayments) == 0 {
		t.Fatalf("the seed must give pairs (%d), lonely orders (%d) and lonely payments (%d)", len(pairs), len(lonelyOrders), len(lonelyPayments))
	}
	var veto closingVeto
	f, in1, out := runStreamJoin(t, env, "outer", orders, payments, func(in1, in2, out string) *topology.Topology {
		return OuterJoinTopology(in1, in2, out, e)
	}, veto.option())
	// Nothing has expired yet, the grace outlasting the seed's event
	// times: no record may have come out unmatched.
	onceEach(t, Drain(t, env, out, len(pairs)), pairs)
	veto.armed.Store(true)
	closeAt := orders[len(orders)-1].ts.Add(2*matchWithin + outerGrace + time.Minute)
	var closers []eventRecord
	for p := int32(0); p < streamJoinPartitions; p++ {
		closers = append(closers, eventRecord{partition: p, key: fmt.Sprintf("close-%d", p), ts: closeAt})
	}
	produceEvents(t, env, in1, closers)
	restartVetoed(t, f, "a", "b")
	onceEach(t, Drain(t, env, out, len(want)), want)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if all, err := verdict.DrainAll(ctx, env.ClientOpts(t), out, len(want), 300*time.Millisecond); err != nil || len(all) <= len(want) {
		t.Fatalf("read_uncommitted saw %d records (error %v), no more than committed: the vetoed batch emitted nothing, so the test proves nothing", len(all), err)
	}
	t.Logf("%d pairs, %d lonely orders and %d lonely payments came out exactly once", len(pairs), len(lonelyOrders), len(lonelyPayments))
}

// closingVeto fails the first batch that ends once armed having emitted
// outputs (unmatched records), with errVeto: the batch aborts and its
// runner stops. A batch of a closer whose partition had nothing left to
// expire emitted nothing, and is let through.
type closingVeto struct {
	armed atomic.Bool
	fired atomic.Int32
}

// vetoSendTime is how long the veto lets the batch's outputs reach the
// broker before it aborts the batch: an abort drops the records not sent
// yet, and the scenario checks that read_uncommitted saw some.
const vetoSendTime = 250 * time.Millisecond

// option returns the BeforeCommit option every instance gets.
func (v *closingVeto) option() eos.Option {
	return eos.BeforeCommit(func(_ context.Context, b eos.BatchInfo) error {
		if b.Records > 0 && b.Outputs > 0 && v.armed.Load() && v.fired.CompareAndSwap(0, 1) {
			time.Sleep(vetoSendTime)
			return errVeto
		}
		return nil
	})
}

// restartVetoed waits until one of the last len(instances) runs of f,
// those of instances in order, stops on errVeto after aborting a batch,
// and starts its instance again.
func restartVetoed(t *testing.T, f *fleet, instances ...string) {
	t.Helper()
	live := f.runs[len(f.runs)-len(instances):]
	stopped := -1
	Until(t, 60*time.Second, "an instance to stop on the closing veto", func() bool {
		for i, x := range live {
			select {
			case err := <-x.errc:
				if !errors.Is(err, errVeto) || x.R.Stats().Aborted == 0 {
					t.Fatalf("instance %s stopped with %v, stats %+v; want the injected veto", instances[i], err, x.R.Stats())
				}
				stopped = i
				return true
			default:
			}
		}
		return false
	})
	f.start(instances[stopped])
}
