package verdict

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// drainRig is a kfake cluster with topic "t" of two partitions: committed
// records 0..2 (two on partition 0, one on partition 1).
func drainRig(t *testing.T) (*kfake.Cluster, []kgo.Opt) {
	t.Helper()
	c, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(2, "t"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	base := []kgo.Opt{kgo.SeedBrokers(c.ListenAddrs()...)}
	cl, err := kgo.NewClient(append(base, kgo.RecordPartitioner(kgo.ManualPartitioner()))...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	for i, p := range []int32{0, 0, 1} {
		r := &kgo.Record{Topic: "t", Partition: p, Value: Value(i, 0)}
		if err := cl.ProduceSync(context.Background(), r).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	return c, base
}

// drainWithin runs DrainWithin with a short bound and fails t if it did
// not return soon after the bound: a drain must never hold its caller.
func drainWithin(t *testing.T, base []kgo.Opt, want int) ([]*kgo.Record, error) {
	t.Helper()
	const bound = 2 * time.Second
	start := time.Now()
	recs, err := DrainWithin(context.Background(), base, "t", want, 100*time.Millisecond, bound)
	if took := time.Since(start); took > bound+20*time.Second {
		t.Fatalf("DrainWithin took %s with a bound of %s", took, bound)
	}
	return recs, err
}

func TestDrainWithinFinishes(t *testing.T) {
	_, base := drainRig(t)
	recs, err := drainWithin(t, base, 3)
	if err != nil || len(recs) != 3 {
		t.Fatalf("read %d records, error %v: want all 3 and no error", len(recs), err)
	}
}

// A reader whose fetches all fail reaches no position: the error names
// the topic, the records and each partition's position against the one
// it waited for.
func TestDrainWithinReportsPartitionsShort(t *testing.T) {
	c, base := drainRig(t)
	var refused atomic.Int64
	c.ControlKey(int16(kmsg.Fetch), func(kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		refused.Add(1)
		return nil, errors.New("fetch refused by the test"), true
	})
	recs, err := drainWithin(t, base, 3)
	if refused.Load() == 0 {
		t.Fatal("no fetch was refused: the test proves nothing")
	}
	u, ok := errors.AsType[*UnfinishedError](err)
	if !ok {
		t.Fatalf("read %d records, error %v: want an *UnfinishedError", len(recs), err)
	}
	if u.Topic != "t" || u.Want != 3 || u.Got != 0 || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("unfinished %+v: want topic t, 0 of 3 records, ended by its deadline", u)
	}
	want := []PartitionReach{{0, 0, 2}, {1, 0, 1}}
	if len(u.Partitions) != 2 || u.Partitions[0] != want[0] || u.Partitions[1] != want[1] {
		t.Errorf("partitions %+v, want %+v", u.Partitions, want)
	}
	for _, s := range []string{"reading t read_committed did not finish within 2s", "0 of 3 records",
		"partition 0 at offset 0 of 2, partition 1 at offset 0 of 1", "eosctl txn hanging --topic t"} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("error %q does not say %q", err, s)
		}
	}
}

// A reader that reached every readable position but not the records it
// waited for says so: those records are not committed in the log.
func TestDrainWithinReportsRecordsShort(t *testing.T) {
	_, base := drainRig(t)
	recs, err := drainWithin(t, base, 5)
	u, ok := errors.AsType[*UnfinishedError](err)
	if !ok {
		t.Fatalf("read %d records, error %v: want an *UnfinishedError", len(recs), err)
	}
	if len(recs) != 3 || u.Got != 3 || u.Want != 5 {
		t.Errorf("read %d records, unfinished %+v: want 3 of 5", len(recs), u)
	}
	for _, s := range []string{"3 of 5 records", "all 2 partitions reached the positions readable when it started"} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("error %q does not say %q", err, s)
		}
	}
}

// A drain that could not list its partitions' positions does not claim
// they were reached.
func TestUnfinishedWithoutPositions(t *testing.T) {
	err := (&UnfinishedError{Topic: "t", Isolation: "read_committed", Want: 3, Bound: time.Second, Err: context.DeadlineExceeded}).Error()
	if !strings.Contains(err, "positions could not be listed") || strings.Contains(err, "reached") {
		t.Fatalf("error %q: want it to say the positions could not be listed", err)
	}
}
