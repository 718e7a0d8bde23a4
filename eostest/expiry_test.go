package eostest_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/eosflow/eosflow/codec"
	"github.com/eosflow/eosflow/eostest"
	"github.com/eosflow/eosflow/processor"
	"github.com/eosflow/eosflow/state"
	"github.com/eosflow/eosflow/topology"
)

// errNoPayment is what the join function of fragileJoin returns for the
// order "bad" when it expires without a payment.
var errNoPayment = errors.New("no payment for a bad order")

// fragileJoin is an outer join of orders and payments within 10 s, grace
// 5 s, whose function fails for the unmatched order "bad"; policy is the
// join's.
func fragileJoin(policy topology.ErrorPolicy) *topology.Topology {
	top := topology.New()
	orders := topology.Source(top, "orders", codec.String())
	payments := topology.Source(top, "payments", codec.String())
	matched := topology.OuterJoinStreams(orders, payments, "match", topology.Within(10*time.Second).Grace(5*time.Second),
		func(_ context.Context, _ []byte, o, p string, hasO, hasP bool) (string, error) {
			if o == "bad" && !hasP {
				return "", errNoPayment
			}
			return orNone(o, hasO) + "+" + orNone(p, hasP), nil
		}, state.Memory(), codec.String(), codec.String())
	topology.To(matched, "matched", codec.String(), topology.Named("out"))
	top.OnError("match", policy)
	return top
}

// orNone is v, or "none" for a side without a record.
func orNone(v string, found bool) string {
	if !found {
		return "none"
	}
	return v
}

// pipeAt pipes key=value to topic at sec seconds of event time.
func pipeAt(t *testing.T, in *eostest.InputTopic[string], sec int, key, value string) error {
	t.Helper()
	return in.Pipe(key, value, eostest.Timestamp(time.Unix(int64(sec), 0)))
}

// outerJoinSteps pipes the records of the expiry tests: the order "bad"
// at 10 s expires unmatched once stream time passes 35 s, which the tick
// at 40 s does; the pairs after it must join as if nothing had failed.
func outerJoinSteps(t *testing.T, d *eostest.Driver) {
	t.Helper()
	orders := eostest.Input(d, "orders", codec.String())
	payments := eostest.Input(d, "payments", codec.String())
	for _, s := range []struct {
		in         *eostest.InputTopic[string]
		sec        int
		key, value string
	}{
		{orders, 10, "o1", "bad"},
		{payments, 12, "o2", "pay2"},
		{orders, 13, "o2", "order2"},
		{orders, 40, "t1", "tick"}, // expires "bad": its function fails
		{orders, 41, "o3", "order3"},
		{payments, 42, "o3", "pay3"},
	} {
		if err := pipeAt(t, s.in, s.sec, s.key, s.value); err != nil {
			t.Fatalf("%s=%s at %d s: %v", s.key, s.value, s.sec, err)
		}
	}
}

// A failure while emitting an unmatched record is that record's: under
// Skip it is dropped and under DeadLetter it is dead-lettered, once, with
// its own key, value and timestamp; it leaves the store either way, and
// the record whose stream time expired it, and every record after, is
// processed as if nothing had failed.
func TestOuterJoinUnmatchedFailureIsCharged(t *testing.T) {
	for _, tc := range []struct {
		name   string
		policy topology.ErrorPolicy
	}{
		{"skip", topology.Skip()},
		{"dead-letter", topology.DeadLetter("match-dlq")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := eostest.New(t, fragileJoin(tc.policy), eostest.Topics("match-dlq"))
			outerJoinSteps(t, d)
			var got []string
			for _, r := range eostest.Output(d, "matched", codec.String()).ReadAll() {
				got = append(got, fmt.Sprintf("%s=%s", r.Key, r.Value))
			}
			if want := []string{"o2=order2+pay2", "o3=order3+pay3"}; !slices.Equal(got, want) {
				t.Fatalf("matched %v, want %v", got, want)
			}
			// Stream time 80 s expires everything else: t1's tick alone.
			if err := pipeAt(t, eostest.Input(d, "orders", codec.String()), 80, "t2", "tick"); err != nil {
				t.Fatal(err)
			}
			rest := eostest.Output(d, "matched", codec.String()).ReadAll()
			if len(rest) != 1 || string(rest[0].Key) != "t1" || rest[0].Value != "tick+none" {
				t.Fatalf("after stream time 80 s: %+v, want t1=tick+none alone", rest)
			}
			s := d.Stats()
			if s.Processed != 7 || s.Skipped != 0 || s.DeadLettered != 0 {
				t.Errorf("Stats %+v: every input record must be processed", s)
			}
			if tc.name == "skip" {
				if s.ExpiriesSkipped != 1 || s.ExpiriesDeadLettered != 0 {
					t.Errorf("Stats %+v: want one expiry skipped", s)
				}
				return
			}
			if s.ExpiriesDeadLettered != 1 || s.ExpiriesSkipped != 0 {
				t.Errorf("Stats %+v: want one expiry dead-lettered", s)
			}
			assertUnmatchedDeadLetter(t, d)
		})
	}
}

