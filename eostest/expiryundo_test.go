package eostest_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/eosflow/eosflow/codec"
	"github.com/eosflow/eosflow/eostest"
	"github.com/eosflow/eosflow/state"
	"github.com/eosflow/eosflow/topology"
)

// errUnpaid is what the branch "check" after fannedJoin's join returns
// for an order that expired without a payment.
var errUnpaid = errors.New("an unpaid order")

// fannedJoin outer-joins orders with payments and sends each result to
// the topic "matched" first, then through the node "check", which fails
// for an unmatched "bad" order under Skip, to "checked". With latest the
// results are also counted per key under LatestPerCommit, the updates
// held back to the end of the batch, to "counts".
func fannedJoin(latest bool) *topology.Topology {
	top := topology.New()
	orders := topology.Source(top, "orders", codec.String())
	payments := topology.Source(top, "payments", codec.String())
	matched := topology.OuterJoinStreams(orders, payments, "match", topology.Within(10*time.Second).Grace(5*time.Second),
		func(_ context.Context, _ []byte, o, p string, hasO, hasP bool) (string, error) {
			return orNone(o, hasO) + "+" + orNone(p, hasP), nil
		}, state.Memory(), codec.String(), codec.String())
	topology.To(matched, "matched", codec.String(), topology.Named("out"))
	if latest {
		counts := topology.Count(topology.GroupByKey(matched, "by-order"), "per-order", state.Memory(), topology.LatestPerCommit())
		topology.To(topology.ToStream(counts, "updates"), "counts", codec.JSON[int64](), topology.Named("counts-out"))
	}
	checked := topology.MapValues(matched, "check", func(_ context.Context, v string) (string, error) {
		if v == "bad+none" {
			return "", errUnpaid
		}
		return v, nil
	})
	topology.To(checked, "checked", codec.String(), topology.Named("checked-out"))
	top.OnError("check", topology.Skip())
	return top
}

// readPairs reads topic's records as key=value.
func readPairs(d *eostest.Driver, topic string) []string {
	var got []string
	for _, r := range eostest.Output(d, topic, codec.String()).ReadAll() {
		got = append(got, fmt.Sprintf("%s=%s", r.Key, r.Value))
	}
	return got
}

// An output a sink already emitted for an unmatched record is undone when
// a later branch fails for that record: the record is dropped everywhere,
// while the record that expired it and the later ones go out as usual.
func TestUnmatchedFailureUndoesOutputsAlreadyEmitted(t *testing.T) {
	d := eostest.New(t, fannedJoin(false))
	outerJoinSteps(t, d)
	want := []string{"o2=order2+pay2", "o3=order3+pay3"}
	for _, topic := range []string{"matched", "checked"} {
		got := readPairs(d, topic)
		if slices.Contains(got, "o1=bad+none") || !containsAll(got, want) {
			t.Errorf("%s: %v, want %v and no o1=bad+none", topic, got, want)
		}
	}
	if s := d.Stats(); s.Processed != 6 || s.ExpiriesSkipped != 1 {
		t.Errorf("Stats %+v: want 6 records processed and 1 expiry skipped", s)
	}
}

// An update an aggregation held back (LatestPerCommit) for an unmatched
// record is dropped when a later branch fails for that record: the count
// of o1 never goes out, those of the other keys do, at the batch's end.
func TestUnmatchedFailureUndoesHeldUpdates(t *testing.T) {
	d := eostest.New(t, fannedJoin(true))
	if err := d.Batch(func() error { outerJoinSteps(t, d); return nil }); err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, r := range eostest.Output(d, "counts", codec.JSON[int64]()).ReadAll() {
		keys = append(keys, fmt.Sprintf("%s=%d", r.Key, r.Value))
	}
	slices.Sort(keys)
	if want := []string{"o2=1", "o3=1"}; !slices.Equal(keys, want) {
		t.Errorf("counts %v, want %v: no count for o1", keys, want)
	}
	if s := d.Stats(); s.ExpiriesSkipped != 1 {
		t.Errorf("Stats %+v: want 1 expiry skipped", s)
	}
}

// containsAll reports whether got holds every one of want.
func containsAll(got, want []string) bool {
	for _, w := range want {
		if !slices.Contains(got, w) {
			return false
		}
	}
	return true
}
