package eos

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"
)

// offsetFloor holds, per input partition, the highest offset this process
// saw its own commits reach. A group's committed offsets never move back
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
}

// wait notes that adjustFetched waits for behind, and returns since when;
// grace is how long a pause may have lasted for the clock to run on.
func (f *offsetFloor) wait(behind []string, grace time.Duration) time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.since.IsZero() || len(f.waits) == 0 && time.Since(f.paused) > grace {
		f.since = time.Now()
	}
	f.waits = behind
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

// raise records the offsets a commit of this process reached. The latest
// commit wins, not the highest: this process's own commits come in order,
// and one below an earlier (a topic created again, a log truncated) is
// what the group now holds.
func (f *offsetFloor) raise(offsets map[string]map[int32]kgo.EpochOffset) {
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
			f.at[topic][p] = o.Offset
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
// recovery_timeout, committed offsets below those this process itself
// committed: consuming from them would process records again.
type OffsetsBehindError struct {
	Group      string
	Partitions []string // "topic/partition: answered, committed"
	Waited     time.Duration
	Err        error // the last failure to ask again, if the last ask failed
}

// Unwrap returns the last failure to ask the group's offsets again.
func (e *OffsetsBehindError) Unwrap() error { return e.Err }

func (e *OffsetsBehindError) Error() string {
	if e.Err != nil {
		return fmt.Sprintf("%s; asking again last failed: %v", e.base(), e.Err)
	}
	return e.base()
}

func (e *OffsetsBehindError) base() string {
	return fmt.Sprintf("eos: group %q's coordinator answered committed offsets below those this process committed, for %s (waited %s): the broker lost or has not loaded the group's offsets (or the topic was deleted and created again), and consuming from them would process records again; inspect with `eosctl group lag %s` and the broker's log for the __consumer_offsets partition of the group",
		e.Group, strings.Join(e.Partitions, "; "), e.Waited.Round(time.Second), e.Group)
}

// adjustFetched is the client's AdjustFetchOffsetsFn: offsets fetched below
// the floor are not used; the group's offsets are asked again until they
// reach it, for up to recovery_timeout, and then Run stops.
func (r *Runner) adjustFetched(ctx context.Context, fetched map[string]map[int32]kgo.Offset) (map[string]map[int32]kgo.Offset, error) {
	behind := r.floor.behind(fetched)
	if len(behind) == 0 {
		r.floor.answered()
		return fetched, nil
	}
	since := r.floor.wait(behind, r.cfg.RebalanceTimeout)
	defer r.floor.pause()
	r.log.Warn("the group's coordinator answered committed offsets below those this process committed; waiting for it to load the group before consuming them",
		zap.Strings("partitions", behind), zap.Duration("waited", time.Since(since)), zap.Duration("bound", r.cfg.RecoveryTimeout))
	for next := time.Now().Add(10 * time.Second); ; {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(time.Second):
		}
		again, ferr := r.fetchCommitted(ctx, fetched)
		r.floor.failed(ferr)
		if ferr == nil {
			if behind = r.floor.behind(again); len(behind) == 0 {
				r.floor.answered()
				r.log.Info("the group's committed offsets are back", zap.Duration("waited", time.Since(since)))
				return again, nil
			}
			r.floor.wait(behind, r.cfg.RebalanceTimeout)
		}
		if err := r.floorBound(); err != nil {
			return nil, err
		}
		if time.Now().After(next) {
			r.log.Warn("still waiting for the group's committed offsets", zap.Strings("partitions", behind), zap.Duration("waited", time.Since(since)), zap.Error(ferr))
			next = time.Now().Add(10 * time.Second)
		}
	}
}

// floorBound returns an *OffsetsBehindError once the wait of adjustFetched
// that runs now has lasted past recovery_timeout.
func (r *Runner) floorBound() error {
	behind, since, err := r.floor.waiting()
	if len(behind) == 0 {
		return nil
	}
	if waited := time.Since(since); waited > r.cfg.RecoveryTimeout {
		return &OffsetsBehindError{Group: r.cfg.AppID, Partitions: behind, Waited: waited, Err: err}
	}
	return nil
}

// fetchCommitted asks the group's committed offsets of the partitions of
// fetched again, keeping each kgo reset offset where none is committed.
func (r *Runner) fetchCommitted(ctx context.Context, fetched map[string]map[int32]kgo.Offset) (map[string]map[int32]kgo.Offset, error) {
	topics := make([]string, 0, len(fetched))
	for t := range fetched {
		topics = append(topics, t)
	}
	resp, err := kadm.NewClient(r.admin).FetchOffsetsForTopics(kadm.RequireStable(ctx), r.cfg.AppID, topics...)
	if err != nil {
		return nil, err
	}
	out := make(map[string]map[int32]kgo.Offset, len(fetched))
	for topic, ps := range fetched {
		out[topic] = make(map[int32]kgo.Offset, len(ps))
		for p, o := range ps {
			got, ok := resp.Lookup(topic, p)
			switch {
			case ok && got.Err != nil:
				return nil, fmt.Errorf("%s/%d: %w", topic, p, got.Err)
			case ok && got.At >= 0:
				out[topic][p] = kgo.NewOffset().At(got.At).WithEpoch(got.LeaderEpoch)
			default:
				out[topic][p] = o
			}
		}
	}
	return out, nil
}

// errBelowFloor: a committed offset answered below this process's own.
var errBelowFloor = errors.New("the group's coordinator answered an offset below one this process committed")

// committedBelowFloor returns an error when the group's committed offsets,
// as answered for any partition of offsets, lie below the floor: that is no
// answer about a commit, but a broker that has not loaded the group.
func (r *Runner) committedBelowFloor(committed kadm.OffsetResponses, offsets map[string]map[int32]kgo.EpochOffset) error {
	for topic, ps := range offsets {
		for p := range ps {
			got, ok := committed.Lookup(topic, p)
			if !ok || got.Err != nil {
				continue // unsettled anyway
			}
			if floor, is := r.floor.below(topic, p, got.At); is {
				return fmt.Errorf("%s/%d at %s, below %d: %w", topic, p, describeOffset(got.At), floor, errBelowFloor)
			}
		}
	}
	return nil
}
