// Package health logs when the server of a Redis or PostgreSQL dedup store
// stops answering and when it answers again, so that a pipeline waiting
// on it says what it waits for.
package health

import (
	"context"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
)

// every is how often a streak of failures is logged again.
const every = 5 * time.Second

// Watch follows one store's calls. The zero Log is a no-op logger.
type Watch struct {
	Log     *zap.Logger
	Store   string // "redis" or "postgres", also the log field naming Addr
	Addr    string
	Timeout time.Duration // each call's bound
	Inspect string        // a command that checks the server

	failing atomic.Bool
	mu      sync.Mutex
	since   time.Time // the streak's first failure
	logged  time.Time
	calls   int
}

// Unreachable reports whether err says the server did not answer in time
// or could not be reached, rather than that it refused the command.
func Unreachable(err error) bool {
	var ne net.Error
	return errors.Is(err, context.DeadlineExceeded) || errors.As(err, &ne)
}

// Failed notes a call that got no answer: the first of a streak is
// logged, then one every 5 s with how long the server has been silent.
// Other errors are the caller's to report.
func (w *Watch) Failed(op string, err error) {
	if w == nil || w.Log == nil || !Unreachable(err) {
		return
	}
	now := time.Now()
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.failing.Swap(true) {
		w.since, w.calls = now, 0
	}
	w.calls++
	if w.calls > 1 && now.Sub(w.logged) < every {
		return
	}
	w.logged = now
	w.Log.Warn("waiting for "+w.Store+": it did not answer within the store's timeout; calls fail until it does",
		zap.String(w.Store, w.Addr), zap.String("op", op), zap.Duration("timeout", w.Timeout),
		zap.Duration("failing_for", now.Sub(w.since).Round(time.Millisecond)), zap.Int("failed_calls", w.calls),
		zap.String("inspect", w.Inspect), zap.Error(err))
}

// OK notes a call that got an answer, and logs the first after a streak
// of failures.
func (w *Watch) OK() {
	if w == nil || w.Log == nil || !w.failing.Load() {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.failing.Swap(false) {
		return
	}
	w.Log.Info(w.Store+" answers again", zap.String(w.Store, w.Addr),
		zap.Duration("silent_for", time.Since(w.since).Round(time.Millisecond)), zap.Int("failed_calls", w.calls))
}
