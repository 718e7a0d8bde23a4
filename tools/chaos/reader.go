package chaos

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/eosflow/eosflow/tools/verdict"
	"github.com/twmb/franz-go/pkg/kgo"
)

// liveReader reads the output read_committed while the workers run, as
// Kafka's own transaction tests do. It must never see a record twice: a
// duplicate here is either a duplicate in the log or an aborted record
// that read_committed let through. Reading the counting pipeline, a
// duplicate is a count its key had already reached.
type liveReader struct {
	read, dups, unknown atomic.Int64
	last                atomic.Int64 // unix nanoseconds of the last record
	cancel              context.CancelFunc
	done                chan struct{}
}

// startLiveReader starts reading topic from its start; n is how many ids
// were seeded, and counts says the values are counts rather than ids.
func startLiveReader(base []kgo.Opt, topic string, n int, counts bool) (*liveReader, error) {
	cl, err := kgo.NewClient(append(append([]kgo.Opt(nil), base...),
		kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()),
	)...)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &liveReader{cancel: cancel, done: make(chan struct{})}
	r.last.Store(time.Now().UnixNano())
	go func() {
		defer close(r.done)
		defer cl.Close()
		seen := make([]bool, n)
		tr := verdict.NewCountTracker()
		for ctx.Err() == nil {
			fs := cl.PollFetches(ctx)
			got := false
			fs.EachRecord(func(rec *kgo.Record) {
				got = true
				r.read.Add(1)
				if counts {
					c, ok := verdict.ParseCount(rec.Value)
					if !ok {
						r.unknown.Add(1)
						return
					}
					before := tr.Repeats
					tr.Add(string(rec.Key), c)
					r.dups.Add(int64(tr.Repeats - before))
					return
				}
				id, ok := verdict.ID(rec.Value)
				switch {
				case !ok || id < 0 || id >= n:
					r.unknown.Add(1)
				case seen[id]:
					r.dups.Add(1)
				default:
					seen[id] = true
				}
			})
			if got {
				r.last.Store(time.Now().UnixNano())
			}
		}
	}()
	return r, nil
}

// finish waits until nothing new arrived for idle (at most limit), then
// stops the reader.
func (r *liveReader) finish(idle, limit time.Duration) {
	deadline := time.Now().Add(limit)
	start := time.Now()
	for time.Now().Before(deadline) {
		last := time.Unix(0, r.last.Load())
		if last.Before(start) {
			last = start
		}
		if time.Since(last) >= idle {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	r.stop()
}

// stop ends the reader and waits for it.
func (r *liveReader) stop() {
	r.cancel()
	<-r.done
}
