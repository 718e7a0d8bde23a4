package chaos

import (
	"context"
	"maps"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Pace and shape of the table updates of PipelineGlobalJoin.
const (
	// tableUpdateEvery is the pause between two update transactions.
	tableUpdateEvery = 200 * time.Millisecond
	// tableRowsPerTxn is how many rows one transaction updates.
	tableRowsPerTxn = 2
	// tableTxnTimeout is the writer's transaction timeout, after which
	// the broker aborts a transaction left open, and the deadline of each
	// transaction's produce and end, its records' delivery timeout too. It
	// does not bound a transaction: a record already sent fails only once
	// the broker answers, so while a broker is down a produce can wait
	// past it. stop bounds its own wait.
	tableTxnTimeout = 15 * time.Second
	// tableStopGrace is how long stop waits for the transaction under way
	// before it cancels the writer's client, which fails its requests, and
	// then again before it gives up on the writer.
	tableStopGrace = tableTxnTimeout + 5*time.Second
)

// tableWriter updates a global table's topic while the workers run: in
// transactions that commit new versions of changing customers ("v<n>")
// and in transactions that abort values no row may ever take ("x<n>"),
// for changing customers and customers without a row alike.
type tableWriter struct {
	table      string
	partitions int32
	changing   []string // customers an aborted update may touch
	rowed      []string // those of them with a row, which a commit updates
	rng        *rand.Rand

	mu  sync.Mutex
	out tableOutcome
	n   int // the last version number written

	once   sync.Once
	cancel context.CancelFunc // ends the updates after the one under way
	kill   context.CancelFunc // ends the client's requests too
	done   chan struct{}
	event  func(string, ...any)
	grace  time.Duration // tableStopGrace, but for tests
}

// tableOutcome is what the writer did: the versions whose transaction
// committed, the transactions whose commit's outcome is unknown (all
// their records written, then an error at the commit) until settle reads
// the table, and the values of aborted transactions.
type tableOutcome struct {
	committed map[string]map[string]bool // customer → versions
	uncertain []tableTxn
	aborted   map[string]bool
	// commits and aborts count transactions, those settled included;
	// unknown counts the commits that failed with an unknown outcome,
	// and unsettled those of them no read of the table has settled.
	commits, aborts, unknown, unsettled int
}

// tableTxn is one transaction's rows: customer → value.
type tableTxn map[string]string

// txnEnd is how one update transaction ended, as far as the writer knows.
type txnEnd int

const (
	txnCommitted txnEnd = iota // meant to commit, and EndTransaction committed it
	txnAborted                 // meant to abort, or a record failed: the end could only abort
	txnUncertain               // every record written, then the commit failed: either may have happened
)

// endOf is how a transaction meant to commit (or not) ended, from the
// errors of its produce and of its end.
func endOf(commit bool, produceErr, endErr error) txnEnd {
	switch {
	case !commit || produceErr != nil:
		return txnAborted
	case endErr != nil:
		return txnUncertain
	}
	return txnCommitted
}

func newTableWriter(table string, partitions int32, customers []string, seed uint64) *tableWriter {
	var rowed []string
	for _, c := range customers {
		if kindOf(customerNum(c)) != customerAbsent {
			rowed = append(rowed, c)
		}
	}
	return &tableWriter{
		table: table, partitions: partitions, changing: customers, rowed: rowed,
		rng: rand.New(rand.NewPCG(seed, seed^0x7461626c)), grace: tableStopGrace,
		out: tableOutcome{committed: map[string]map[string]bool{}, aborted: map[string]bool{}},
	}
}

// start writes updates until stop, through a transactional producer of
// id txnID made from base, remade after any error.
func (w *tableWriter) start(base []kgo.Opt, txnID string, event func(string, ...any)) {
	ctx, cancel := context.WithCancel(context.Background())
	hard, kill := context.WithCancel(context.Background())
	w.cancel, w.kill, w.done, w.event = cancel, kill, make(chan struct{}), event
	go func() {
		defer close(w.done)
		for ctx.Err() == nil {
			cl, err := kgo.NewClient(append(append([]kgo.Opt(nil), base...), kgo.TransactionalID(txnID), kgo.WithContext(hard),
				kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.TransactionTimeout(tableTxnTimeout),
				kgo.RecordDeliveryTimeout(tableTxnTimeout))...)
			for err == nil && ctx.Err() == nil {
				if err = w.txn(cl); err == nil {
					sleepCtx(ctx, tableUpdateEvery)
				}
			}
			if cl != nil {
				cl.Close()
			}
			if err != nil {
				event("global table writer: %v; retrying with a new producer", err)
				sleepCtx(ctx, time.Second)
			}
		}
	}()
}

// stop ends the updates and waits for the transaction under way, for
// tableStopGrace; past it, it fails the client's requests, and waits as
// long again before it gives up on the writer (whose transaction under
// way is then recorded nowhere: no order may join its rows). A writer
// never started stops at once.
func (w *tableWriter) stop() {
	w.once.Do(func() {
		if w.cancel == nil {
			return
		}
		w.cancel()
		if waitFor(w.done, w.grace) {
			return
		}
		w.event("global table writer: its transaction is still under way after %s; failing its requests", w.grace)
		w.kill()
		if !waitFor(w.done, w.grace) {
			w.event("global table writer: still not stopped; going on without it")
		}
	})
}

// waitFor reports whether done closed within d.
func waitFor(done <-chan struct{}, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-done:
		return true
	case <-t.C:
		return false
	}
}

