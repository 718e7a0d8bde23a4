package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/eosflow/eosflow/internal/kafkautil"
)

// reader polls one topic's partitions and prints their records until it
// has read to the planned end offsets (without --follow), --max records,
// --idle passes without a record, or ctx ends.
type reader struct {
	cl      *kgo.Client
	topic   string
	out     recordWriter
	warn    io.Writer
	ranges  map[int32]partRange
	pending map[int32]bool // partitions short of their end; unused with --follow
	follow  bool
	max     int64
	idle    time.Duration
	read    int64
}

// newReader plans to read ranges; a partition already at its end has
// nothing to wait for.
func newReader(topic string, ranges map[int32]partRange, o *consumeOpts, out recordWriter, warn io.Writer) *reader {
	rd := &reader{topic: topic, out: out, warn: warn, ranges: ranges, pending: map[int32]bool{},
		follow: o.follow, max: o.max, idle: o.idle}
	for p, r := range ranges {
		if r.start < r.end {
			rd.pending[p] = true
		}
	}
	return rd
}

// offsets is where the client starts each partition it reads.
func (rd *reader) offsets() map[string]map[int32]kgo.Offset {
	offs := map[int32]kgo.Offset{}
	for p, r := range rd.ranges {
		if rd.follow || rd.pending[p] {
			offs[p] = kgo.NewOffset().At(r.start)
		}
	}
	return map[string]map[int32]kgo.Offset{rd.topic: offs}
}

// done reports whether there is nothing left to read without --follow.
func (rd *reader) done() bool { return !rd.follow && len(rd.pending) == 0 }

// run reads until a stop condition and says which one it was.
func (rd *reader) run(ctx context.Context) (string, error) {
	last := time.Now()
	for !rd.done() {
		pctx, cancel := ctx, context.CancelFunc(func() {})
		if rd.idle > 0 {
			pctx, cancel = context.WithDeadline(ctx, last.Add(rd.idle))
		}
		fetches := rd.cl.PollFetches(pctx)
		idle := errors.Is(pctx.Err(), context.DeadlineExceeded)
		cancel()
		if ctx.Err() != nil {
			return "interrupted", nil
		}
		if err := rd.fetchErr(fetches); err != nil {
			return "", err
		}
		n, err := rd.take(fetches)
		if err != nil {
			return "", err
		}
		switch {
		case rd.max > 0 && rd.read >= rd.max:
			return fmt.Sprintf("--max %d reached", rd.max), nil
		case n > 0:
			last = time.Now()
		case idle:
			return fmt.Sprintf("no record for --idle %s", rd.idle), nil
		}
	}
	return "reached the end offsets", nil
}

// fetchErr is the first error a fetch carries that stops the read: an
// ACL, a deleted topic. Data loss the client has reset past is a warning.
func (rd *reader) fetchErr(fs kgo.Fetches) error {
	for _, fe := range fs.Errors() {
		_, loss := errors.AsType[*kgo.ErrDataLoss](fe.Err)
		switch {
		case errors.Is(fe.Err, context.Canceled), errors.Is(fe.Err, context.DeadlineExceeded), errors.Is(fe.Err, kgo.ErrClientClosed):
		case loss:
			fmt.Fprintf(rd.warn, "warning: %v\n", fe.Err)
		case kafkautil.IsFatal(fe.Err):
			return kafkaErr(fmt.Sprintf("consume topic %q (needs READ on it)", fe.Topic), fe.Err)
		default:
			return fmt.Errorf("consume topic %q partition %d: %w", fe.Topic, fe.Partition, fe.Err)
		}
	}
	return nil
}

// take prints the records of one poll, in order within each partition,
// and returns how many it printed. Control records (transaction markers)
// are not printed but move a partition towards its end: under
// read_committed the last offset before the end may be one.
func (rd *reader) take(fs kgo.Fetches) (int, error) {
	n := 0
	var err error
	fs.EachPartition(func(p kgo.FetchTopicPartition) {
		end := rd.ranges[p.Partition].end
		for _, r := range p.Records {
			if err != nil || rd.max > 0 && rd.read >= rd.max {
				return
			}
			if !rd.follow && r.Offset >= end {
				rd.finish(p.Partition) // written after the start, or past a compacted gap
				return
			}
			if !r.Attrs.IsControl() {
				if err = rd.out.write(r); err != nil {
					return
				}
				rd.read++
				n++
			}
			if !rd.follow && r.Offset >= end-1 {
				rd.finish(p.Partition)
			}
		}
	})
	if ferr := rd.out.flush(); err == nil {
		err = ferr
	}
	return n, err
}

// finish stops fetching a partition that reached its end.
func (rd *reader) finish(p int32) {
	delete(rd.pending, p)
	rd.cl.PauseFetchPartitions(map[string][]int32{rd.topic: {p}})
}
