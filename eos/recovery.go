package eos

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/eosflow/eosflow/internal/engine"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"
)

// pendingBatch is a batch whose commit was sent but not answered.
type pendingBatch struct {
	offsets map[string]map[int32]kgo.EpochOffset // what the commit carried
	in, out int
	tally   engine.Tally // its records' outcomes
}

// settlePending decides a batch whose commit outcome was lost from the
// offsets the group has committed, so the counters say what the broker
// did: a landed commit counts as committed; one that did not land is
// redone (and, without transactions, may duplicate). It runs before a new
// session processes anything, after the producer id load has ended any
// transaction left open, so the committed offsets are stable.
func (l *streamLoop) settlePending(ctx context.Context) error {
	p := l.pending
	if p == nil {
		return nil
	}
	landed, err := l.landed(ctx, p.offsets, l.waits.end)
	if err != nil && ctx.Err() == nil && l.hanging.repairHanging(ctx) > 0 {
		landed, err = l.landed(ctx, p.offsets, l.waits.end)
	}
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return &rebuildError{fmt.Errorf("reading group %q's committed offsets to settle a commit whose answer was lost: %w; inspect with `eosctl group lag %s` and `eosctl txn hanging --topic __consumer_offsets`", l.cfg.AppID, err, l.cfg.AppID)}
	}
	l.pending = nil
	if landed {
		l.countSettled(p)
		return nil
	}
	l.noteAbort(abortCommit)
	l.noteRedone(&batch{in: p.in, out: p.out})
	l.log.Info("a batch whose commit answer was lost had not committed; redoing it", zap.Int("records", p.in))
	return nil
}

func (l *streamLoop) countSettled(p *pendingBatch) {
	l.healthy()
	l.floor.raise(p.offsets)
	l.counts.batch(p.in, p.out, p.tally)
	l.log.Info("a batch whose commit answer was lost had committed", zap.Int("records", p.in))
}

// landed reports whether the group's committed offsets have reached
// offsets on every partition of a batch. A partition whose offsets are
// held back by a pending transactional commit (UNSTABLE_OFFSET_COMMIT) is
// asked again until timeout; after that the outcome is an error. It looks
// only at the batch's partitions: other members' open transactions on
// other partitions do not matter. It ends with ctx too: settling at a
// new session's start must not hold Close for its timeouts.
func (l *streamLoop) landed(ctx context.Context, offsets map[string]map[int32]kgo.EpochOffset, timeout time.Duration) (bool, error) {
	ctx, cancel := context.WithTimeout(kadm.RequireStable(ctx), timeout)
	defer cancel()
	topics := make([]string, 0, len(offsets))
	for t := range offsets {
		topics = append(topics, t)
	}
	adm := kadm.NewClient(l.admin())
	for {
		committed, err := adm.FetchOffsetsForTopics(ctx, l.cfg.AppID, topics...)
		unsettled := err
		if err == nil {
			unsettled = l.floor.committedBelow(committed, offsets)
		}
		if err == nil && unsettled == nil {
		partitions:
			for topic, ps := range offsets {
				for partition, want := range ps {
					got, ok := committed.Lookup(topic, partition)
					switch {
					case !ok:
						unsettled = fmt.Errorf("no offset for %s/%d", topic, partition)
					case got.Err != nil:
						unsettled = fmt.Errorf("%s/%d: %w", topic, partition, got.Err)
					case got.At < want.Offset:
						// A transaction commits all its offsets or none.
						return false, nil
					default:
						continue
					}
					break partitions
				}
			}
			if unsettled == nil {
				return true, nil
			}
		}
		select {
		case <-ctx.Done():
			return false, unsettled
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func (r *Runner) closeAdmin() {
	r.health.admin.Store(nil)
	if r.admin != nil {
		r.admin.Close()
	}
}

// isInstanceFenced reports the group coordinator's word that another
// member joined with this instance's group.instance.id.
func isInstanceFenced(err error) bool { return errors.Is(err, kerr.FencedInstanceID) }