// assertUnmatchedDeadLetter checks the one dead letter of
// TestOuterJoinUnmatchedFailureIsCharged: the order "bad" itself, naming
// the join, the error and the tick whose stream time expired it.
func assertUnmatchedDeadLetter(t *testing.T, d *eostest.Driver) {
	t.Helper()
	dls := d.DeadLetters("match-dlq")
	if len(dls) != 1 {
		t.Fatalf("%d dead letters, want 1: %+v", len(dls), dls)
	}
	dl := dls[0]
	if string(dl.Key) != "o1" || string(dl.Value) != "bad" || dl.Node != "match" || !strings.Contains(dl.Error, errNoPayment.Error()) {
		t.Errorf("dead letter %+v: want o1=bad from node match with the function's error", dl)
	}
	if dl.ExpiryNode != "match" || !strings.Contains(dl.ExpiryWhat, "unmatched left record") {
		t.Errorf("dead letter %+v: its headers must name the join and the unmatched record", dl)
	}
	if dl.ExpirySourceTopic != "orders" || dl.ExpirySourceOffset != 2 || !dl.ExpirySourceTimestamp.Equal(time.Unix(40, 0)) {
		t.Errorf("dead letter %+v: must name the record whose stream time expired it, orders@2 at 40 s", dl)
	}
	if dl.Topic != "" || dl.Offset != 0 {
		t.Errorf("dead letter %+v: an expired entry was read from no topic, and must not look replayable", dl)
	}
	recs := eostest.Output(d, "match-dlq", codec.String()).ReadAll()
	if len(recs) != 1 || !recs[0].Timestamp.Equal(time.Unix(10, 0)) {
		t.Errorf("dead letter records %+v: want one, at the expired record's own time, 10 s", recs)
	}
}

// Under Fail, a failure while emitting an unmatched record stops the run
// with an error naming the join and the expired record, and the batch
// aborts: nothing of it is visible.
func TestOuterJoinUnmatchedFailureFails(t *testing.T) {
	d := eostest.New(t, fragileJoin(topology.Fail()))
	orders := eostest.Input(d, "orders", codec.String())
	if err := pipeAt(t, orders, 10, "o1", "bad"); err != nil {
		t.Fatal(err)
	}
	err := pipeAt(t, orders, 40, "t1", "tick")
	var ee *processor.ExpiryError
	if !errors.As(err, &ee) || ee.Node != "match" || string(ee.Key) != "o1" || !errors.Is(err, errNoPayment) {
		t.Fatalf("Pipe: %v, want an ExpiryError naming the join and o1, wrapping the function's error", err)
	}
	if !strings.Contains(err.Error(), `"match"`) {
		t.Errorf("error %q does not name the join", err)
	}
	if got := eostest.Output(d, "matched", codec.String()).ReadAll(); len(got) != 0 {
		t.Errorf("outputs of the aborted batch are visible: %+v", got)
	}
}

// errBadWindow is what the node after fragileWindows returns for the
// window result of key "bad".
var errBadWindow = errors.New("cannot publish the count of a bad key")

// fragileWindows counts clicks in final-only windows w (tumbling windows
// of 10 s if zero); the node "check" after it fails for key "bad", under
// policy.
func fragileWindows(policy topology.ErrorPolicy, w topology.Windows) *topology.Topology {
	if w == (topology.Windows{}) {
		w = topology.Tumbling(10 * time.Second).FinalOnly()
	}
	top := topology.New()
	in := topology.Source(top, "clicks", codec.String(), topology.Named("in"))
	counts := topology.CountWindows(topology.GroupByKey(in, "by-user"), "per-window", w, state.Memory())
	checked := topology.Map(topology.ToStream(counts, "results"), "check",
		func(_ context.Context, key []byte, w topology.Windowed[int64]) ([]byte, string, error) {
			if string(key) == "bad" {
				return nil, "", errBadWindow
			}
			return key, fmt.Sprintf("%d@%d", w.Value, w.Window.Start.Unix()), nil
		})
	topology.To(checked, "clicks-per-window", codec.String(), topology.Named("out"))
	top.OnError("check", policy)
	return top
}

