package store

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/eosflow/eosflow/state"
	"github.com/eosflow/eosflow/state/pebble"
)

// committedGet is CommittedGet as a string, "" when absent.
func committedGet(t *testing.T, s *Store, key string) string {
	t.Helper()
	v, ok, err := s.CommittedGet([]byte(key))
	must(t, err)
	if !ok {
		return ""
	}
	return string(v)
}

// Committed reads see what committed batches applied, never the open
// batch's overlay, and an aborted batch's writes never: for both engines.
func TestCommittedReadsSkipTheOverlay(t *testing.T) {
	for _, e := range []state.Engine{state.Memory(), pebble.New()} {
		t.Run(e.String(), func(t *testing.T) {
			s, err := Open(e, t.TempDir(), "counts", task)
			must(t, err)
			defer s.Close()
			put(t, s, "a", "1", "b", "1")
			if got := committedGet(t, s, "a"); got != "" {
				t.Fatalf("an open batch's write is visible: a = %q", got)
			}
			if v, _, _ := s.Get([]byte("a")); string(v) != "1" {
				t.Fatalf("the batch itself does not see its write: %q", v)
			}
			must(t, s.Commit(10))
			if got := committedGet(t, s, "a"); got != "1" {
				t.Fatalf("after the commit a = %q, want 1", got)
			}
			put(t, s, "a", "2", "c", "9")
			must(t, s.Delete([]byte("b")))
			if a, b, c := committedGet(t, s, "a"), committedGet(t, s, "b"), committedGet(t, s, "c"); a != "1" || b != "1" || c != "" {
				t.Fatalf("open batch visible: a=%q b=%q c=%q, want 1, 1 and absent", a, b, c)
			}
			var keys []string
			_, err = s.CommittedRange(nil, nil, 0, func(k, v []byte) bool {
				keys = append(keys, string(k)+"="+string(v))
				return true
			})
			must(t, err)
			if fmt.Sprint(keys) != "[a=1 b=1]" {
				t.Fatalf("committed range %v, want [a=1 b=1]", keys)
			}
			s.Abort()
			if a, b, c := committedGet(t, s, "a"), committedGet(t, s, "b"), committedGet(t, s, "c"); a != "1" || b != "1" || c != "" {
				t.Fatalf("aborted batch visible: a=%q b=%q c=%q", a, b, c)
			}
			must(t, s.Close())
			if _, _, err := s.CommittedGet([]byte("a")); !errors.Is(err, state.ErrClosed) {
				t.Fatalf("a closed store's committed read: %v, want ErrClosed", err)
			}
		})
	}
}

// CommittedRange stops after limit entries and says where, so that a
// caller reads a range in pieces that join up exactly.
func TestCommittedRangeInPieces(t *testing.T) {
	s, err := Open(state.Memory(), "", "counts", task)
	must(t, err)
	defer s.Close()
	for i := range 10 {
		put(t, s, fmt.Sprintf("k%02d", i), "v")
	}
	must(t, s.Commit(1))
	var got []string
	cursor := []byte("k01")
	for {
		n := 0
		last, err := s.CommittedRange(cursor, []byte("k09"), 3, func(k, _ []byte) bool {
			got = append(got, string(k))
			n++
			return true
		})
		must(t, err)
		if n < 3 {
			break
		}
		cursor = append(last, 0)
	}
	if want := "[k01 k02 k03 k04 k05 k06 k07 k08]"; fmt.Sprint(got) != want {
		t.Fatalf("pieces joined to %v, want %s", got, want)
	}
}

// Committed reads from other goroutines while batches apply and abort
// see only whole committed batches: every batch writes the same value to
// every key, so a reader sees one value across a range, and never an
// aborted batch's (odd) value. Run with -race.
func TestCommittedReadsWhileBatchesApply(t *testing.T) {
	for _, e := range []state.Engine{state.Memory(), pebble.New()} {
		t.Run(e.String(), func(t *testing.T) {
			s, err := Open(e, t.TempDir(), "counts", task)
			must(t, err)
			defer s.Close()
			var wg sync.WaitGroup
			stop := make(chan struct{})
			errc := make(chan error, 1)
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					select {
					case <-stop:
						return
					default:
					}
					seen := map[string]bool{}
					_, err := s.CommittedRange(nil, nil, 0, func(_, v []byte) bool { seen[string(v)] = true; return true })
					if err == nil && len(seen) > 1 {
						err = fmt.Errorf("one range saw several batches: %v", seen)
					}
					for v := range seen {
						if err == nil && v[len(v)-1]%2 == 1 {
							err = fmt.Errorf("an aborted batch's value %q is visible", v)
						}
					}
					if err != nil {
						errc <- err
						return
					}
				}
			}()
			for i := range 200 {
				for k := range 20 {
					put(t, s, fmt.Sprintf("k%d", k), fmt.Sprintf("v%d", i))
				}
				if i%2 == 1 {
					s.Abort()
					continue
				}
				must(t, s.Commit(int64(i+1)))
			}
			close(stop)
			wg.Wait()
			select {
			case err := <-errc:
				t.Fatal(err)
			default:
			}
		})
	}
}

// The key CommittedRange hands fn is fn's own: writing it does not change
// the last key returned, where a caller's next piece starts.
func TestCommittedRangeKeyIsTheCallers(t *testing.T) {
	s, err := Open(state.Memory(), "", "counts", task)
	must(t, err)
	defer s.Close()
	put(t, s, "a", "1", "b", "2")
	must(t, s.Commit(1))
	last, err := s.CommittedRange(nil, nil, 0, func(k, _ []byte) bool {
		k[0] = 'z'
		return true
	})
	must(t, err)
	if string(last) != "b" {
		t.Fatalf("last = %q after fn wrote its key, want b", last)
	}
}

// Committed reads do not wait for the store's lock, which a commit holds
// while it applies a batch.
func TestCommittedReadsDoNotWaitForCommits(t *testing.T) {
	s, err := Open(state.Memory(), "", "counts", task)
	must(t, err)
	defer s.Close()
	put(t, s, "a", "1")
	must(t, s.Commit(1))
	s.mu.Lock() // a commit under way
	defer s.mu.Unlock()
	done := make(chan string, 1)
	go func() {
		v, _, err := s.CommittedGet([]byte("a"))
		if err != nil {
			done <- err.Error()
			return
		}
		_, err = s.CommittedRange(nil, nil, 0, func(_, _ []byte) bool { return true })
		if err != nil {
			done <- err.Error()
			return
		}
		done <- string(v)
	}()
	select {
	case got := <-done:
		if got != "1" {
			t.Fatalf("committed read = %q, want 1", got)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a committed read waited for the store's lock")
	}
}
