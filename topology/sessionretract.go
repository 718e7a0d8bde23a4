package topology

import (
	"slices"
	"time"

	"github.com/eosflow/eosflow/internal/graph"
	"github.com/eosflow/eosflow/processor"
)

// Session retraction. Under every-update output a session is known
// downstream by its key and window, [start,end], as Kafka Streams keys it
// (Windowed<K> with both times). When a record merges sessions, or
// extends one, the windows it replaces no longer exist: without a word
// about them, a downstream view of sessions keeps them, stale. So, as
// Kafka Streams does, each replaced window is retracted with a tombstone
// before the merged session is emitted. The output key is the grouping
// key (the window is only in a Windowed value, see Windowed), and a
// tombstone has no value, so headers name the window it retracts; the
// merged session follows its tombstones under the same key, so a
// compacted topic still keeps each key's latest session. A
// stored session the record leaves as it was (start and end unchanged)
// is not retracted: its update replaces it under the same window. Kafka
// Streams retracts that one too, then emits it again, which changes
// nothing for any reader.
//
// Tombstones take the deletes' way (see deletes.go): ToTable writes them
// in the batch's transaction like the updates; ToStream has no value to
// pass them with. With FinalOnly nothing is retracted: a session is
// emitted once, when it closes, and a session merges only while open.

// The headers of a session tombstone: the retracted window's start and
// end (End included), as Window's JSON writes them (WindowTimeFormat).
// They follow the headers of the record that replaced the session.
const (
	HeaderWindowStart = "eosflow.window.start"
	HeaderWindowEnd   = "eosflow.window.end"
)

// retractSessions emits, through del, a tombstone for each session of
// merged whose window the session [start,end] replaces, with r's key,
// headers, timestamp (the time of the change, as the update's) and
// origin, so that it commits or aborts with r's batch.
func retractSessions[T, A any](x graph.Exec, n *Node, del *deletes, r Record[T], merged []sessionFound[A], start, end int64) error {
	for _, f := range merged {
		if f.start == start && f.end == end {
			continue
		}
		h := append(slices.Clip(r.Headers),
			processor.Header{Key: HeaderWindowStart, Value: []byte(time.UnixMilli(f.start).UTC().Format(WindowTimeFormat))},
			processor.Header{Key: HeaderWindowEnd, Value: []byte(time.UnixMilli(f.end).UTC().Format(WindowTimeFormat))})
		if err := del.push(x, Record[struct{}]{Key: r.Key, Headers: h, Timestamp: r.Timestamp,
			Topic: r.Topic, Partition: r.Partition, Offset: r.Offset}); err != nil {
			return err
		}
		x.Enter(n.index)
	}
	return nil
}
