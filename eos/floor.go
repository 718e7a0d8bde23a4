package eos

import (
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/eosflow/eosflow/topology"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// offsetFloor holds, per input partition, the offset this process saw its
// own commits reach, raised to what the offsets mirror says at each
// assignment (see learnMirror). A group's committed offsets never move back
// while its members run, so an answer below the floor is a broker that has
// not (yet) loaded the group: Apache Kafka 4.4's group coordinator can, after
// a restart on a slow machine, serve a group from an empty state for seconds
// when a stale load completes into a newer one (its log says "Ignored load
// completion from __consumer_offsets-N"). Trusting that answer resets the
// partitions to their start and processes them again.
type offsetFloor struct {
	mu sync.Mutex
	at map[string]map[int32]int64
	// waits names the partitions adjustFetched waits for, since when,
	// and the last error asking again. The clock runs on across the
	// rebalances that cut a wait short, unless the wait was paused for
	// longer than a rebalance takes: then a new wait starts over.
	waits   []string
	since   time.Time
	paused  time.Time
	lastErr error
	unread  bool // the wait is for the offsets mirror to be read (see learnMirror)
}

// wait notes that adjustFetched waits for behind, and returns since when;
// grace is how long a pause may have lasted for the clock to run on.
func (f *offsetFloor) wait(behind []string, grace time.Duration) time.Time {
	return f.waitFor(behind, grace, false)
}

// waitUnread notes that learnMirror waits to read the offsets mirror
// partitions parts; the clock is wait's.
func (f *offsetFloor) waitUnread(parts []string, grace time.Duration) time.Time {
	return f.waitFor(parts, grace, true)
}

func (f *offsetFloor) waitFor(parts []string, grace time.Duration, unread bool) time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.since.IsZero() || len(f.waits) == 0 && time.Since(f.paused) > grace {
		f.since = time.Now()
	}
	f.waits, f.unread = parts, unread
	return f.since
}

// pause: the wait was cut short (a rebalance, a rebuild).
func (f *offsetFloor) pause() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.waits, f.paused = nil, time.Now()
}

// answered: the group's offsets reached the floor.
func (f *offsetFloor) answered() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.waits, f.since, f.lastErr = nil, time.Time{}, nil
}

// failed notes the error of the last attempt to ask again.
func (f *offsetFloor) failed(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.lastErr = err
}

// waiting returns the partitions adjustFetched waits for now (none while
// no wait runs), since when, and the last error asking again.
func (f *offsetFloor) waiting() ([]string, time.Time, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.waits, f.since, f.lastErr
}

// waitingUnread reports whether the wait is for the mirror to be read.
func (f *offsetFloor) waitingUnread() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.unread
}

// raise records the offsets a commit of this process reached. The latest
// commit wins, not the highest: this process's own commits come in order,
// and one below an earlier (a topic created again, a log truncated) is
// what the group now holds.
func (f *offsetFloor) raise(offsets map[string]map[int32]kgo.EpochOffset) {
	f.set(offsets, false)
}

// raiseTo raises the floor to offsets where they are higher: what the
// offsets mirror said at an assignment may be older than what this
// process committed since (a newer record hidden by an open transaction).
func (f *offsetFloor) raiseTo(offsets map[string]map[int32]kgo.EpochOffset) {
	f.set(offsets, true)
}

// set records offsets, each only where it is higher when onlyHigher.
func (f *offsetFloor) set(offsets map[string]map[int32]kgo.EpochOffset, onlyHigher bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.at == nil {
		f.at = make(map[string]map[int32]int64)
	}
	for topic, ps := range offsets {
		for p, o := range ps {
			if f.at[topic] == nil {
				f.at[topic] = make(map[int32]int64)
			}
			if cur, ok := f.at[topic][p]; !onlyHigher || !ok || o.Offset > cur {
				f.at[topic][p] = o.Offset
			}
		}
	}
}

// below reports whether at lies below the floor of a partition, and the
// floor; a partition where this process committed nothing has none.
func (f *offsetFloor) below(topic string, p int32, at int64) (floor int64, is bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	floor, ok := f.at[topic][p]
	return floor, ok && at < floor
}

