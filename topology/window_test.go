package topology_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/eosflow/eosflow/codec"
	"github.com/eosflow/eosflow/internal/engine"
	"github.com/eosflow/eosflow/processor"
	"github.com/eosflow/eosflow/state"
	"github.com/eosflow/eosflow/topology"
)

// windowCodec writes a windowed count as "[start,end)=count" in seconds,
// so outputs read at a glance.
type windowCodec struct{}

func (windowCodec) Encode(w topology.Windowed[int64]) ([]byte, error) {
	return fmt.Appendf(nil, "[%d,%d)=%d", w.Window.Start.Unix(), w.Window.End.Unix(), w.Value), nil
}

func (windowCodec) Decode([]byte) (topology.Windowed[int64], error) {
	return topology.Windowed[int64]{}, errors.New("not read back")
}

func windowCount(w topology.Windows) *topology.Topology {
	top := topology.New()
	in := topology.Source(top, "clicks", codec.String(), topology.Named("in"))
	counts := topology.CountWindows(topology.GroupByKey(in, "by-user"), "per-window", w, state.Memory())
	topology.ToTable(counts, "clicks-per-window", windowCodec{}, topology.Named("out"))
	return top
}

// at sends a record of key with event time sec seconds.
func (r *rig) at(sec int, key string) []string {
	r.t.Helper()
	r.ts = time.Unix(int64(sec), 0)
	return r.must("clicks", 0, key, "click")
}

// Tumbling windows: every update is emitted; a record out of order counts
// in its window while the window is within its grace, and is late after.
func TestTumblingWindowsEveryUpdate(t *testing.T) {
	r := newRig(t, windowCount(topology.Tumbling(10*time.Second).Grace(5*time.Second)))
	var got []string
	for _, rec := range []struct {
		sec int
		key string
	}{{1, "a"}, {5, "a"}, {12, "a"}, {3, "a"}, {14, "b"}} {
		got = append(got, r.at(rec.sec, rec.key)...)
	}
	want := []string{
		"clicks-per-window:a=[0,10)=1", "clicks-per-window:a=[0,10)=2", "clicks-per-window:a=[10,20)=1",
		"clicks-per-window:a=[0,10)=3", // 3 s is out of order, but stream time 12 s is within [0,10)'s grace
		"clicks-per-window:b=[10,20)=1",
	}
	if !slices.Equal(got, want) {
		t.Fatalf("outputs\n%v\nwant\n%v", got, want)
	}
	// Stream time 15 s closes [0,10): a record for it is late, dropped
	// (the default) and counted as skipped.
	r.at(15, "b")
	r.ts = time.Unix(9, 0)
	if outcome, out, err := r.send("clicks", 0, "a", "click"); outcome != engine.Skipped || err != nil || len(out) != 0 {
		t.Fatalf("late record: outcome %v, outputs %v, error %v; want Skipped", outcome, out, err)
	}
	if n := r.e.Take().Skipped; n != 1 {
		t.Fatalf("skipped %d, want 1", n)
	}
}

// FinalOnly emits each window once, when stream time passes its end plus
// grace; an abort undoes the emission and the removal together, so the
// redone batch emits it again, once.
func TestTumblingWindowsFinalResults(t *testing.T) {
	r := newRig(t, windowCount(topology.Tumbling(10*time.Second).Grace(2*time.Second).FinalOnly()))
	var got []string
	for _, rec := range []struct {
		sec int
		key string
	}{{1, "a"}, {5, "b"}, {9, "a"}, {11, "a"}} {
		got = append(got, r.at(rec.sec, rec.key)...)
	}
	if len(got) != 0 {
		t.Fatalf("no window has closed, yet %v", got)
	}
	r.commit()
	closing := r.at(12, "c") // stream time 12 s: [0,10) closes
	want := []string{"clicks-per-window:a=[0,10)=2", "clicks-per-window:b=[0,10)=1"}
	if !slices.Equal(closing, want) {
		t.Fatalf("closing [0,10): %v, want %v", closing, want)
	}
	r.abort()
	if again := r.at(12, "c"); !slices.Equal(again, want) {
		t.Fatalf("after an abort the redone record must emit the final results again: %v, want %v", again, want)
	}
	r.commit()
	if more := r.at(13, "c"); len(more) != 0 {
		t.Fatalf("a closed window was emitted twice: %v", more)
	}
	if got := r.at(25, "d"); !slices.Equal(got, []string{"clicks-per-window:a=[10,20)=1", "clicks-per-window:c=[10,20)=2"}) {
		t.Fatalf("closing [10,20): %v", got)
	}
	// Closed windows leave the store; only open ones and stream time stay.
	var keys int
	for _, err := range r.stores["per-window@clicks/0"].Range(nil, nil) {
		if err != nil {
			t.Fatal(err)
		}
		keys++
	}
	if keys != 3 { // stream time, d's window and its index entry
		t.Fatalf("store holds %d keys, want 3", keys)
	}
}

