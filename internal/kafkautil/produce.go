package kafkautil

import (
	"context"
	"sync"

	"github.com/twmb/franz-go/pkg/kgo"
)

// FirstError keeps the first error its Promise is given. Produce calls
// promises from the client's goroutines, and a producer that waits for
// all of its records wants one answer, not one per record. The zero value
// is ready to use.
type FirstError struct {
	mu  sync.Mutex
	err error
}

// Promise is a kgo produce promise recording err if it is the first.
func (f *FirstError) Promise(_ *kgo.Record, err error) {
	if err == nil {
		return
	}
	f.mu.Lock()
	if f.err == nil {
		f.err = err
	}
	f.mu.Unlock()
}

// Take returns the first error so far and forgets it, so the next batch
// of records starts clean.
func (f *FirstError) Take() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	err := f.err
	f.err = nil
	return err
}

// ProduceAll produces record(0) … record(n-1) as fast as the client takes
// them, then flushes, and returns the first failure: seeding wants every
// record acknowledged, not a callback per record.
func ProduceAll(ctx context.Context, cl *kgo.Client, n int, record func(i int) *kgo.Record) error {
	var failed FirstError
	promise := failed.Promise // bound once: a method value per record would allocate
	for i := range n {
		cl.Produce(ctx, record(i), promise)
	}
	if err := cl.Flush(ctx); err != nil {
		return err
	}
	return failed.Take()
}
