package eos

import (
	"sync/atomic"

	"github.com/eosflow/eosflow/internal/engine"
)

// Stats counts what a Runner did. Every count of records is taken when
// their batch commits (without transactions: once its outputs are
// acknowledged and its offsets committed), so a batch that aborts and is
// redone counts once, and the counts agree with what a read_committed
// consumer of the outputs sees.
type Stats struct {
	// RecordsIn counts input records whose batch committed, whatever
	// became of them (processed, dead-lettered or skipped). Records read
	// back from the app's repartition topics (GroupBy, Through) count
	// too, so a re-keyed record counts twice.
	RecordsIn uint64
	// RecordsOut counts output records that committed, dead letters
	// and records written to repartition topics included.
	RecordsOut uint64
	// Committed counts batches committed.
	Committed uint64
	// Aborted counts batches that did not commit (errors, rebalances,
	// produce failures, shutdown vetoes); their records are redone.
	Aborted uint64
	// Rebuilds counts clients closed and made anew after an error.
	Rebuilds uint64
	// DeadLettered counts committed input records that went to a
	// dead-letter topic.
	DeadLettered uint64
	// Skipped counts committed input records dropped by the Skip policy.
	Skipped uint64
	// Retries counts retried calls of user code (the waits of Retry
	// policies) in batches that committed.
	Retries uint64
	// Restored counts changelog records applied to state stores while
	// restoring them (on assignment, and after a batch that did not
	// commit cleanly).
	Restored uint64
	// StoresWiped counts state stores emptied to be restored in full:
	// their changelog could no longer bring them up to date, or the last
	// record they applied did not read back as committed (a commit whose
	// markers a restarting broker skipped).
	StoresWiped uint64
	// Redone counts input records whose outputs may have been written
	// although their batch did not commit its offsets (idempotent and
	// at-least-once only: a failed or lost offset commit, a produce
	// rejected on one partition while others were written, a flush that
	// timed out, a BeforeCommit veto, a rebalance). They run again, so
	// their outputs may appear twice: duplicates never exceed Redone.
	Redone uint64
	// Rewinds counts batches that ended with records polled but not
	// processed, to which the consumer was moved back: they are fetched
	// again, a round trip the worker waits out. Polls are sized so that
	// this stays rare; a steady climb means single polls keep taking
	// longer than the commit interval to process.
	Rewinds uint64
	// TimerFirings counts timer firings (processor.Schedule,
	// topology.Process timers) in batches that committed, whether their
	// user code succeeded or its error was skipped: a firing whose batch
	// aborted runs again, and counts once.
	TimerFirings uint64
	// TaskIdleWaits counts waits of a co-partitioned task (a join's) for
	// one of its partitions that had no records fetched, its other
	// partitions' records held back meanwhile (max_task_idle).
	TaskIdleWaits uint64
	// TaskIdleEnforced counts those waits that ran out: the task went on
	// with its other partitions' records, the join one side ahead.
	TaskIdleEnforced uint64
	// GlobalRecords counts records of global tables' topics applied to
	// their stores, at the load and while running (tombstones included,
	// transaction markers not): once it reaches what the topics hold, a
	// batch that begins next joins those rows.
	GlobalRecords uint64
	// ExpiriesSkipped and ExpiriesDeadLettered count expired entries (a
	// left or outer stream join's unmatched records, final-only window
	// results) whose emission failed and that the failing node's Skip or
	// DeadLetter policy dropped or dead-lettered, in batches that
	// committed; the record whose stream time expired them counts as
	// processed.
	ExpiriesSkipped      uint64
	ExpiriesDeadLettered uint64
}

// counters are what Stats reports, kept as atomics so that Stats, the
// metrics and /readyz read them while the batch loop writes them.
type counters struct {
	recordsIn, recordsOut, committed, aborted, rebuilds, redone atomic.Uint64
	deadLettered, skipped, retries, restored, wipes, rewinds    atomic.Uint64
	timerFirings, idleWaits, idleEnforced, globalRecords        atomic.Uint64
	expiriesSkipped, expiriesDeadLettered                       atomic.Uint64
}

// batch counts a committed batch of in input and out output records, and
// the outcomes t of its records.
func (c *counters) batch(in, out int, t engine.Tally) {
	c.committed.Add(1)
	c.recordsIn.Add(uint64(in))
	c.recordsOut.Add(uint64(out))
	c.deadLettered.Add(t.DeadLettered)
	c.skipped.Add(t.Skipped)
	c.retries.Add(t.Retries)
	c.timerFirings.Add(t.TimerFirings)
	c.expiriesSkipped.Add(t.ExpiriesSkipped)
	c.expiriesDeadLettered.Add(t.ExpiriesDeadLettered)
}

// stats reads the counters.
func (c *counters) stats() Stats {
	return Stats{
		RecordsIn: c.recordsIn.Load(), RecordsOut: c.recordsOut.Load(),
		Committed: c.committed.Load(), Aborted: c.aborted.Load(), Rebuilds: c.rebuilds.Load(), Redone: c.redone.Load(),
		DeadLettered: c.deadLettered.Load(), Skipped: c.skipped.Load(), Retries: c.retries.Load(),
		Restored: c.restored.Load(), StoresWiped: c.wipes.Load(), Rewinds: c.rewinds.Load(), TimerFirings: c.timerFirings.Load(),
		TaskIdleWaits: c.idleWaits.Load(), TaskIdleEnforced: c.idleEnforced.Load(), GlobalRecords: c.globalRecords.Load(),
		ExpiriesSkipped: c.expiriesSkipped.Load(), ExpiriesDeadLettered: c.expiriesDeadLettered.Load(),
	}
}