// Hopping windows: a record counts in every window that contains it.
func TestHoppingWindows(t *testing.T) {
	r := newRig(t, windowCount(topology.Hopping(10*time.Second, 5*time.Second).Grace(time.Hour)))
	got := r.at(7, "a")
	if want := []string{"clicks-per-window:a=[0,10)=1", "clicks-per-window:a=[5,15)=1"}; !slices.Equal(got, want) {
		t.Fatalf("outputs %v, want %v", got, want)
	}
	if got := r.at(3, "a"); !slices.Equal(got, []string{"clicks-per-window:a=[0,10)=2"}) {
		t.Fatalf("outputs %v", got)
	}
}

// Late(DeadLetter) writes late records to the dead-letter topic with the
// reason, and leaves the node's own policy for its other errors.
func TestLateRecordsDeadLettered(t *testing.T) {
	top := windowCount(topology.Tumbling(10 * time.Second).Late(topology.DeadLetter("late-clicks")))
	r := newRig(t, top)
	r.at(20, "a")
	r.ts = time.Unix(5, 0)
	outcome, out, err := r.send("clicks", 0, "a", "click")
	if outcome != engine.DeadLettered || err != nil || len(out) != 1 || !strings.HasPrefix(out[0], "late-clicks:a=") {
		t.Fatalf("late record: outcome %v, outputs %v, error %v; want it dead-lettered", outcome, out, err)
	}
	// A record without a key is not late: the node's policy (Fail) applies.
	r.ts = time.Unix(30, 0)
	if _, _, err := r.send("clicks", 0, "", "click"); !errors.Is(err, topology.ErrNoKey) {
		t.Fatalf("keyless: %v, want ErrNoKey under Fail", err)
	}
	if !strings.Contains(top.Describe(), "Processor: per-window (CountWindows, stores: per-window, windows: tumbling 10s, grace 0s, emit every update, late: dead-letter(late-clicks))") {
		t.Fatalf("Describe:\n%s", top.Describe())
	}
}

// SourceTimestamp sets event time from the value, not the Kafka record.
func TestSourceTimestamp(t *testing.T) {
	top := topology.New()
	in := topology.Source(top, "clicks", codec.String(), topology.SourceTimestamp(func(_ []byte, v string) time.Time {
		var sec int64
		fmt.Sscan(v, &sec)
		return time.Unix(sec, 0)
	}), topology.Named("in"))
	topology.ToTable(topology.CountWindows(topology.GroupByKey(in, "g"), "w", topology.Tumbling(time.Minute), state.Memory()), "out", windowCodec{})
	r := newRig(t, top)
	r.ts = time.Unix(1000, 0) // ignored
	if got := r.must("clicks", 0, "a", "125"); !slices.Equal(got, []string{"out:a=[120,180)=1"}) {
		t.Fatalf("outputs %v", got)
	}
}

// Windows that cannot work are reported by Validate.
func TestWindowMistakes(t *testing.T) {
	for _, tc := range []struct {
		w    topology.Windows
		want string
	}{
		{topology.Tumbling(0), "window size 0s must be positive"},
		{topology.Hopping(10*time.Second, 20*time.Second), "window advance 20s must be positive and at most the size 10s"},
		{topology.Tumbling(1500 * time.Microsecond), "whole milliseconds"},
		{topology.Tumbling(time.Second).Grace(-time.Second), "grace -1s must not be negative"},
		{topology.Tumbling(time.Second).Late(topology.Retry(3, time.Millisecond, topology.Skip())), "Retry cannot help"},
	} {
		err := windowCount(tc.w).Validate()
		if !errors.Is(err, topology.ErrInvalid) || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), `node "per-window"`) {
			t.Errorf("%v: Validate() = %v, want %q", tc.w, err, tc.want)
		}
	}
}

// A record without event time cannot be placed in a window.
func TestWindowNeedsEventTime(t *testing.T) {
	top := windowCount(topology.Tumbling(time.Second).Late(topology.Fail()))
	r := newRig(t, top)
	_, _, err := r.send("clicks", 0, "a", "click") // zero timestamp
	var re *processor.RecordError
	if !errors.Is(err, topology.ErrLate) || !errors.As(err, &re) || !strings.Contains(err.Error(), "SourceTimestamp") {
		t.Fatalf("no timestamp: %v", err)
	}
}