// behind lists the partitions whose fetched offset lies below their floor,
// as "topic/partition: got, committed" lines; kgo gives a partition with no
// committed offset its reset offset, which is negative here.
func (f *offsetFloor) behind(fetched map[string]map[int32]kgo.Offset) []string {
	var out []string
	for topic, ps := range fetched {
		for p, o := range ps {
			if floor, is := f.below(topic, p, o.EpochOffset().Offset); is {
				out = append(out, fmt.Sprintf("%s/%d: %s, committed %d", topic, p, describeOffset(o.EpochOffset().Offset), floor))
			}
		}
	}
	sort.Strings(out)
	return out
}

func describeOffset(at int64) string {
	if at < 0 {
		return "none"
	}
	return fmt.Sprint(at)
}

// OffsetsBehindError means the group's coordinator kept answering, past
// recovery_timeout, committed offsets below those the app's last commits
// reached (as this process saw them, or as the offsets mirror records
// them), or, with Unread, that the mirror could not be read to check:
// consuming from them could process records again.
type OffsetsBehindError struct {
	Group      string
	Partitions []string // "topic/partition: answered, committed"; with Unread, the mirror's partitions
	Waited     time.Duration
	Err        error // the last failure to ask the group again, or to read the mirror
	// Unread: the offsets mirror (topology.OffsetsTopic) could not be
	// read, so the group's answer could not be checked against it.
	Unread bool
}

// Unwrap returns the last failure to ask the group again or read the mirror.
func (e *OffsetsBehindError) Unwrap() error { return e.Err }

func (e *OffsetsBehindError) Error() string {
	if e.Err == nil {
		return e.base()
	}
	if e.Unread {
		return fmt.Sprintf("%s; the last read failed: %v", e.base(), e.Err)
	}
	return fmt.Sprintf("%s; asking again last failed: %v", e.base(), e.Err)
}

func (e *OffsetsBehindError) base() string {
	mirror := topology.OffsetsTopic(e.Group)
	if e.Unread {
		return fmt.Sprintf("eos: the offsets mirror %s could not be read for partitions %s (waited %s), so group %q's committed offsets could not be checked against it, and consuming from them unchecked could process records again if the broker forgot them; inspect with `eosctl topic describe %s` and `eosctl txn hanging --topic %s`",
			mirror, strings.Join(e.Partitions, ", "), e.Waited.Round(time.Second), e.Group, mirror, mirror)
	}
	return fmt.Sprintf("eos: group %q's coordinator answered committed offsets below those the app's last commits reached (as this process saw them, or as the offsets mirror %s records them), for %s (waited %s): the broker lost or has not loaded the group's offsets, and consuming from them would process records again; inspect with `eosctl group lag %s` and the broker's log for the __consumer_offsets partition of the group. If the offsets were reset on purpose, also delete the mirror while the app is stopped (`eosctl topic delete %s --yes`)",
		e.Group, mirror, strings.Join(e.Partitions, "; "), e.Waited.Round(time.Second), e.Group, mirror)
}

// bound returns an *OffsetsBehindError once the wait of adjustFetched
// that runs now has lasted past recovery_timeout.
func (f *offsetFloor) bound(group string, recovery time.Duration) error {
	behind, since, err := f.waiting()
	if len(behind) == 0 {
		return nil
	}
	if waited := time.Since(since); waited > recovery {
		return &OffsetsBehindError{Group: group, Partitions: behind, Waited: waited, Err: err, Unread: f.waitingUnread()}
	}
	return nil
}

// errBelowFloor: a committed offset answered below this process's own.
var errBelowFloor = errors.New("the group's coordinator answered an offset below one this process committed")

// committedBelow returns an error when the group's committed offsets,
// as answered for any partition of offsets, lie below the floor: that is no
// answer about a commit, but a broker that has not loaded the group.
func (f *offsetFloor) committedBelow(committed kadm.OffsetResponses, offsets map[string]map[int32]kgo.EpochOffset) error {
	for topic, ps := range offsets {
		for p := range ps {
			got, ok := committed.Lookup(topic, p)
			if !ok || got.Err != nil {
				continue // unsettled anyway
			}
			if floor, is := f.below(topic, p, got.At); is {
				return fmt.Errorf("%s/%d at %s, below %d: %w", topic, p, describeOffset(got.At), floor, errBelowFloor)
			}
		}
	}
	return nil
}
