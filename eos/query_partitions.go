package eos

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// partitionCounts caches the partition counts of stores' source topics,
// for Locate, and asks again after partitionCountAge, or
// partitionCountRetry after the brokers failed to answer. One refresh per
// topic runs at a time, outside the lock, bounded by
// partitionCountTimeout: meanwhile the last count known answers, and
// when none is known yet the callers wait for that refresh's answer
// rather than each asking the brokers; until the retry, a failure
// answers with the last count known, or else with its error.
type partitionCounts struct {
	mu     sync.Mutex
	counts map[string]int32
	asked  map[string]time.Time     // the last time the brokers were asked
	asking map[string]chan struct{} // a refresh under way; closed when it ends
	failed map[string]error         // why the last refresh failed, for its waiters
	// ask asks the brokers (askPartitionCount; tests replace it).
	ask func(ctx context.Context, rs []*Runner, topic string) (int32, error)
}

// partitionCountAge is how long a partition count is trusted.
const partitionCountAge = time.Minute

// partitionCountRetry is how soon a partition count the brokers failed
// to give is asked again: meanwhile callers get no new refresh to wait on.
const partitionCountRetry = 5 * time.Second

// partitionCountTimeout bounds a refresh of a partition count.
const partitionCountTimeout = 5 * time.Second

// count is topic's partition count, asked with the admin client of the
// first running Runner of rs when it is unknown or old.
func (pc *partitionCounts) count(ctx context.Context, rs []*Runner, topic string) (int32, error) {
	pc.mu.Lock()
	pc.init()
	n, known := pc.counts[topic]
	wait := pc.asking[topic]
	failed := pc.failed[topic]
	age := partitionCountAge
	if failed != nil {
		age = partitionCountRetry
	}
	fresh := time.Since(pc.asked[topic]) < age
	switch {
	case known && (wait != nil || fresh):
		pc.mu.Unlock()
		return n, nil
	case wait == nil && fresh && failed != nil:
		pc.mu.Unlock()
		return 0, failed
	}
	if wait != nil {
		pc.mu.Unlock()
		select {
		case <-wait:
		case <-ctx.Done():
			return 0, ctx.Err()
		}
		pc.mu.Lock()
		defer pc.mu.Unlock()
		if n, ok := pc.counts[topic]; ok {
			return n, nil
		}
		return 0, pc.failed[topic]
	}
	done := make(chan struct{})
	pc.asking[topic] = done
	pc.mu.Unlock()

	// Its waiters share the answer: one caller going away must not end it.
	actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), partitionCountTimeout)
	ask := pc.ask
	if ask == nil {
		ask = askPartitionCount
	}
	got, err := ask(actx, rs, topic)
	cancel()

	pc.mu.Lock()
	defer pc.mu.Unlock()
	delete(pc.asking, topic)
	close(done)
	if err == nil {
		pc.counts[topic], pc.asked[topic] = got, time.Now()
		delete(pc.failed, topic)
		return got, nil
	}
	pc.failed[topic] = err
	if !errors.Is(err, ErrStopped) { // no client yet: no broker was asked
		pc.asked[topic] = time.Now()
	}
	if known {
		return n, nil
	}
	return 0, err
}

// init makes the maps that are still nil.
func (pc *partitionCounts) init() {
	if pc.counts == nil {
		pc.counts, pc.asked = map[string]int32{}, map[string]time.Time{}
	}
	if pc.asking == nil {
		pc.asking, pc.failed = map[string]chan struct{}{}, map[string]error{}
	}
}

// unavailableError is a partition count the brokers did not give: a
// query can be answered once they do.
type unavailableError struct{ err error }

func (e *unavailableError) Error() string { return e.err.Error() }
func (e *unavailableError) Unwrap() error { return e.err }

// askPartitionCount asks the brokers for topic's partition count.
func askPartitionCount(ctx context.Context, rs []*Runner, topic string) (int32, error) {
	var admin *kgo.Client
	for _, w := range rs {
		if admin = w.health.admin.Load(); admin != nil {
			break
		}
	}
	if admin == nil {
		return 0, ErrStopped
	}
	td, err := kadm.NewClient(admin).ListTopics(ctx, topic)
	if err == nil {
		err = td.Error()
	}
	if err != nil {
		return 0, &unavailableError{fmt.Errorf("eos: the partition count of topic %q: %w", topic, err)}
	}
	n := int32(len(td[topic].Partitions))
	if n == 0 {
		return 0, fmt.Errorf("eos: topic %q has no partitions in the brokers' metadata; check that it exists", topic)
	}
	return n, nil
}
