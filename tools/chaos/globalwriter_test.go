package chaos

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// A produce the broker never answers holds the writer's transaction past
// its deadline; stop still returns within its bound, having failed the
// client's requests, and the stalled transaction is recorded as aborted:
// its end could not commit it.
func TestTableWriterStopBounded(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(3, "table"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	wake := make(chan struct{})
	var once sync.Once
	defer once.Do(func() { close(wake) })
	var held atomic.Int64
	c.ControlKey(int16(kmsg.Produce), func(kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		held.Add(1)
		c.SleepControl(func() { <-wake })
		return nil, nil, false
	})
	w := newTableWriter("table", 3, []string{"c0", "c1", "c2", "c9"}, 1)
	w.grace = time.Second
	var events []string
	var mu sync.Mutex
	w.start([]kgo.Opt{kgo.SeedBrokers(c.ListenAddrs()...)}, "writer", func(f string, a ...any) {
		mu.Lock()
		defer mu.Unlock()
		events = append(events, f)
	})
	deadline := time.Now().Add(10 * time.Second)
	for held.Load() == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if held.Load() == 0 {
		t.Fatal("no produce reached the broker: the test proves nothing")
	}
	began := time.Now()
	w.stop()
	took := time.Since(began)
	stopped := false
	select {
	case <-w.done:
		stopped = true
	default:
	}
	if took > 2*w.grace+time.Second || !stopped {
		t.Fatalf("stop took %s, the writer stopped: %v; want it stopped within %s", took, stopped, 2*w.grace)
	}
	out := w.outcome()
	mu.Lock()
	defer mu.Unlock()
	if took < w.grace || len(events) == 0 {
		t.Fatalf("stop took %s, events %q: the stalled transaction should have held it past the grace", took, events)
	}
	if out.commits != 0 || out.aborts != 1 || len(out.uncertain) != 0 || len(out.aborted) != tableRowsPerTxn {
		t.Fatalf("outcome %+v: want the stalled transaction aborted, nothing else", out)
	}
}

// The read after the run shows a committed update read_committed and not
// an aborted one, whose record it still finds in the log.
func TestReadTable(t *testing.T) {
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(3, "table"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	base := []kgo.Opt{kgo.SeedBrokers(c.ListenAddrs()...)}
	w := newTableWriter("table", 3, []string{"c0", "c1", "c2", "c9"}, 1)
	cl, err := kgo.NewClient(append(base, kgo.TransactionalID("writer"), kgo.RecordPartitioner(kgo.ManualPartitioner()))...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx := context.Background()
	for _, commit := range []bool{true, false} {
		rows, recs := w.draw(commit)
		if err := cl.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
		if err := cl.EndTransaction(ctx, kgo.TransactionEndTry(commit)); err != nil {
			t.Fatal(err)
		}
		w.record(rows, endOf(commit, nil, nil))
	}
	read, err := readTable(ctx, base, "table")
	if err != nil {
		t.Fatal(err)
	}
	out := w.outcome()
	for c, vs := range out.committed {
		for v := range vs {
			if !read.visible[c][v] {
				t.Errorf("committed %s=%s not visible read_committed: %v", c, v, read.visible)
			}
		}
	}
	for _, vs := range read.visible {
		for v := range vs {
			if out.aborted[v] {
				t.Errorf("aborted %s visible read_committed", v)
			}
		}
	}
	if n := abortedPresent(read.all, out.aborted); n != tableRowsPerTxn || len(read.all) != 2*tableRowsPerTxn {
		t.Fatalf("%d records read_uncommitted, %d of aborted updates: want %d and %d", len(read.all), n, 2*tableRowsPerTxn, tableRowsPerTxn)
	}
}