// outcome is a copy of what the writer did, its own even if the writer
// never stopped.
func (w *tableWriter) outcome() tableOutcome {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := w.out
	out.committed, out.aborted = map[string]map[string]bool{}, maps.Clone(w.out.aborted)
	for c, vs := range w.out.committed {
		out.committed[c] = maps.Clone(vs)
	}
	out.uncertain = slices.Clone(w.out.uncertain)
	return out
}

// settle decides each uncertain transaction by visible, the table's
// rows read read_committed once no transaction was open on it: committed
// when its values are there, aborted when not. Nothing is accepted
// without that evidence: with visible nil (the read failed) they stay
// unsettled, and an order joining one of their values is judged wrong.
func (t *tableOutcome) settle(visible map[string]map[string]bool) {
	if visible == nil {
		t.unsettled = len(t.uncertain)
		return
	}
	for _, txn := range t.uncertain {
		shown := false
		for c, v := range txn {
			shown = shown || visible[c][v]
		}
		t.add(txn, shown)
	}
	t.uncertain = nil
}

// add files one transaction's rows as committed or aborted.
func (t *tableOutcome) add(txn tableTxn, committed bool) {
	if !committed {
		t.aborts++
		for _, v := range txn {
			t.aborted[v] = true
		}
		return
	}
	t.commits++
	for c, v := range txn {
		if t.committed[c] == nil {
			t.committed[c] = map[string]bool{}
		}
		t.committed[c][v] = true
	}
}

// txn writes one transaction, which commits two thirds of the time, and
// records its outcome.
func (w *tableWriter) txn(cl *kgo.Client) error {
	ctx, cancel := context.WithTimeout(context.Background(), tableTxnTimeout)
	defer cancel()
	commit := w.rng.IntN(3) != 0
	rows, recs := w.draw(commit)
	if len(recs) == 0 {
		return nil // no customer to update: a transaction would be empty
	}
	if err := cl.BeginTransaction(); err != nil {
		return err
	}
	err := cl.ProduceSync(ctx, recs...).FirstErr()
	end := kgo.TransactionEndTry(commit && err == nil)
	endErr := cl.EndTransaction(ctx, end)
	w.record(rows, endOf(commit, err, endErr))
	if err != nil {
		return err
	}
	return endErr
}

// draw picks one transaction's rows: tableRowsPerTxn distinct customers,
// so that each record written is one row recorded, with a new version
// each ("v<n>" to commit, "x<n>" to abort). A commit picks only
// customers that have a row, which a customer without one never gets, so
// no transaction commits nothing.
func (w *tableWriter) draw(commit bool) (tableTxn, []*kgo.Record) {
	from := w.changing
	if commit {
		from = w.rowed
	}
	rows := tableTxn{}
	var recs []*kgo.Record
	for _, k := range w.rng.Perm(len(from))[:min(tableRowsPerTxn, len(from))] {
		c := from[k]
		w.n++
		v := "x" + strconv.Itoa(w.n)
		if commit {
			v = "v" + strconv.Itoa(w.n)
		}
		rows[c] = v
		recs = append(recs, &kgo.Record{Topic: w.table, Partition: int32(customerNum(c)) % w.partitions, Key: []byte(c), Value: []byte(v)})
	}
	return rows, recs
}

// record notes one transaction's rows by how it ended.
func (w *tableWriter) record(rows tableTxn, end txnEnd) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if end == txnUncertain {
		w.out.unknown++
		w.out.uncertain = append(w.out.uncertain, rows)
		return
	}
	w.out.add(rows, end == txnCommitted)
}

// customerNum is the k of customer key "c<k>".
func customerNum(c string) int {
	k, _ := strconv.Atoi(c[1:])
	return k
}

// sleepCtx sleeps for d or until ctx ends.
func sleepCtx(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
