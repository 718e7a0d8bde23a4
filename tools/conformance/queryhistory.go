package conformance

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/eosflow/eosflow/codec"
	"github.com/eosflow/eosflow/eos"
)

// answer is one query's value and when it was asked and answered.
type answer struct {
	start, end time.Time
	value      int64 // absent reads as 0
	who        string
}

// answers tallies what queries answered during a run, from every
// instance, in one history per key.
type answers struct {
	mu      sync.Mutex
	history map[string][]answer
	values  map[string][]int64 // per key, every value found
	absent  int
	status  map[string]int // per sentinel
	unknown []error
	ranged  int // values that came from a Range or Prefix
}

func newAnswers() *answers {
	return &answers{history: map[string][]answer{}, values: map[string][]int64{}, status: map[string]int{}}
}

func (a *answers) note(key string, ans answer, found bool, err error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	switch {
	case err == nil && found:
		a.values[key] = append(a.values[key], ans.value)
	case err == nil:
		a.absent++
	case errors.Is(err, eos.ErrNotOwner):
		a.status["not owner"]++
	case errors.Is(err, eos.ErrRestoring):
		a.status["restoring"]++
	case errors.Is(err, eos.ErrStopped):
		a.status["stopped"]++
	default:
		a.unknown = append(a.unknown, err)
	}
	if err == nil {
		a.history[key] = append(a.history[key], ans)
	}
}

// checkHistory fails t if an answer, on any instance, is smaller than one
// that ended before it started: a count never goes down, so the smaller
// one was stale (a counted key reading absent included).
func (a *answers) checkHistory(t *testing.T) {
	t.Helper()
	a.mu.Lock()
	defer a.mu.Unlock()
	for key, h := range a.history {
		byEnd := slices.Clone(h)
		slices.SortFunc(byEnd, func(x, y answer) int { return x.end.Compare(y.end) })
		slices.SortFunc(h, func(x, y answer) int { return x.start.Compare(y.start) })
		var best answer
		i := 0
		for _, x := range h {
			for ; i < len(byEnd) && byEnd[i].end.Before(x.start); i++ {
				if byEnd[i].value > best.value {
					best = byEnd[i]
				}
			}
			if x.value < best.value {
				t.Fatalf("key %s: %s answered %d after %s had answered %d: a stale read", key, x.who, x.value, best.who, best.value)
			}
		}
	}
}

// queryAll queries every key of r over and over until stop closes, into
// the shared tally, each answer with when it was asked and answered.
func queryAll(t *testing.T, who string, r *eos.Runner, keys []string, stop <-chan struct{}, into *answers) func() {
	q, err := r.Query("counts")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			time.Sleep(time.Millisecond) // leave the pipeline some CPU
			for _, k := range keys {
				select {
				case <-stop:
					return
				default:
				}
				start := time.Now()
				v, found, err := eos.GetAs(context.Background(), q, []byte(k), codec.Int64())
				into.note(k, answer{start: start, end: time.Now(), value: v, who: who}, found, err)
			}
		}
	}()
	return func() { <-done }
}

// rangeAll reads every entry of r's store with Range, and every key's
// entries with Prefix, over and over until stop closes, into the shared
// tally: an entry counts as answered between the read's start and the
// moment it was yielded.
func rangeAll(t *testing.T, who string, r *eos.Runner, keys []string, stop <-chan struct{}, into *answers) func() {
	q, err := r.Query("counts")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			case <-time.After(2 * time.Millisecond): // leave the pipeline some CPU
			}
			start := time.Now()
			seq, what := q.Range(context.Background(), nil, nil), who+" range"
			if i%2 == 1 {
				seq, what = q.Prefix(context.Background(), []byte(keys[i/2%len(keys)])), who+" prefix"
			}
			for e, err := range seq {
				var v int64
				if err == nil {
					if v, err = codec.Int64().Decode(e.Value); err != nil {
						into.note(string(e.Key), answer{}, false, err)
						break
					}
				}
				into.noteRange(string(e.Key), answer{start: start, end: time.Now(), value: v, who: what}, err)
			}
		}
	}()
	return func() { <-done }
}

// noteRange is note for an entry of a Range or Prefix, or the error that
// ended one.
func (a *answers) noteRange(key string, ans answer, err error) {
	a.note(key, ans, err == nil, err)
	if err == nil {
		a.mu.Lock()
		a.ranged++
		a.mu.Unlock()
	}
}
