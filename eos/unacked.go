package eos

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// unackedOutputs is a client hook that follows the records the producer
// holds, by partition, so that a batch whose outputs a broker never
// acknowledges (a leader gone or cut off, an output or dead-letter
// partition left without one) ends naming the partitions, not only the
// deadline it ran out of. It follows records only while the pipeline is
// failing (on): in steady state it costs two atomic loads a record, not
// a map's insert and delete. The first batch that fails is told by its
// deadline alone; the attempts after it, whose error Run returns past
// recovery_timeout, name the partitions.
type unackedOutputs struct {
	on *atomic.Bool // the pipeline is failing (streamLoop.failing)
	n  atomic.Int64 // entries in at: none to forget once off
	mu sync.Mutex
	at map[*kgo.Record]topicPartition
}

func newUnackedOutputs(on *atomic.Bool) *unackedOutputs {
	return &unackedOutputs{on: on, at: map[*kgo.Record]topicPartition{}}
}

// OnProduceRecordPartitioned notes the partition the producer put r in.
func (u *unackedOutputs) OnProduceRecordPartitioned(r *kgo.Record, _ int32) {
	if !u.on.Load() {
		return
	}
	u.mu.Lock()
	if _, ok := u.at[r]; !ok {
		u.n.Add(1)
	}
	u.at[r] = topicPartition{r.Topic, r.Partition}
	u.mu.Unlock()
}

// OnProduceRecordUnbuffered forgets r: its promise runs.
func (u *unackedOutputs) OnProduceRecordUnbuffered(r *kgo.Record, _ error) {
	if u.n.Load() == 0 {
		return
	}
	u.mu.Lock()
	if _, ok := u.at[r]; ok {
		delete(u.at, r)
		u.n.Add(-1)
	}
	u.mu.Unlock()
}

// held counts the records the producer holds, per partition.
func (u *unackedOutputs) held() map[topicPartition]int {
	u.mu.Lock()
	defer u.mu.Unlock()
	n := map[topicPartition]int{}
	for _, tp := range u.at {
		n[tp]++
	}
	return n
}

// unackedError: a batch's outputs were not all acknowledged before its
// end's bound. It names each partition holding records and what the
// brokers' metadata said of its leader then.
type unackedError struct {
	parts []unackedPartition
	err   error // the flush's error
}

// unackedPartition is one partition holding unacknowledged records.
type unackedPartition struct {
	tp      topicPartition
	records int
	leader  string // what the metadata said of its leader
}

func (e *unackedError) Error() string {
	var b strings.Builder
	topics := map[string]bool{}
	for i, p := range e.parts {
		if i > 0 {
			b.WriteString("; ")
		}
		fmt.Fprintf(&b, "%s/%d: %d held, %s", p.tp.topic, p.tp.partition, p.records, p.leader)
		topics[p.tp.topic] = true
	}
	return fmt.Sprintf("partitions did not acknowledge the batch's records (%s); check their leaders with `eosctl topic describe %s`: %v",
		b.String(), strings.Join(slices.Sorted(maps.Keys(topics)), " "), e.err)
}

func (e *unackedError) Unwrap() error { return e.err }

// unackedAfter explains err, a flush that ran out of time with records
// still held, by the partitions holding them; other errors it returns as
// they are. It asks cl for the partitions' leaders within bound.
func unackedAfter(err error, u *unackedOutputs, cl *kgo.Client, bound time.Duration) error {
	if !errors.Is(err, context.DeadlineExceeded) || u == nil {
		return err
	}
	held := u.held()
	if len(held) == 0 {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), bound)
	defer cancel()
	topics := map[string]bool{}
	for tp := range held {
		topics[tp.topic] = true
	}
	md, merr := kadm.NewClient(cl).Metadata(ctx, slices.Collect(maps.Keys(topics))...)
	parts := make([]unackedPartition, 0, len(held))
	for tp, n := range held {
		parts = append(parts, unackedPartition{tp: tp, records: n, leader: leaderSays(md, merr, tp)})
	}
	slices.SortFunc(parts, func(a, b unackedPartition) int {
		return cmp.Or(strings.Compare(a.tp.topic, b.tp.topic), cmp.Compare(a.tp.partition, b.tp.partition))
	})
	return &unackedError{parts: parts, err: err}
}

// leaderSays is what the metadata md (or its error merr) says of tp's
// leader.
func leaderSays(md kadm.Metadata, merr error, tp topicPartition) string {
	if merr != nil {
		return fmt.Sprintf("its leader unknown: the metadata request failed: %v", merr)
	}
	p, ok := md.Topics[tp.topic].Partitions[tp.partition]
	switch {
	case !ok:
		return "not in the brokers' metadata"
	case p.Leader < 0 && p.Err != nil:
		return fmt.Sprintf("no leader (%s)", errCode(p.Err))
	case p.Leader < 0:
		return "no leader"
	case p.Err != nil:
		return fmt.Sprintf("leader %d, the metadata says %s", p.Leader, errCode(p.Err))
	}
	for _, b := range md.Brokers {
		if b.NodeID == p.Leader {
			return fmt.Sprintf("leader broker %d at %s:%d", p.Leader, b.Host, b.Port)
		}
	}
	return fmt.Sprintf("leader broker %d, not among the brokers listed", p.Leader)
}

// withLeaderless adds to err, a request to the leaders of the partitions
// of topics that failed, the partitions the metadata listed without a
// leader (the request's shard errors name none); err alone when none.
func withLeaderless(topics kadm.TopicDetails, err error) error {
	var none, names []string
	for _, d := range topics.Sorted() {
		n := len(none)
		for _, p := range d.Partitions.Sorted() {
			if p.Err != nil || p.Leader < 0 {
				tp := topicPartition{p.Topic, p.Partition}
				none = append(none, fmt.Sprintf("%s/%d: %s", p.Topic, p.Partition, leaderSays(kadm.Metadata{Topics: topics}, nil, tp)))
			}
		}
		if len(none) > n {
			names = append(names, d.Topic)
		}
	}
	if len(none) == 0 {
		return err
	}
	return fmt.Errorf("%w (without a usable leader: %s; check with `eosctl topic describe %s`)", err, strings.Join(none, "; "), strings.Join(names, " "))
}

// errCode is err's Kafka error code name when it has one (the message
// that goes with it says nothing more here).
func errCode(err error) string {
	var ke *kerr.Error
	if errors.As(err, &ke) {
		return ke.Message
	}
	return err.Error()
}
