package topology_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/eosflow/eosflow/codec"
	"github.com/eosflow/eosflow/internal/engine"
	"github.com/eosflow/eosflow/state"
	"github.com/eosflow/eosflow/state/pebble"
	"github.com/eosflow/eosflow/topology"
	"github.com/twmb/franz-go/pkg/kgo"
)

// orNone is v, or "none" for a side without a record.
func orNone(v string, found bool) string {
	if !found {
		return "none"
	}
	return v
}

// paymentsJoined joins orders with payments within 10 s and a grace of
// 5 s: an outer join if outer, else a left join keeping every order. An
// unmatched order or payment expires once stream time passes it by 25 s.
func paymentsJoined(outer bool, e state.Engine) *topology.Topology {
	top := topology.New()
	orders := topology.Source(top, "orders", codec.String())
	payments := topology.Source(top, "payments", codec.String())
	w := topology.Within(10 * time.Second).Grace(5 * time.Second)
	var matched topology.Stream[string]
	if outer {
		matched = topology.OuterJoinStreams(orders, payments, "match", w, func(_ context.Context, _ []byte, o, p string, hasO, hasP bool) (string, error) {
			return orNone(o, hasO) + "+" + orNone(p, hasP), nil
		}, e, codec.String(), codec.String())
	} else {
		matched = topology.LeftJoinStreams(orders, payments, "match", w, func(_ context.Context, _ []byte, o, p string, found bool) (string, error) {
			return o + "+" + orNone(p, found), nil
		}, e, codec.String(), codec.String())
	}
	topology.To(matched, "matched", codec.String(), topology.Named("out"))
	return top
}

// An unmatched record comes out once stream time has passed it by twice
// the window plus the grace, not a millisecond before; a record that
// joined, on either side and whichever came first, never comes out
// unmatched; a left join emits only the left side's unmatched records,
// an outer join both sides'; a late record is not emitted at all.
func TestLeftOuterJoinStreamsEmitUnmatchedWhenClosed(t *testing.T) {
	for _, tc := range []struct {
		name  string
		outer bool
		at48  []string // the unmatched payment, in the outer join only
	}{
		{"left", false, nil},
		{"outer", true, []string{"matched:o3=none+pay3"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t, paymentsJoined(tc.outer, state.Memory()))
			steps := []struct {
				topic      string
				sec        int
				key, value string
				want       []string
			}{
				{"orders", 10, "o1", "order1", nil},
				{"payments", 15, "o1", "pay1", []string{"matched:o1=order1+pay1"}}, // marks order1, kept marked
				{"orders", 20, "o2", "order2", nil},                                // never joins
				{"payments", 22, "o3", "pay3", nil},                                // never joins
				{"payments", 30, "o4", "pay4", nil},
				{"orders", 33, "o4", "order4", []string{"matched:o4=order4+pay4"}}, // the payment first
				// Stream time 45: order1 and pay1 expired, joined; order2
				// (20 s) closes only after 20+2*10+5 = 45.
				{"orders", 45, "t1", "tick", nil},
				{"orders", 46, "t2", "tick", []string{"matched:o2=order2+none"}},
				{"orders", 48, "t3", "tick", tc.at48}, // pay3: 22+25 < 48
				{"orders", 20, "o5", "late", nil},     // late (before 48-15): dropped, never unmatched
				// pay4 and order4 expire, joined; the ticks and o5 wait.
				{"orders", 60, "t4", "tick", nil},
			}
			for _, s := range steps {
				r.ts = time.Unix(int64(s.sec), 0)
				_, got, err := r.send(s.topic, 0, s.key, s.value)
				if err != nil {
					t.Fatalf("%s at %d s: %v", s.value, s.sec, err)
				}
				if !slices.Equal(got, s.want) {
					t.Fatalf("%s %s at %d s: outputs %v, want %v", s.key, s.value, s.sec, got, s.want)
				}
			}
		})
	}
}

// An unmatched record comes out with its own key and timestamp, from the
// task of the record that closed it.
func TestOuterJoinStreamsUnmatchedTimestamp(t *testing.T) {
	r := newRig(t, paymentsJoined(true, state.Memory()))
	r.event("payments", 10, "o1", "pay1")
	var outs []*kgo.Record
	rec := &kgo.Record{Topic: "orders", Key: []byte("t"), Value: []byte("tick"), Timestamp: time.Unix(40, 0), Offset: 7}
	if outcome, err := r.e.Process(context.Background(), rec, func(o *kgo.Record) { outs = append(outs, o) }); outcome != engine.Processed || err != nil {
		t.Fatalf("outcome %v, error %v", outcome, err)
	}
	if len(outs) != 1 || string(outs[0].Key) != "o1" || string(outs[0].Value) != "none+pay1" || !outs[0].Timestamp.Equal(time.Unix(10, 0)) {
		t.Fatalf("outputs %v, want o1=none+pay1 at 10 s", outs)
	}
}

// The mark that a record joined commits with the join: after an abort
// the record comes out unmatched when it expires, after a commit it does
// not. The emission itself is undone by an abort and redone once.
func TestLeftJoinStreamsAbortedMatchLeavesRecordUnmatched(t *testing.T) {
	for _, eng := range []state.Engine{state.Memory(), pebble.New()} {
		t.Run(eng.String(), func(t *testing.T) {
			for _, commit := range []bool{false, true} {
				r := newRig(t, paymentsJoined(false, eng))
				r.event("orders", 10, "o1", "order1")
				r.commit()
				if got := r.event("payments", 12, "o1", "pay1"); !slices.Equal(got, []string{"matched:o1=order1+pay1"}) {
					t.Fatalf("outputs %v", got)
				}
				var want []string
				if commit {
					r.commit()
				} else {
					r.abort()
					want = []string{"matched:o1=order1+none"}
				}
				if got := r.event("orders", 50, "t", "tick"); !slices.Equal(got, want) {
					t.Fatalf("committed %v: outputs %v, want %v", commit, got, want)
				}
				r.abort()
				if got := r.event("orders", 50, "t", "tick"); !slices.Equal(got, want) {
					t.Fatalf("committed %v, redone: outputs %v, want %v", commit, got, want)
				}
				r.commit()
				if got := r.event("orders", 51, "t", "tick"); len(got) != 0 {
					t.Fatalf("emitted again after the commit: %v", got)
				}
			}
		})
	}
}

// Describe and Validate name the join's kind.
func TestLeftOuterJoinStreamsNamed(t *testing.T) {
	top := paymentsJoined(true, state.Memory())
	if d := top.Describe(); !strings.Contains(d, "OuterJoinStreams") {
		t.Fatalf("Describe does not name OuterJoinStreams:\n%s", d)
	}
	bad := topology.New()
	orders := topology.Source(bad, "orders", codec.String())
	payments := topology.Source(bad, "payments", codec.String())
	topology.LeftJoinStreams(orders, payments, "match", topology.Within(time.Second),
		func(context.Context, []byte, string, string, bool) (string, error) { return "", nil }, state.Memory(), nil, codec.String())
	if err := bad.Validate(); !errors.Is(err, topology.ErrInvalid) || !strings.Contains(err.Error(), "LeftJoinStreams needs a codec") {
		t.Fatalf("Validate: %v", err)
	}
}
