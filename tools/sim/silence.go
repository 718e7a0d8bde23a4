package sim

import (
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// silentBound is how long the group may go without a member sending a
// commit while no live member logs at Info or above: the runtime never
// waits silently. It is
// past every wait a schedule causes on purpose (a slow record, a lease,
// a transaction timeout, a session timeout), each of which the runtime
// either logs or ends within it.
const silentBound = 15 * time.Second

// hearing tells when the runtime last logged and the group last
// committed.
type hearing struct {
	heard     atomic.Int64 // unix nanoseconds of the last log entry, Info or above
	committed atomic.Int64 // of the last EndTxn commit a member sent
	// revokeWaits counts revokes that waited for a record in flight.
	revokeWaits atomic.Int64
}

// revokeWaitLog begins the line a revoke logs when it waits for user code
// running a record of a partition it takes away.
const revokeWaitLog = "revoke: waiting for user code"

func (h *hearing) reset() {
	now := time.Now().UnixNano()
	h.heard.Store(now)
	h.committed.Store(now)
}

// logger is base with every entry at Info or above also heard, while
// the incarnation on w lives: a crashed or closing one's words tell
// nothing of the group.
func (h *hearing) logger(base *zap.Logger, w *wire) *zap.Logger {
	return zap.New(zapcore.NewTee(base.Core(), &heardCore{h: h, w: w}))
}

// silent reports the group going silentBound without a commit or a log.
func (h *hearing) silent() error {
	last := max(h.heard.Load(), h.committed.Load())
	if quiet := time.Since(time.Unix(0, last)); quiet > silentBound {
		return fmt.Errorf("the runtime waited silently: no member sent a commit or logged at Info or above for %v, input left", quiet.Round(time.Second))
	}
	return nil
}

// heardCore is a zap core that only notes when it was last written to.
type heardCore struct {
	h *hearing
	w *wire // nil: always alive
}

// Enabled is Info and above: what an operator's log shows.
func (c *heardCore) Enabled(l zapcore.Level) bool { return l >= zapcore.InfoLevel }

// With keeps no fields: only the moment of an entry counts.
func (c *heardCore) With([]zapcore.Field) zapcore.Core { return c }

// Sync has nothing to flush.
func (c *heardCore) Sync() error { return nil }

// Check takes the entries Enabled lets through.
func (c *heardCore) Check(e zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if c.Enabled(e.Level) {
		return ce.AddCore(e, c)
	}
	return ce
}

// Write notes the entry's moment, and a revoke waiting for user code.
func (c *heardCore) Write(e zapcore.Entry, _ []zapcore.Field) error {
	if strings.HasPrefix(e.Message, revokeWaitLog) {
		c.h.revokeWaits.Add(1)
	}
	if c.w == nil || !c.w.quiet() {
		c.h.heard.Store(time.Now().UnixNano())
	}
	return nil
}
