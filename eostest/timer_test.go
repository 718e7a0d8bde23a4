package eostest_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/eosflow/eosflow/codec"
	"github.com/eosflow/eosflow/eostest"
	"github.com/eosflow/eosflow/processor"
	"github.com/eosflow/eosflow/state"
	"github.com/eosflow/eosflow/topology"
)

// reporter remembers the keys it saw in the store "seen" and, on its
// timer, emits how many keys its task has seen; it fails while fail is
// set.
type reporter struct {
	kind processor.TimerKind
	fail *bool
}

func (p *reporter) Init(ctx processor.InitContext) error {
	return processor.Schedule(ctx, p.kind, time.Minute, p.report)
}

func (p *reporter) Process(ctx processor.Context[string], r processor.Record[string]) error {
	st, err := ctx.Store("seen")
	if err != nil {
		return err
	}
	return st.Put(r.Key, nil)
}

func (p *reporter) report(ctx processor.Context[string], now time.Time) error {
	st, err := ctx.Store("seen")
	if err != nil {
		return err
	}
	n := 0
	for _, err := range st.Prefix(nil) {
		if err != nil {
			return err
		}
		n++
	}
	if err := st.Put([]byte("reported"), nil); err != nil {
		return err
	}
	if *p.fail {
		return errors.New("report failed")
	}
	ctx.Emit(processor.Record[string]{Key: []byte("keys"), Value: fmt.Sprint(n)})
	return nil
}

func (p *reporter) Close() error { return nil }

func reporting(kind processor.TimerKind, fail *bool) *topology.Topology {
	top := topology.New()
	top.AddStore("seen", state.Memory())
	in := topology.Source(top, "in", codec.String())
	reports := topology.ProcessWith(in, "report", func() processor.Processor[string, string] { return &reporter{kind: kind, fail: fail} },
		topology.UseStores("seen"), topology.Timers())
	topology.To(reports, "reports", codec.String(), topology.Named("out"))
	return top
}

// reports reads the reports as "count@minutes since the start".
func reports(d *eostest.Driver, out *eostest.OutputTopic[string]) []string {
	var got []string
	for _, r := range out.ReadAll() {
		got = append(got, fmt.Sprintf("%s@%s", r.Value, r.Timestamp.Sub(eostest.DefaultStart)))
	}
	return got
}

// Wall-clock timers fire when the wall clock is advanced: at once for a
// task that has taken a record and never fired, then at each interval on
// the way, each at its own time. A firing that fails under Fail aborts
// its batch (its store writes are undone) and is the advance's error.
func TestWallClockTimer(t *testing.T) {
	fail := false
	d := eostest.New(t, reporting(processor.WallClock, &fail))
	in := eostest.Input(d, "in", codec.String())
	out := eostest.Output(d, "reports", codec.String())
	if err := d.AdvanceWallClock(time.Minute); err != nil {
		t.Fatal(err)
	}
	if got := reports(d, out); len(got) != 0 {
		t.Fatalf("fired before its task took a record: %v", got)
	}
	pipe(t, in, "a", "")
	pipe(t, in, "b", "")
	steps := []struct {
		by   time.Duration
		want string
	}{
		{0, "[2@1m0s]"},
		{30 * time.Second, "[]"},
		{2*time.Minute + 30*time.Second, "[3@2m0s 3@3m0s 3@4m0s]"}, // "reported" is a key now
	}
	for _, s := range steps {
		if err := d.AdvanceWallClock(s.by); err != nil {
			t.Fatal(err)
		}
		if got := fmt.Sprint(reports(d, out)); got != s.want {
			t.Errorf("after %s more: %s, want %s", s.by, got, s.want)
		}
	}
	if now := d.Now().Sub(eostest.DefaultStart); now != 4*time.Minute {
		t.Errorf("clock at +%s, want +4m", now)
	}

	seen := eostest.Store(d, "seen", codec.String(), codec.Bytes())
	seen.Delete("reported")
	fail = true
	err := d.AdvanceWallClock(time.Minute)
	var te *processor.TimerError
	if !errors.As(err, &te) || te.Kind != processor.WallClock || te.Node != "report" {
		t.Fatalf("AdvanceWallClock: %v, want the TimerError of report", err)
	}
	if _, ok := seen.Get("reported"); ok {
		t.Error("the failed firing's store write was kept")
	}
	fail = false
	if err := d.AdvanceWallClock(0); err != nil { // still due
		t.Fatal(err)
	}
	if got := fmt.Sprint(reports(d, out)); got != "[2@5m0s]" {
		t.Errorf("after the failure: %s, want the firing due since", got)
	}
	if n := d.Stats().TimerFirings; n != 5 {
		t.Errorf("Stats().TimerFirings = %d, want 5: four before the failure, the failed one not (its batch aborted), the one after it", n)
	}
}

// Stream-time timers fire after the record whose timestamp moves its
// task's stream time past a multiple of the interval (once, however many
// it passes); a task's first record only sets it.
func TestStreamTimeTimer(t *testing.T) {
	fail := false
	d := eostest.New(t, reporting(processor.StreamTime, &fail))
	in := eostest.Input(d, "in", codec.String())
	out := eostest.Output(d, "reports", codec.String())
	at := func(d time.Duration) eostest.PipeOption { return eostest.Timestamp(eostest.DefaultStart.Add(d)) }
	pipe(t, in, "a", "", at(30*time.Second))
	pipe(t, in, "b", "", at(50*time.Second))
	pipe(t, in, "c", "", at(10*time.Second)) // out of order: stream time stays
	if got := reports(d, out); len(got) != 0 {
		t.Fatalf("fired within the first minute: %v", got)
	}
	pipe(t, in, "d", "", at(5*time.Minute+time.Second))
	if got := fmt.Sprint(reports(d, out)); got != "[4@5m1s]" {
		t.Errorf("reports: %s, want one firing at the record's time", got)
	}
	if err := d.AdvanceWallClock(time.Hour); err != nil {
		t.Fatal(err)
	}
	if got := reports(d, out); len(got) != 0 {
		t.Errorf("the wall clock fired a stream-time timer: %v", got)
	}
}
