package chaos

import (
	"context"
	"fmt"
	"time"

	"github.com/eosflow/eosflow/tools/verdict"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// settleBound bounds the read that settles the table's uncertain
// transactions: long enough for the broker to time out one the writer
// left open (tableTxnTimeout) and abort it.
const settleBound = 2 * time.Minute

// tableRead is the global table's topic as read after the run.
type tableRead struct {
	// visible is what read_committed shows: customer → values.
	visible map[string]map[string]bool
	// last is each customer's row as read_committed leaves it: the value
	// of its last record, a customer's records being in one partition.
	last map[string]string
	// all is every record read_uncommitted, aborted ones included.
	all []*kgo.Record
}

// readTable reads the global table's topic once no transaction is open
// on it, read_committed and read_uncommitted. It waits first for every
// partition's last stable offset to reach its end, so that a transaction
// still open (a commit whose outcome the writer never learned) has ended,
// committed or aborted, before the reads.
func readTable(ctx context.Context, base []kgo.Opt, topic string) (tableRead, error) {
	ctx, cancel := context.WithTimeout(ctx, settleBound)
	defer cancel()
	var t tableRead
	if err := awaitNoOpenTxn(ctx, base, topic); err != nil {
		return t, err
	}
	recs, err := verdict.Drain(ctx, base, topic, 0, time.Second)
	if err == nil {
		t.all, err = verdict.DrainAll(ctx, base, topic, len(recs), time.Second)
	}
	if err == nil && ctx.Err() != nil {
		err = fmt.Errorf("reading %s: %w", topic, ctx.Err())
	}
	if err != nil {
		return tableRead{}, err
	}
	t.visible, t.last = map[string]map[string]bool{}, map[string]string{}
	for _, r := range recs {
		c := string(r.Key)
		if t.visible[c] == nil {
			t.visible[c] = map[string]bool{}
		}
		t.visible[c][string(r.Value)] = true
		t.last[c] = string(r.Value)
	}
	return t, nil
}

// abortedPresent counts the records of all whose value an aborted
// transaction wrote: the aborted updates that reached the log, which
// read_committed readers must skip.
func abortedPresent(all []*kgo.Record, aborted map[string]bool) int {
	n := 0
	for _, r := range all {
		if aborted[string(r.Value)] {
			n++
		}
	}
	return n
}

// awaitNoOpenTxn waits until each partition of topic has its last stable
// offset at its end offset: no transaction open on it.
func awaitNoOpenTxn(ctx context.Context, base []kgo.Opt, topic string) error {
	cl, err := kgo.NewClient(base...)
	if err != nil {
		return err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	for {
		ends, err := adm.ListEndOffsets(ctx, topic)
		if err == nil {
			err = ends.Error()
		}
		stable, serr := adm.ListCommittedOffsets(ctx, topic)
		if serr == nil {
			serr = stable.Error()
		}
		if err == nil && serr == nil && sameOffsets(ends, stable) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for the transactions on %s to end: %w (last: %v, %v)", topic, ctx.Err(), err, serr)
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// sameOffsets reports whether a and b list the same offset for every
// partition of a.
func sameOffsets(a, b kadm.ListedOffsets) bool {
	same := true
	a.Each(func(o kadm.ListedOffset) {
		s, ok := b.Lookup(o.Topic, o.Partition)
		same = same && ok && s.Offset == o.Offset
	})
	return same
}