// sessionCodec writes a session count as "[start,end]=count" in seconds.
type sessionCodec struct{}

func (sessionCodec) Encode(w topology.Windowed[int64]) ([]byte, error) {
	return fmt.Appendf(nil, "[%d,%d]=%d", w.Window.Start.Unix(), w.Window.End.Unix(), w.Value), nil
}

func (sessionCodec) Decode([]byte) (topology.Windowed[int64], error) {
	return topology.Windowed[int64]{}, errors.New("not read back")
}

func sessionCount(w topology.Windows) *topology.Topology {
	top := topology.New()
	in := topology.Source(top, "clicks", codec.String(), topology.Named("in"))
	counts := topology.CountWindows(topology.GroupByKey(in, "by-user"), "per-session", w, state.Memory())
	topology.ToTable(counts, "sessions", sessionCodec{}, topology.Named("out"))
	return top
}

// Session windows: records within the gap of each other make one session;
// a record between two sessions merges them. Every window a record
// replaces is retracted first with a tombstone (an empty value here).
func TestSessionWindows(t *testing.T) {
	r := newRig(t, sessionCount(topology.Session(10*time.Second).Grace(20*time.Second)))
	var got []string
	for _, rec := range []struct {
		sec int
		key string
	}{{0, "a"}, {5, "a"}, {30, "a"}, {22, "a"}} {
		got = append(got, r.at(rec.sec, rec.key)...)
	}
	want := []string{
		"sessions:a=[0,0]=1", "sessions:a=", "sessions:a=[0,5]=2", "sessions:a=[30,30]=1",
		"sessions:a=", "sessions:a=[22,30]=2", // 22 is within 10 s of 30, not of 5: joins the second session
	}
	if !slices.Equal(got, want) {
		t.Fatalf("outputs\n%v\nwant\n%v", got, want)
	}
	if got := r.at(14, "a"); !slices.Equal(got, []string{"sessions:a=", "sessions:a=", "sessions:a=[0,30]=5"}) {
		t.Fatalf("a record within the gap of both sessions merges them: %v", got)
	}
	// Stream time 30 s, grace 20 s: a record at 5 s is late.
	r.ts = time.Unix(5, 0)
	if outcome, _, err := r.send("clicks", 0, "b", "click"); outcome != engine.Skipped || err != nil {
		t.Fatalf("late: %v %v", outcome, err)
	}
}

// FinalOnly emits each session once, when stream time has passed its last
// record by the gap plus the grace.
func TestSessionWindowsFinal(t *testing.T) {
	r := newRig(t, sessionCount(topology.Session(10*time.Second).FinalOnly()))
	var got []string
	for _, rec := range []struct {
		sec int
		key string
	}{{0, "a"}, {4, "a"}, {8, "b"}, {14, "a"}, {24, "c"}} {
		got = append(got, r.at(rec.sec, rec.key)...)
	}
	// At 24 s: b's session (last record 8 s) is closed; a's (14 s) is not:
	// a record at 24 s could still join it.
	if want := []string{"sessions:b=[8,8]=1"}; !slices.Equal(got, want) {
		t.Fatalf("outputs %v, want %v", got, want)
	}
	if got := r.at(40, "c"); !slices.Equal(got, []string{"sessions:a=[0,14]=3", "sessions:c=[24,24]=1"}) {
		t.Fatalf("outputs %v", got)
	}
}

// AggregateWindows has no way to merge two sessions' aggregates.
func TestSessionWindowsNeedAMerge(t *testing.T) {
	top := topology.New()
	in := topology.Source(top, "in", codec.String())
	agg := topology.AggregateWindows(topology.GroupByKey(in, "g"), "a", topology.Session(time.Second), func() int { return 0 },
		func(_ context.Context, _ []byte, _ string, n int) (int, error) { return n + 1, nil }, state.Memory(), codec.JSON[int]())
	topology.ToTable(agg, "out", codec.JSON[topology.Windowed[int]]())
	if err := top.Validate(); err == nil || !strings.Contains(err.Error(), "cannot merge two sessions' aggregates") {
		t.Fatalf("Validate() = %v", err)
	}
}

// A session gap must be positive.
func TestSessionGapMustBePositive(t *testing.T) {
	err := sessionCount(topology.Session(0)).Validate()
	if err == nil || !strings.Contains(err.Error(), "session gap 0s must be positive") {
		t.Fatalf("Validate() = %v", err)
	}
}
