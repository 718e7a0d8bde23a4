package verdict

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// UnfinishedError is a bounded drain that ran out of time: what it waited
// for and how far it got, so a verifier that cannot finish reading says
// which partitions held it and where, instead of waiting on.
type UnfinishedError struct {
	Topic     string
	Isolation string // read_committed or read_uncommitted
	// Want is how many records the drain waited for; Got how many came.
	Want, Got int
	// Partitions holds every partition that had a position to reach.
	Partitions []PartitionReach
	// Bound is the time the drain had; Err the context error that ended it.
	Bound time.Duration
	Err   error
}

// PartitionReach is one partition of an unfinished drain: the next offset
// it read against the one that was readable when it started (the last
// stable offset for read_committed, the end offset otherwise).
type PartitionReach struct {
	Partition int32 `json:"partition"`
	Reached   int64 `json:"reached"`
	Wanted    int64 `json:"wanted"`
}

// newUnfinished records a drain's progress against its targets.
func newUnfinished(topic string, iso kgo.IsolationLevel, want, got int, ends, next map[int32]int64) *UnfinishedError {
	u := &UnfinishedError{Topic: topic, Isolation: "read_uncommitted", Want: want, Got: got}
	if iso == kgo.ReadCommitted() {
		u.Isolation = "read_committed"
	}
	for p, end := range ends {
		u.Partitions = append(u.Partitions, PartitionReach{Partition: p, Reached: next[p], Wanted: end})
	}
	slices.SortFunc(u.Partitions, func(a, b PartitionReach) int { return int(a.Partition - b.Partition) })
	return u
}

// Error names the topic, the records and every partition short of its
// position, and the commands that show why.
func (e *UnfinishedError) Error() string {
	var short []string
	for _, p := range e.Partitions {
		if p.Reached < p.Wanted {
			short = append(short, fmt.Sprintf("partition %d at offset %d of %d", p.Partition, p.Reached, p.Wanted))
		}
	}
	where := fmt.Sprintf("all %d partitions reached the positions readable when it started, so the records it waited for are not in the log as committed", len(e.Partitions))
	switch {
	case len(e.Partitions) == 0:
		where = "its partitions' readable positions could not be listed, so it waited for records alone"
	case len(short) > 0:
		where = "short of the positions readable when it started: " + strings.Join(short, ", ")
	}
	return fmt.Sprintf("reading %s %s did not finish within %s (%v): %d of %d records; %s; "+
		"inspect it with `eosctl topic describe %s` and `eosctl txn hanging --topic %s`",
		e.Topic, e.Isolation, e.Bound, e.Err, e.Got, e.Want, where, e.Topic, e.Topic)
}

// Unwrap is the context error that ended the drain.
func (e *UnfinishedError) Unwrap() error { return e.Err }
