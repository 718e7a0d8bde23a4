package topology_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/eosflow/eosflow/codec"
	"github.com/eosflow/eosflow/state"
	"github.com/eosflow/eosflow/topology"
)

// The JSON of a windowed result is stable: lowercase names, times in RFC
// 3339 UTC with three fractional digits, and it decodes to an equal value.
func TestWindowedJSON(t *testing.T) {
	start := time.Date(2026, 1, 2, 15, 4, 5, 250_000_000, time.UTC)
	end := time.Date(2026, 1, 2, 15, 5, 0, 0, time.UTC)
	w := topology.Windowed[int64]{Window: topology.Window{Start: start, End: end}, Value: 5}
	c := codec.JSON[topology.Windowed[int64]]()
	b, err := c.Encode(w)
	const want = `{"window":{"start":"2026-01-02T15:04:05.250Z","end":"2026-01-02T15:05:00.000Z"},"value":5}`
	if err != nil || string(b) != want {
		t.Fatalf("Encode = %s, %v; want %s", b, err, want)
	}
	got, err := c.Decode(b)
	if err != nil || got != w {
		t.Fatalf("Decode = %+v, %v; want %+v", got, err, w)
	}

	// Another zone encodes as the same instant in UTC.
	zone := time.FixedZone("UTC+1", 3600)
	w.Window.Start, w.Window.End = start.In(zone), end.In(zone)
	if b, err := c.Encode(w); err != nil || string(b) != want {
		t.Fatalf("Encode in UTC+1 = %s, %v; want %s", b, err, want)
	}
}

// Decoding takes any RFC 3339 time, in UTC, including the untagged form
// of Go's default encoding; it rejects anything else.
func TestWindowedJSONDecodes(t *testing.T) {
	c := codec.JSON[topology.Windowed[int64]]()
	start := time.Date(2026, 1, 2, 15, 4, 0, 0, time.UTC)
	want := topology.Windowed[int64]{Window: topology.Window{Start: start, End: start.Add(time.Minute)}, Value: 5}
	for _, in := range []string{
		`{"Window":{"Start":"2026-01-02T15:04:00Z","End":"2026-01-02T15:05:00Z"},"Value":5}`,
		`{"window":{"start":"2026-01-02T16:04:00.000+01:00","end":"2026-01-02T15:05:00.000000000Z"},"value":5}`,
	} {
		if got, err := c.Decode([]byte(in)); err != nil || got != want {
			t.Errorf("Decode(%s) = %+v, %v; want %+v", in, got, err, want)
		}
	}
	for _, in := range []string{
		`{"window":{"start":1767366240000,"end":"2026-01-02T15:05:00.000Z"},"value":5}`,
		`{"window":{"start":"2026-01-02 15:04:00","end":"2026-01-02T15:05:00.000Z"},"value":5}`,
		`{"window":{"start":"2026-01-02T15:04:00.000Z"},"value":5}`,
	} {
		if got, err := c.Decode([]byte(in)); err == nil {
			t.Errorf("Decode(%s) = %+v, want an error", in, got)
		}
	}
}

// windowJSON counts clicks in w and writes the results with codec.JSON.
func windowJSON(w topology.Windows) *topology.Topology {
	top := topology.New()
	in := topology.Source(top, "clicks", codec.String(), topology.Named("in"))
	counts := topology.CountWindows(topology.GroupByKey(in, "by-user"), "counts", w, state.Memory())
	topology.ToTable(counts, "counts", codec.JSON[topology.Windowed[int64]](), topology.Named("out"))
	return top
}

// What the aggregations emit: the record's own key, and the window in the
// value, the same shape for tumbling and session windows. The session
// grows, so its old window is retracted first, with a tombstone.
func TestWindowedJSONOutputs(t *testing.T) {
	first := time.Date(2026, 1, 2, 15, 4, 5, 250_000_000, time.UTC)
	for _, tc := range []struct {
		name    string
		w       topology.Windows
		retract []string
		want    string
		decoded topology.Window
	}{
		{"tumbling", topology.Tumbling(time.Minute), nil,
			`counts:a={"window":{"start":"2026-01-02T15:04:00.000Z","end":"2026-01-02T15:05:00.000Z"},"value":2}`,
			topology.Window{Start: first.Truncate(time.Minute), End: first.Truncate(time.Minute).Add(time.Minute)}},
		{"session", topology.Session(10 * time.Second), []string{"counts:a="},
			`counts:a={"window":{"start":"2026-01-02T15:04:05.250Z","end":"2026-01-02T15:04:07.500Z"},"value":2}`,
			topology.Window{Start: first, End: first.Add(2250 * time.Millisecond)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t, windowJSON(tc.w))
			r.ts = first
			r.must("clicks", 0, "a", "click")
			r.ts = first.Add(2250 * time.Millisecond)
			out := r.must("clicks", 0, "a", "click")
			if want := append(slices.Clip(tc.retract), tc.want); !slices.Equal(out, want) {
				t.Fatalf("outputs %q, want %q", out, want)
			}
			_, v, _ := strings.Cut(out[len(out)-1], "=")
			got, err := codec.JSON[topology.Windowed[int64]]().Decode([]byte(v))
			if want := (topology.Windowed[int64]{Window: tc.decoded, Value: 2}); err != nil || got != want {
				t.Fatalf("Decode = %+v, %v; want %+v", got, err, want)
			}
		})
	}
}
