package sim

import (
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// restoredLog is the line the runtime logs as a restore of state from its
// changelogs ends, having applied records, before the member processes
// the restored tasks' records: the moment of point Restored.
const restoredLog = "state restored"

// restoredCore is a zap core that calls at for each restoredLog entry, in
// the goroutine that logged it: a fault struck there strikes before the
// member goes on.
type restoredCore struct{ at func() }

// watchRestores is log, with at called as each restore ends.
func watchRestores(log *zap.Logger, at func()) *zap.Logger {
	return zap.New(zapcore.NewTee(log.Core(), restoredCore{at}))
}

// Enabled is Info: the level the restore's end is logged at.
func (c restoredCore) Enabled(l zapcore.Level) bool { return l == zapcore.InfoLevel }

// With keeps no fields: only the message counts.
func (c restoredCore) With([]zapcore.Field) zapcore.Core { return c }

// Sync has nothing to flush.
func (c restoredCore) Sync() error { return nil }

// Check takes the entries that end a restore.
func (c restoredCore) Check(e zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if c.Enabled(e.Level) && e.Message == restoredLog {
		return ce.AddCore(e, c)
	}
	return ce
}

// Write is the restore's end.
func (c restoredCore) Write(zapcore.Entry, []zapcore.Field) error {
	c.at()
	return nil
}

// onRestored is member idx ending a restore: a crash there drops what
// the member would do next, its stores reopened from what a crash leaves;
// a join or leave strikes once the supervisor acts.
func (s *sim) onRestored(idx int, w *wire) {
	i, ok := s.step(idx, w, Restored)
	if !ok {
		return
	}
	defer s.acted()
	f := s.sched.Steps[i].Fault
	if f == Crash {
		s.strike(i)
		s.crash(idx, w)
	}
	s.events <- event{idx: idx, wire: w, step: i, fault: f}
}
