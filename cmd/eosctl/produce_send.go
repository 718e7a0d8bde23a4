package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eosflow/eosflow/internal/kafkautil"
)

// sender produces records without waiting for each one and keeps what the
// brokers answered: how many were written, to which partitions, and the
// first failure with the input line it came from.
type sender struct {
	cl      *kgo.Client
	topic   string
	timeout time.Duration // for the brokers to take each record

	mu         sync.Mutex
	written    int64
	partitions map[int32]bool
	err        error
}

// newSender produces to topic through cl.
func newSender(cl *kgo.Client, topic string, timeout time.Duration) *sender {
	return &sender{cl: cl, topic: topic, timeout: timeout, partitions: map[int32]bool{}}
}

// send produces r, read from input line n. The brokers get s.timeout to
// take it, counted from now: kgo's RecordDeliveryTimeout counts from the
// record's timestamp, which JSON input may set in the past.
func (s *sender) send(ctx context.Context, n int, r *kgo.Record) {
	r.Topic = s.topic
	rctx, cancel := context.WithTimeout(ctx, s.timeout)
	s.cl.Produce(rctx, r, func(r *kgo.Record, err error) {
		cancel()
		s.mu.Lock()
		defer s.mu.Unlock()
		switch {
		case err == nil:
			s.written++
			s.partitions[r.Partition] = true
		case s.err == nil:
			s.err = s.describe(n, err)
		}
	})
}

// describe names what failed: an ACL applies to every line, anything else
// to the line whose record it was.
func (s *sender) describe(n int, err error) error {
	if kafkautil.IsFatal(err) {
		// The idempotent producer's InitProducerID is refused as a cluster
		// authorization failure when WRITE on the topic is missing.
		return kafkaErr(fmt.Sprintf("produce to topic %q (needs WRITE on it; before Kafka 2.8 also IDEMPOTENT_WRITE on the cluster)", s.topic), err)
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("line %d: the brokers did not take the record within --timeout %s", n, s.timeout)
	}
	return fmt.Errorf("line %d: produce to topic %q: %w", n, s.topic, err)
}

// failed is the first failure so far, or nil.
func (s *sender) failed() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// result is what was written, once the client has been flushed.
func (s *sender) result() (int64, []int32) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.written, slices.Sorted(maps.Keys(s.partitions))
}

// pacer spaces sends at most rate per second; a zero rate never waits. Due
// times are counted from the start, so a slow send does not lower the rate
// of the ones after it.
type pacer struct {
	start time.Time
	every time.Duration
	n     int64
}

// newPacer paces rate records per second from now.
func newPacer(rate float64) *pacer {
	p := &pacer{start: time.Now()}
	if rate > 0 {
		p.every = time.Duration(float64(time.Second) / rate)
	}
	return p
}

// wait blocks until the next send is due or ctx ends.
func (p *pacer) wait(ctx context.Context) error {
	if p.every == 0 {
		return nil
	}
	due := p.start.Add(time.Duration(p.n) * p.every)
	p.n++
	d := time.Until(due)
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// inputLine is one line read, or the read error that ended the input.
type inputLine struct {
	n    int
	text []byte
	err  error
}

// readLines reads r on a goroutine of its own, so an interrupt is seen
// even while a read from a terminal blocks. It stops when ctx ends.
func readLines(ctx context.Context, r io.Reader) <-chan inputLine {
	ch := make(chan inputLine)
	go func() {
		defer close(ch)
		err := eachLine(r, func(n int, text []byte) error {
			select {
			case ch <- inputLine{n: n, text: text}:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		})
		if err != nil && !errors.Is(err, ctx.Err()) {
			select {
			case ch <- inputLine{err: err}:
			case <-ctx.Done():
			}
		}
	}()
	return ch
}