// A failure downstream of a final-only window's result is that result's:
// under Skip it is dropped, under DeadLetter dead-lettered once with the
// window's key and time; the window leaves the store, and the record that
// closed it counts as if nothing had failed.
func TestFinalWindowFailureIsCharged(t *testing.T) {
	for _, tc := range []struct {
		name    string
		policy  topology.ErrorPolicy
		windows topology.Windows
		want    []string
		what    string
		at      time.Time // the dead letter's timestamp: the window's
	}{
		{"skip", topology.Skip(), topology.Windows{}, []string{"a=1@0", "c=1@10"}, "", time.Time{}},
		{"dead-letter", topology.DeadLetter("check-dlq"), topology.Windows{}, []string{"a=1@0", "c=1@10"},
			"final result of window 1970-01-01T00:00:00Z to 1970-01-01T00:00:10Z", time.UnixMilli(9999)},
		{"session-dead-letter", topology.DeadLetter("check-dlq"), topology.Session(5 * time.Second).FinalOnly(), []string{"a=1@2", "c=1@12"},
			"final result of window 1970-01-01T00:00:01Z to 1970-01-01T00:00:01Z", time.Unix(1, 0)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := eostest.New(t, fragileWindows(tc.policy, tc.windows), eostest.Topics("check-dlq"))
			clicks := eostest.Input(d, "clicks", codec.String())
			for _, s := range []struct {
				sec int
				key string
			}{{1, "bad"}, {2, "a"}, {12, "c"}, {25, "d"}} {
				if err := pipeAt(t, clicks, s.sec, s.key, "click"); err != nil {
					t.Fatalf("%s at %d s: %v", s.key, s.sec, err)
				}
			}
			var got []string
			for _, r := range eostest.Output(d, "clicks-per-window", codec.String()).ReadAll() {
				got = append(got, fmt.Sprintf("%s=%s", r.Key, r.Value))
			}
			if !slices.Equal(got, tc.want) {
				t.Fatalf("results %v, want %v", got, tc.want)
			}
			if s := d.Stats(); s.Processed != 4 || s.ExpiriesSkipped+s.ExpiriesDeadLettered != 1 {
				t.Errorf("Stats %+v: want every record processed and one expiry settled", s)
			}
			if tc.what == "" {
				return
			}
			dls := d.DeadLetters("check-dlq")
			if len(dls) != 1 {
				t.Fatalf("%d dead letters, want 1", len(dls))
			}
			dl := dls[0]
			if string(dl.Key) != "bad" || dl.Node != "check" || dl.ExpiryNode != "per-window" ||
				dl.ExpiryWhat != tc.what || !strings.Contains(dl.Error, errBadWindow.Error()) || dl.ExpirySourceOffset != 2 || dl.Topic != "" {
				t.Errorf("dead letter %+v, want key bad from check, naming %q, expired by clicks@2", dl, tc.what)
			}
			recs := eostest.Output(d, "check-dlq", codec.Bytes()).ReadAll()
			if len(recs) != 1 || !recs[0].Timestamp.Equal(tc.at) {
				t.Errorf("dead letter records %+v: want one at %s", recs, tc.at)
			}
		})
	}
}

// Under Fail, a failure downstream of a final-only window's result stops
// the run with an error naming the window node.
func TestFinalWindowFailureFails(t *testing.T) {
	d := eostest.New(t, fragileWindows(topology.Fail(), topology.Windows{}))
	clicks := eostest.Input(d, "clicks", codec.String())
	if err := pipeAt(t, clicks, 1, "bad", "click"); err != nil {
		t.Fatal(err)
	}
	err := pipeAt(t, clicks, 12, "c", "click")
	var ee *processor.ExpiryError
	if !errors.As(err, &ee) || ee.Node != "per-window" || string(ee.Key) != "bad" || !errors.Is(err, errBadWindow) {
		t.Fatalf("Pipe: %v, want an ExpiryError naming the window node and key bad", err)
	}
}

