package chaos

import (
	"context"
	"math/rand/v2"
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
	// tableTxnTimeout bounds one transaction, from its begin to its end.
	tableTxnTimeout = 15 * time.Second
)

// tableWriter updates a global table's topic while the workers run: in
// transactions that commit new versions of changing customers ("v<n>")
// and in transactions that abort values no row may ever take ("x<n>"),
// for changing customers and customers without a row alike.
type tableWriter struct {
	table      string
	partitions int32
	changing   []string // customers an aborted update may touch
	rng        *rand.Rand

	mu  sync.Mutex
	out tableOutcome
	n   int // the last version number written

	once   sync.Once
	cancel context.CancelFunc
	done   chan struct{}
}

// tableOutcome is what the writer did: the versions whose transaction
// committed, those whose commit's outcome is unknown (an error at the
// commit), and the values of aborted transactions.
type tableOutcome struct {
	committed map[string]map[string]bool // customer → versions
	uncertain map[string]map[string]bool
	aborted   map[string]bool
	// commits, aborts and unknown count transactions.
	commits, aborts, unknown int
}

func newTableWriter(table string, partitions int32, customers []string, seed uint64) *tableWriter {
	return &tableWriter{
		table: table, partitions: partitions, changing: customers,
		rng: rand.New(rand.NewPCG(seed, seed^0x7461626c)),
		out: tableOutcome{committed: map[string]map[string]bool{}, uncertain: map[string]map[string]bool{}, aborted: map[string]bool{}},
	}
}

// start writes updates until stop, through a transactional producer of
// id txnID made from base, remade after any error.
func (w *tableWriter) start(base []kgo.Opt, txnID string, event func(string, ...any)) {
	ctx, cancel := context.WithCancel(context.Background())
	w.cancel, w.done = cancel, make(chan struct{})
	go func() {
		defer close(w.done)
		for ctx.Err() == nil {
			cl, err := kgo.NewClient(append(append([]kgo.Opt(nil), base...), kgo.TransactionalID(txnID),
				kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.TransactionTimeout(tableTxnTimeout))...)
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

// stop ends the updates and waits for the transaction under way; a
// writer never started stops at once.
func (w *tableWriter) stop() {
	w.once.Do(func() {
		if w.cancel != nil {
			w.cancel()
			<-w.done
		}
	})
}

// outcome is what the writer did, once it has stopped.
func (w *tableWriter) outcome() tableOutcome {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.out
}

// txn writes one transaction, which commits two thirds of the time, and
// records its outcome.
func (w *tableWriter) txn(cl *kgo.Client) error {
	ctx, cancel := context.WithTimeout(context.Background(), tableTxnTimeout)
	defer cancel()
	commit := w.rng.IntN(3) != 0
	rows := map[string]string{}
	var recs []*kgo.Record
	for range tableRowsPerTxn {
		k := w.rng.IntN(len(w.changing))
		c := w.changing[k]
		if commit && kindOf(customerNum(c)) == customerAbsent {
			continue // a customer without a row keeps none
		}
		w.n++
		v := "x" + strconv.Itoa(w.n)
		if commit {
			v = "v" + strconv.Itoa(w.n)
		}
		rows[c] = v
		recs = append(recs, &kgo.Record{Topic: w.table, Partition: int32(customerNum(c)) % w.partitions, Key: []byte(c), Value: []byte(v)})
	}
	if err := cl.BeginTransaction(); err != nil {
		return err
	}
	err := cl.ProduceSync(ctx, recs...).FirstErr()
	end := kgo.TransactionEndTry(commit && err == nil)
	endErr := cl.EndTransaction(ctx, end)
	w.record(rows, commit, err == nil && endErr == nil)
	if err != nil {
		return err
	}
	return endErr
}

// record notes one transaction's rows: committed when it was meant to
// and did, uncertain when it was meant to and failed, aborted otherwise.
func (w *tableWriter) record(rows map[string]string, commit, ok bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	into := w.out.committed
	switch {
	case commit && ok:
		w.out.commits++
	case commit:
		w.out.unknown++
		into = w.out.uncertain
	default:
		w.out.aborts++
	}
	for c, v := range rows {
		if !commit {
			w.out.aborted[v] = true
			continue
		}
		if into[c] == nil {
			into[c] = map[string]bool{}
		}
		into[c][v] = true
	}
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
