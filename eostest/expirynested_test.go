package eostest_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/eosflow/eosflow/codec"
	"github.com/eosflow/eosflow/eostest"
	"github.com/eosflow/eosflow/state"
	"github.com/eosflow/eosflow/topology"
)

// windowIntoJoin counts clicks in final-only tumbling windows of 10 s and
// sends each result two ways: left-joined (within 1 s) with payments,
// whose function fails for key "e1" unmatched, and to the node "check",
// which fails for key "bad"; both under Skip. A result reaching the join
// expires the join's older unmatched results inside its own emission.
func windowIntoJoin() *topology.Topology {
	top := topology.New()
	in := topology.Source(top, "clicks", codec.String(), topology.Named("in"))
	payments := topology.Source(top, "payments", codec.String())
	counts := topology.CountWindows(topology.GroupByKey(in, "by-user"), "per-window", topology.Tumbling(10*time.Second).FinalOnly(), state.Memory())
	results := topology.ToStream(counts, "results")
	flat := topology.MapValues(results, "flat", func(_ context.Context, w topology.Windowed[int64]) (string, error) {
		return fmt.Sprintf("%d@%d", w.Value, w.Window.Start.Unix()), nil
	})
	matched := topology.LeftJoinStreams(flat, payments, "match", topology.Within(time.Second),
		func(_ context.Context, key []byte, c, p string, found bool) (string, error) {
			if string(key) == "e1" && !found {
				return "", errors.New("no payment for e1")
			}
			return c + "+" + orNone(p, found), nil
		}, state.Memory(), codec.String(), codec.String())
	topology.To(matched, "matched", codec.String(), topology.Named("out"))
	checked := topology.Map(results, "check", func(_ context.Context, key []byte, w topology.Windowed[int64]) ([]byte, string, error) {
		if string(key) == "bad" {
			return nil, "", errBadWindow
		}
		return key, fmt.Sprint(w.Value), nil
	})
	topology.To(checked, "checked", codec.String(), topology.Named("checked-out"))
	top.OnError("match", topology.Skip())
	top.OnError("check", topology.Skip())
	return top
}

// An expiry settled inside another expiry's emission that then fails is
// undone with it, its count included: the inner entry stays in its store
// and is counted once, when it is settled for good.
func TestNestedExpiryUndoneIsNotCounted(t *testing.T) {
	d := eostest.New(t, windowIntoJoin())
	clicks := eostest.Input(d, "clicks", codec.String())
	for _, s := range []struct {
		sec int
		key string
	}{
		{1, "e1"},   // window [0 s, 10 s)
		{12, "bad"}, // closes it: e1's result waits in the join, unmatched
		{25, "d"},   // closes [10 s, 20 s): bad's result expires e1 in the join, skipped, then fails at check
		{40, "f"},   // closes [20 s, 30 s): d's result expires e1 again, skipped for good
	} {
		if err := pipeAt(t, clicks, s.sec, s.key, "click"); err != nil {
			t.Fatalf("%s at %d s: %v", s.key, s.sec, err)
		}
	}
	if s := d.Stats(); s.Processed != 4 || s.ExpiriesSkipped != 2 {
		t.Errorf("Stats %+v: want 4 records processed and 2 expiries skipped (bad's result, e1's unmatched result once)", s)
	}
}