// An expired entry's dead letter commits with the batch that expired it:
// an aborted batch shows none, and the entry expires again when its
// records are redone, dead-lettered once in all.
func TestUnmatchedDeadLetterCommitsWithItsBatch(t *testing.T) {
	d := eostest.New(t, fragileJoin(topology.DeadLetter("match-dlq")), eostest.Topics("match-dlq"))
	orders := eostest.Input(d, "orders", codec.String())
	if err := pipeAt(t, orders, 10, "o1", "bad"); err != nil {
		t.Fatal(err)
	}
	errVeto := errors.New("vetoed")
	if err := d.Batch(func() error {
		if err := pipeAt(t, orders, 40, "t1", "tick"); err != nil {
			return err
		}
		return errVeto
	}); !errors.Is(err, errVeto) {
		t.Fatalf("Batch: %v, want the veto", err)
	}
	if dls := d.DeadLetters("match-dlq"); len(dls) != 0 {
		t.Fatalf("the aborted batch's dead letters are visible: %+v", dls)
	}
	for sec := 40; sec <= 42; sec++ {
		if err := pipeAt(t, orders, sec, "t1", "tick"); err != nil {
			t.Fatal(err)
		}
	}
	if dls := d.DeadLetters("match-dlq"); len(dls) != 1 || string(dls[0].Key) != "o1" {
		t.Fatalf("dead letters %+v, want o1 once", dls)
	}
	if s := d.Stats(); s.ExpiriesDeadLettered != 1 {
		t.Errorf("Stats %+v: the aborted batch's expiry counted", s)
	}
}

// errAudit is what the node "audit" after auditedJoin returns for an
// order that expired without a payment.
var errAudit = errors.New("an unpaid order cannot be audited")

// auditedJoin left-joins orders with payments; the node "audit" after it
// writes each result to its store "seen", then fails for the order "bad"
// without a payment, under Skip.
func auditedJoin() *topology.Topology {
	top := topology.New()
	orders := topology.Source(top, "orders", codec.String())
	payments := topology.Source(top, "payments", codec.String())
	matched := topology.LeftJoinStreams(orders, payments, "match", topology.Within(10*time.Second).Grace(5*time.Second),
		func(_ context.Context, _ []byte, o, p string, found bool) (string, error) {
			return o + "+" + orNone(p, found), nil
		},
		state.Memory(), codec.String(), codec.String())
	top.AddStore("seen", state.Memory())
	audited := topology.Process(matched, "audit", func(ctx processor.Context[string], r processor.Record[string]) error {
		seen, err := ctx.Store("seen")
		if err != nil {
			return err
		}
		if err := seen.Put(r.Key, []byte(r.Value)); err != nil {
			return err
		}
		if r.Value == "bad+none" {
			return errAudit
		}
		ctx.Emit(r)
		return nil
	}, topology.UseStores("seen"))
	topology.To(audited, "audited", codec.String(), topology.Named("out"))
	top.OnError("audit", topology.Skip())
	return top
}

// What a node after the join wrote to its store while handling an
// unmatched record that then failed is undone with that record alone:
// the writes for the record whose stream time expired it stay.
func TestUnmatchedFailureUndoesItsStoreWrites(t *testing.T) {
	d := eostest.New(t, auditedJoin())
	orders := eostest.Input(d, "orders", codec.String())
	payments := eostest.Input(d, "payments", codec.String())
	if err := pipeAt(t, orders, 10, "o1", "bad"); err != nil {
		t.Fatal(err)
	}
	if err := pipeAt(t, orders, 20, "o2", "order2"); err != nil {
		t.Fatal(err)
	}
	// Stream time 40 s expires "bad", whose audit fails, but not order2
	// (20 s, expiring after 45 s); the payment, 20 s away, joins nothing.
	if err := pipeAt(t, payments, 40, "o2", "pay2"); err != nil {
		t.Fatal(err)
	}
	if err := pipeAt(t, orders, 46, "t1", "tick"); err != nil { // expires order2 unmatched
		t.Fatal(err)
	}
	seen := eostest.Store(d, "seen", codec.String(), codec.String())
	if v, ok := seen.Get("o1"); ok {
		t.Errorf("seen holds o1=%q, written for the unmatched record whose audit failed", v)
	}
	if v, ok := seen.Get("o2"); !ok || v != "order2+none" {
		t.Errorf("seen: o2=%q (%v), want order2+none", v, ok)
	}
	var got []string
	for _, r := range eostest.Output(d, "audited", codec.String()).ReadAll() {
		got = append(got, fmt.Sprintf("%s=%s", r.Key, r.Value))
	}
	if want := []string{"o2=order2+none"}; !slices.Equal(got, want) {
		t.Errorf("audited %v, want %v", got, want)
	}
	if s := d.Stats(); s.Processed != 4 || s.ExpiriesSkipped != 1 {
		t.Errorf("Stats %+v: want 4 records processed, 1 expiry skipped", s)
	}
}

