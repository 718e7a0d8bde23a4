package eos

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/eosflow/eosflow/config"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"
)

// consume runs batches on s until ctx ends (nil), a record fails under the
// Fail policy (that error), or s breaks (a rebuildError or fencing).
// progressed reports whether any batch committed.
func (r *Runner) consume(ctx context.Context, s session) (progressed bool, err error) {
	max := r.cfg.MaxBatchRecords
	log := r.log.With(zap.String("transactional_id", r.cfg.TransactionalID()))
	if r.cfg.Guarantee == config.ExactlyOnce || r.cfg.Guarantee == config.Idempotent {
		// Loading the producer id first fences a zombie of this instance
		// and aborts a transaction a previous session left open, whose
		// pending offsets would otherwise block this session's offset
		// fetch (RequireStable) until that transaction timed out. So it
		// is not cut short: it ends when it succeeds or Run stops.
		id, epoch, err := s.client().ProducerID(ctx)
		if err == nil {
			log = log.With(zap.Int64("producer_id", id), zap.Int16("producer_epoch", epoch))
		} else if isFenced(err) {
			return false, err
		}
	}
	for {
		if ctx.Err() != nil {
			return progressed, nil
		}
		fetches := s.poll(ctx, max)
		if fetches.IsClientClosed() || ctx.Err() != nil && fetches.NumRecords() == 0 {
			return progressed, nil
		}
		if err := fetchError(fetches); err != nil {
			return progressed, err
		}
		if fetches.NumRecords() == 0 {
			s.idle()
			continue
		}
		if err := s.begin(); err != nil {
			return progressed, &rebuildError{fmt.Errorf("begin transaction: %w", err)}
		}
		start := time.Now()
		var in, out int
		var failed error
		emit := func(rec *kgo.Record) {
			out++
			s.produce(rec)
		}
		process := func(fs kgo.Fetches) {
			fs.EachRecord(func(rec *kgo.Record) {
				if failed != nil {
					return
				}
				in++
				if _, err := r.proc.Process(ctx, rec, emit); err != nil {
					failed = err
				}
			})
		}
		process(fetches)
		// Keep filling the batch until the commit interval or the record
		// cap: fewer, larger transactions cost fewer round trips.
		deadline := start.Add(r.cfg.CommitInterval)
		for failed == nil && in < max && ctx.Err() == nil && time.Until(deadline) > 0 {
			pctx, cancel := context.WithDeadline(ctx, deadline)
			more := s.poll(pctx, max-in)
			cancel()
			if more.IsClientClosed() {
				break
			}
			if err := fetchError(more); err != nil {
				failed = &rebuildError{err}
				break
			}
			process(more)
		}
		commit := failed == nil
		if commit && r.beforeEnd != nil {
			if err := r.beforeEnd(ctx, BatchInfo{Records: in, Outputs: out}); err != nil {
				failed, commit = err, false
			}
		}
		committed, endErr := s.end(commit)
		gen := generation(s.client())
		switch {
		case failed != nil || endErr != nil:
			r.aborted.Add(1)
			reason := failed
			if endErr != nil {
				reason = endErr
			}
			log.Warn("batch aborted", zap.Error(reason), zap.Int("records", in), zap.Int32("generation", gen))
			if oc := (*offsetCommitError)(nil); errors.As(endErr, &oc) {
				r.redone.Add(uint64(in))
			}
			if endErr != nil && (isFenced(endErr) || failed == nil || isRebuildable(failed)) {
				return progressed, endErr
			}
			return progressed, failed
		case !committed:
			r.aborted.Add(1)
			log.Info("batch aborted by a rebalance; reprocessing from the last commit",
				zap.Int("records", in), zap.Int32("generation", gen))
			continue
		}
		progressed = true
		r.committed.Add(1)
		r.recordsIn.Add(uint64(in))
		r.recordsOut.Add(uint64(out))
		log.Debug("batch committed", zap.Int("records", in), zap.Int("outputs", out),
			zap.Duration("latency", time.Since(start)), zap.Int32("generation", gen))
	}
}

func generation(cl *kgo.Client) int32 {
	_, gen := cl.GroupMetadata()
	return gen
}

// fetchError returns the first fetch error that needs action. Context
// errors are how a bounded poll ends; others are transient and retried by
// the client, except authorization failures.
func fetchError(fs kgo.Fetches) error {
	for _, fe := range fs.Errors() {
		switch {
		case errors.Is(fe.Err, context.Canceled), errors.Is(fe.Err, context.DeadlineExceeded):
		case isFatal(fe.Err):
			return fmt.Errorf("fetch %s/%d: %w", fe.Topic, fe.Partition, fe.Err)
		}
	}
	return nil
}

// preflight fails fast on what no retry fixes: unreachable brokers and
// missing topics.
func (r *Runner) preflight(ctx context.Context) error {
	opts, err := r.cfg.KgoOpts()
	if err != nil {
		return err
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return err
	}
	defer cl.Close()
	pctx, cancel := context.WithTimeout(ctx, r.cfg.ConnectTimeout)
	defer cancel()
	if err := cl.Ping(pctx); err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return fmt.Errorf("%w: no answer from %s within %s (%v); check brokers (EOS_BROKERS) and that Kafka is running",
			ErrUnreachable, strings.Join(r.cfg.Brokers, ","), r.cfg.ConnectTimeout, err)
	}
	topics := append(r.top.InputTopics(), r.top.OutputTopics()...)
	details, err := kadm.NewClient(cl).ListTopics(pctx, topics...)
	if err != nil {
		return fmt.Errorf("eos: listing topics on %s: %w", strings.Join(r.cfg.Brokers, ","), err)
	}
	var missing []string
	for _, t := range topics {
		d, ok := details[t]
		switch {
		case !ok || errors.Is(d.Err, kerr.UnknownTopicOrPartition):
			missing = append(missing, t)
		case isFatal(d.Err):
			return fmt.Errorf("eos: topic %q: %w; grant the app Describe/Read/Write on it", t, d.Err)
		}
	}
	if len(missing) > 0 {
		return &MissingTopicsError{Topics: missing}
	}
	return nil
}
