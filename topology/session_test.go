package topology_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/eosflow/eosflow/internal/engine"
	"github.com/eosflow/eosflow/topology"
	"github.com/twmb/franz-go/pkg/kgo"
)

// sessionAt sends a record of key a with event time sec seconds and a
// header trace=sec, and returns its outputs: an update as its value, a
// tombstone as "-[start,end]" (its window headers, in seconds) with its
// timestamp and the headers it kept, so that a test sees which window a
// tombstone retracts.
func (r *rig) sessionAt(sec int) []string {
	r.t.Helper()
	r.ts = time.Unix(int64(sec), 0)
	var out []string
	in := &kgo.Record{Topic: "clicks", Key: []byte("a"), Value: []byte("click"), Timestamp: r.ts,
		Headers: []kgo.RecordHeader{{Key: "trace", Value: fmt.Appendf(nil, "%d", sec)}}}
	got, err := r.e.Process(context.Background(), in, func(o *kgo.Record) {
		if o.Value != nil {
			out = append(out, string(o.Value))
			return
		}
		win := map[string]string{}
		var kept []string
		for _, h := range o.Headers {
			switch h.Key {
			case topology.HeaderWindowStart, topology.HeaderWindowEnd:
				t, err := time.Parse(topology.WindowTimeFormat, string(h.Value))
				if err != nil {
					r.t.Errorf("header %s=%q: %v", h.Key, h.Value, err)
				}
				win[h.Key] = fmt.Sprint(t.Unix())
			default:
				kept = append(kept, h.Key+"="+string(h.Value))
			}
		}
		out = append(out, fmt.Sprintf("%s:-[%s,%s]@%d %s", o.Key, win[topology.HeaderWindowStart], win[topology.HeaderWindowEnd],
			o.Timestamp.Unix(), strings.Join(kept, ",")))
	})
	if err != nil || got != engine.Processed {
		r.t.Fatalf("a at %d s: outcome %v, error %v", sec, got, err)
	}
	return out
}

// Under every-update output, a record that merges two sessions retracts
// both (neither window exists any more) before the merged session, with
// the record's timestamp and headers.
func TestSessionMergeRetracts(t *testing.T) {
	r := newRig(t, sessionCount(topology.Session(10*time.Second).Grace(20*time.Second)))
	r.sessionAt(0)
	r.sessionAt(5)
	if got := r.sessionAt(20); !slices.Equal(got, []string{"[20,20]=1"}) {
		t.Fatalf("20 s is beyond the gap of 5 s, a new session: %v", got)
	}
	want := []string{"a:-[0,5]@12 trace=12", "a:-[20,20]@12 trace=12", "[0,20]=4"}
	if got := r.sessionAt(12); !slices.Equal(got, want) {
		t.Fatalf("12 s bridges [0,5] and [20,20]: outputs\n%v\nwant\n%v", got, want)
	}
}

// A session that grows has a new window, so its old one is retracted;
// a record within a session's span changes no window and retracts
// nothing. Growing backwards (out of order) retracts as well.
func TestSessionGrowthRetracts(t *testing.T) {
	r := newRig(t, sessionCount(topology.Session(10*time.Second).Grace(20*time.Second)))
	for _, step := range []struct {
		sec  int
		want []string
	}{
		{10, []string{"[10,10]=1"}},
		{15, []string{"a:-[10,10]@15 trace=15", "[10,15]=2"}},
		{12, []string{"[10,15]=3"}}, // within [10,15]: the same window
		{4, []string{"a:-[10,15]@4 trace=4", "[4,15]=4"}},
	} {
		if got := r.sessionAt(step.sec); !slices.Equal(got, step.want) {
			t.Fatalf("a at %d s: outputs %v, want %v", step.sec, got, step.want)
		}
	}
}

// FinalOnly retracts nothing: merges emit nothing, and the merged session
// comes out once, when it closes.
func TestSessionFinalRetractsNothing(t *testing.T) {
	r := newRig(t, sessionCount(topology.Session(10*time.Second).Grace(20*time.Second).FinalOnly()))
	for _, sec := range []int{0, 5, 20, 12, 15} {
		if got := r.sessionAt(sec); len(got) != 0 {
			t.Fatalf("a at %d s: outputs %v, want none before the session closes", sec, got)
		}
	}
	if got := r.sessionAt(60); !slices.Equal(got, []string{"[0,20]=5"}) {
		t.Fatalf("a at 60 s closes [0,20]: outputs %v", got)
	}
}