// An expiry's emission is retried as a record's node call is, and a
// panic in it is charged to it like an error: under Retry(3, 0, Skip())
// the function runs three times for the unmatched record, which is then
// dropped; a panic is dead-lettered with its stack.
func TestUnmatchedRetriedAndPanicCharged(t *testing.T) {
	for _, tc := range []struct {
		name   string
		policy topology.ErrorPolicy
		panics bool
	}{
		{"retry-then-skip", topology.Retry(3, 0, topology.Skip()), false},
		{"panic-dead-letter", topology.DeadLetter("match-dlq"), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			calls := 0
			top := topology.New()
			orders := topology.Source(top, "orders", codec.String())
			payments := topology.Source(top, "payments", codec.String())
			matched := topology.LeftJoinStreams(orders, payments, "match", topology.Within(10*time.Second),
				func(_ context.Context, _ []byte, o, p string, found bool) (string, error) {
					if o != "bad" {
						return o + "+" + orNone(p, found), nil
					}
					calls++
					if tc.panics {
						panic("unpaid")
					}
					return "", errNoPayment
				}, state.Memory(), codec.String(), codec.String())
			topology.To(matched, "matched", codec.String(), topology.Named("out"))
			top.OnError("match", tc.policy)
			d := eostest.New(t, top, eostest.Topics("match-dlq"))
			in := eostest.Input(d, "orders", codec.String())
			for _, s := range []struct {
				sec        int
				key, value string
			}{{1, "o1", "bad"}, {2, "o2", "good"}, {30, "t1", "tick"}, {31, "t2", "tick"}} {
				if err := pipeAt(t, in, s.sec, s.key, s.value); err != nil {
					t.Fatal(err)
				}
			}
			var got []string
			for _, r := range eostest.Output(d, "matched", codec.String()).ReadAll() {
				got = append(got, fmt.Sprintf("%s=%s", r.Key, r.Value))
			}
			if want := []string{"o2=good+none"}; !slices.Equal(got, want) {
				t.Errorf("matched %v, want %v", got, want)
			}
			s := d.Stats()
			if tc.panics {
				dls := d.DeadLetters("match-dlq")
				if calls != 1 || len(dls) != 1 || string(dls[0].Key) != "o1" || !strings.Contains(dls[0].Error, "unpaid") || dls[0].Stack == "" {
					t.Errorf("%d calls, dead letters %+v: want one call and o1 with the panic and its stack", calls, dls)
				}
				return
			}
			if calls != 3 || s.Retries != 2 || s.ExpiriesSkipped != 1 || s.Processed != 4 {
				t.Errorf("%d calls, Stats %+v: want 3 calls, 2 retries, 1 expiry skipped, 4 records processed", calls, s)
			}
		})
	}
}

// An unmatched record that a window after the join finds late is settled
// by that window's Late policy (Skip by default), as a late input record
// would be, not by the window's own policy (Fail here): it is dropped
// alone and the run goes on.
func TestUnmatchedLateDownstreamTakesTheLatePolicy(t *testing.T) {
	top := topology.New()
	orders := topology.Source(top, "orders", codec.String())
	payments := topology.Source(top, "payments", codec.String())
	matched := topology.LeftJoinStreams(orders, payments, "match", topology.Within(10*time.Second).Grace(5*time.Second),
		func(_ context.Context, _ []byte, o, p string, found bool) (string, error) {
			return o + "+" + orNone(p, found), nil
		},
		state.Memory(), codec.String(), codec.String())
	counts := topology.CountWindows(topology.GroupByKey(matched, "by-order"), "per-window", topology.Tumbling(10*time.Second), state.Memory())
	topology.To(topology.ToStream(counts, "updates"), "counts", codec.JSON[topology.Windowed[int64]](), topology.Named("out"))
	d := eostest.New(t, top)
	in := map[string]*eostest.InputTopic[string]{"orders": eostest.Input(d, "orders", codec.String()), "payments": eostest.Input(d, "payments", codec.String())}
	for _, s := range []struct {
		topic      string
		sec        int
		key, value string
	}{
		{"orders", 10, "o1", "order1"}, // never joins; late for the window once it expires
		{"orders", 30, "o2", "order2"},
		{"payments", 31, "o2", "pay2"}, // the window's stream time: 31 s, [10 s, 20 s) closed
		{"orders", 40, "t1", "tick"},   // expires o1, at 10 s
		{"orders", 41, "t2", "tick"},
	} {
		if err := pipeAt(t, in[s.topic], s.sec, s.key, s.value); err != nil {
			t.Fatalf("%s=%s at %d s: %v", s.key, s.value, s.sec, err)
		}
	}
	if s := d.Stats(); s.Processed != 5 || s.Skipped != 0 || s.ExpiriesSkipped != 1 {
		t.Errorf("Stats %+v: want 5 records processed and the late unmatched record skipped alone", s)
	}
}
