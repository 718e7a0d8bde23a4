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
	"github.com/eosflow/eosflow/topology"
)

// paymentsMatched joins orders with payments of the same order id within
// 10 s of event time.
func paymentsMatched(w topology.JoinWindow) *topology.Topology {
	top := topology.New()
	orders := topology.Source(top, "orders", codec.String())
	payments := topology.Source(top, "payments", codec.String())
	matched := topology.JoinStreams(orders, payments, "match", w, func(_ context.Context, _ []byte, o, p string) (string, error) {
		return o + "+" + p, nil
	}, state.Memory(), codec.String(), codec.String())
	topology.To(matched, "matched", codec.String(), topology.Named("out"))
	return top
}

func (r *rig) event(topic string, sec int, key, value string) []string {
	r.t.Helper()
	r.ts = time.Unix(int64(sec), 0)
	return r.must(topic, 0, key, value)
}

// Each pair of records of one key within the window joins once, when the
// later of the two arrives, whichever side it is on.
func TestJoinStreamsWithinWindow(t *testing.T) {
	r := newRig(t, paymentsMatched(topology.Within(10*time.Second)))
	var got []string
	got = append(got, r.event("orders", 10, "o1", "order1")...)
	got = append(got, r.event("payments", 15, "o1", "pay1")...)    // 5 s after: joins
	got = append(got, r.event("payments", 20, "o2", "pay2")...)    // before its order
	got = append(got, r.event("orders", 25, "o2", "order2")...)    // joins the waiting payment
	got = append(got, r.event("payments", 40, "o1", "refund1")...) // 30 s after order1: too far
	want := []string{"matched:o1=order1+pay1", "matched:o2=order2+pay2"}
	if !slices.Equal(got, want) {
		t.Fatalf("outputs %v, want %v", got, want)
	}
	// Stream time is 40 s: an order at 5 s is older than the window
	// allows; it is late, dropped and counted.
	r.ts = time.Unix(5, 0)
	if outcome, out, err := r.send("orders", 0, "o9", "order9"); outcome != engine.Skipped || err != nil || len(out) != 0 {
		t.Fatalf("late record: outcome %v, outputs %v, error %v", outcome, out, err)
	}
	// Records stream time has passed by twice the window are gone: at
	// 40 s, those before 20 s (order1, pay1); order2 (25 s), pay2 (20 s)
	// and refund1 (40 s) stay.
	var left, right int
	for _, err := range r.stores["match-left@orders/0"].Range([]byte("k"), []byte("l")) {
		if err != nil {
			t.Fatal(err)
		}
		left++
	}
	for _, err := range r.stores["match-right@orders/0"].Range([]byte("k"), []byte("l")) {
		if err != nil {
			t.Fatal(err)
		}
		right++
	}
	if left != 1 || right != 2 {
		t.Fatalf("waiting records: %d orders, %d payments; want 1 and 2", left, right)
	}
	if got := r.e.CoPartitioned(); len(got) != 1 || !slices.Equal(got[0], []string{"orders", "payments"}) {
		t.Fatalf("CoPartitioned() = %v", got)
	}
}

// An aborted batch's joins and waiting records are undone together: the
// redone batch joins the same pairs once.
func TestJoinStreamsAbort(t *testing.T) {
	r := newRig(t, paymentsMatched(topology.Within(10*time.Second).Grace(5*time.Second)))
	r.event("orders", 10, "o1", "order1")
	r.commit()
	if got := r.event("payments", 12, "o1", "pay1"); !slices.Equal(got, []string{"matched:o1=order1+pay1"}) {
		t.Fatalf("outputs %v", got)
	}
	r.abort()
	if got := r.event("payments", 12, "o1", "pay1"); !slices.Equal(got, []string{"matched:o1=order1+pay1"}) {
		t.Fatalf("redone: %v", got)
	}
	r.commit()
	if got := r.event("payments", 13, "o1", "pay1-again"); !slices.Equal(got, []string{"matched:o1=order1+pay1-again"}) {
		t.Fatalf("a second payment joins the order too: %v", got)
	}
}

// Stream joins that cannot work are reported by Validate.
func TestJoinStreamsMistakes(t *testing.T) {
	for _, tc := range []struct {
		w    topology.JoinWindow
		want string
	}{
		{topology.Within(-time.Second), "join window -1s must be whole milliseconds, not negative"},
		{topology.Within(time.Second).Grace(-time.Second), "grace -1s must not be negative"},
		{topology.Within(time.Second).Late(topology.Retry(2, time.Millisecond, topology.Skip())), "Retry cannot help"},
	} {
		err := paymentsMatched(tc.w).Validate()
		if !errors.Is(err, topology.ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v, want %q", tc.w, err, tc.want)
		}
	}
}

// The oldest record that is not late still finds a partner a whole window
// older: records wait twice the window (plus the grace).
func TestJoinStreamsKeepsPartnersOfTheOldestRecordThatIsNotLate(t *testing.T) {
	r := newRig(t, paymentsMatched(topology.Within(10*time.Second)))
	r.event("payments", 100, "o1", "pay1")
	r.event("orders", 120, "o2", "order2") // stream time 120
	// 110 is not late (120 - 10) and 10 s from the payment.
	if got := r.event("orders", 110, "o1", "order1"); !slices.Equal(got, []string{"matched:o1=order1+pay1"}) {
		t.Fatalf("outputs %v, want the pair at the window's edge", got)
	}
}
