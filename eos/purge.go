package eos

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"
)

// DefaultPurgeInterval is how often, by default, the records of
// repartition topics that the group has committed past are deleted: Kafka
// Streams' default repartition.purge.interval.ms.
const DefaultPurgeInterval = 30 * time.Second

// PurgeInterval sets how often the records of repartition topics that the
// group has committed past are deleted (DeleteRecords), overriding
// DefaultPurgeInterval. Shorter keeps the topics smaller at the cost of
// more requests; 0 purges after every commit, and a negative d never
// purges (then give the topics a retention that suits you, knowing that
// records expired before they were aggregated are lost). A purge runs in
// the background after a commit.
func PurgeInterval(d time.Duration) Option {
	return optFunc(func(r *Runner) { r.purge.every = d })
}

// purger deletes the records of repartition topics that the group has
// committed past, in the background, at most every purge interval: the
// group never reads them again, and the topics keep no retention of their
// own (see repartitionConfigs).
type purger struct {
	log     *zap.Logger
	admin   func() *kgo.Client // preflight's client, once made
	every   time.Duration      // PurgeInterval
	topics  map[string]bool    // the repartition topics
	ctx     context.Context    // ends with Run
	mu      sync.Mutex         // guards to
	to      kadm.Offsets       // committed offsets of repartition topics not yet purged to
	last    time.Time          // when the last purge started
	running atomic.Bool        // a purge is running
	wg      sync.WaitGroup     // the running purge, waited for before the admin client closes
}

// note remembers the committed offsets of repartition topics and,
// at most every purge interval, deletes the records before them in the
// background: the group committed past them, so it never reads them again.
// A failed purge is logged and its offsets are tried again with the next.
func (pu *purger) note(offsets map[string]map[int32]kgo.EpochOffset) {
	if len(pu.topics) == 0 || pu.admin() == nil || pu.every < 0 {
		return
	}
	pu.mu.Lock()
	defer pu.mu.Unlock()
	for topic, parts := range offsets {
		if !pu.topics[topic] {
			continue
		}
		for p, o := range parts {
			pu.to.Add(kadm.Offset{Topic: topic, Partition: p, At: o.Offset, LeaderEpoch: -1})
		}
	}
	if len(pu.to) == 0 || time.Since(pu.last) < pu.every || !pu.running.CompareAndSwap(false, true) {
		return
	}
	to := pu.to
	pu.to, pu.last = kadm.Offsets{}, time.Now()
	adm := kadm.NewClient(pu.admin())
	pu.wg.Add(1)
	go func() {
		defer pu.wg.Done()
		defer pu.running.Store(false)
		ctx, cancel := context.WithTimeout(pu.ctx, 10*time.Second)
		defer cancel()
		resps, err := adm.DeleteRecords(ctx, to)
		if err == nil {
			resps.Each(func(d kadm.DeleteRecordsResponse) {
				if d.Err != nil && err == nil {
					err = fmt.Errorf("%s/%d: %w", d.Topic, d.Partition, d.Err)
				}
			})
		}
		if err != nil {
			if pu.ctx.Err() != nil {
				return // shutting down
			}
			pu.mu.Lock()
			to.Each(func(o kadm.Offset) {
				if cur, ok := pu.to.Lookup(o.Topic, o.Partition); !ok || cur.At < o.At {
					pu.to.Add(o)
				}
			})
			pu.mu.Unlock()
			pu.log.Warn("deleting consumed records of repartition topics failed; will try again after the next commit "+
				"(the app needs the Delete ACL on its repartition topics, or they grow without bound)", zap.Error(err))
			return
		}
		names := to.TopicsSet().Topics()
		slices.Sort(names)
		pu.log.Debug("purged consumed records of repartition topics", zap.Strings("topics", names))
	}()
}
