package eos

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

// A record's context ends when its partition is revoked or lost and when
// the client is replaced; the partition's next records get a live one, and
// other partitions are untouched.
func TestRecordContextsEndWithTheirPartition(t *testing.T) {
	var c recordContexts
	c.reset(context.Background())
	a0 := &kgo.Record{Topic: "a", Partition: 0}
	a1 := &kgo.Record{Topic: "a", Partition: 1}
	ctx0, ctx1 := c.of(a0), c.of(a1)
	if c.of(a0) != ctx0 {
		t.Fatal("one partition's records should share a context")
	}
	c.revoke(context.Background(), nil, map[string][]int32{"a": {0}})
	if ctx0.Err() != nil {
		t.Fatal("a revoke under way should leave a/0's context live for the record in flight")
	}
	if c.of(a0).Err() == nil {
		t.Fatal("a record of a/0 starting after its revoke began got a live context")
	}
	if c.of(a1) != ctx1 {
		t.Fatal("a/1's records lost their context to a/0's revoke")
	}
	c.release()
	if ctx0.Err() == nil {
		t.Fatal("a/0's revoke ended and left its context live")
	}
	if ctx1.Err() != nil {
		t.Fatal("revoking a/0 ended a/1's context")
	}
	if c.of(a0).Err() == nil {
		t.Fatal("a/0's records still in hand after its revoke got a live context")
	}
	if c.revokes.Load() != 1 {
		t.Fatalf("revokes counted %d, want 1", c.revokes.Load())
	}
	c.revoke(context.Background(), nil, map[string][]int32{})
	c.release()
	if c.revokes.Load() != 1 {
		t.Fatal("a revoke of nothing counted")
	}
	c.assign(context.Background(), nil, map[string][]int32{"a": {0}})
	if again := c.of(a0); again.Err() != nil {
		t.Fatal("a/0 assigned again should get a live context")
	}
	c.reset(context.Background())
	if ctx1.Err() == nil {
		t.Fatal("replacing the client left a/1's context live")
	}
	parent, cancel := context.WithCancel(context.Background())
	c.reset(parent)
	ctx := c.of(a1)
	cancel()
	if ctx.Err() == nil {
		t.Fatal("shutdown left a record context live")
	}
}

// franz-go partitions a record twice, the second time with Partition
// already set, when the partitioner has OnNewBatch; the wrapper would then
// take that index for a sink's choice. Neither it nor the default it wraps
// may have it.
func TestChoosingPartitionerIsPartitionedOnce(t *testing.T) {
	if _, ok := defaultPartitioner().ForTopic("t").(kgo.TopicPartitionerOnNewBatch); ok {
		t.Fatal("franz-go's default partitioner now has OnNewBatch; the wrapper must handle a second call")
	}
	tp := choosingPartitioner{defaultPartitioner()}.ForTopic("t")
	if _, ok := tp.(kgo.TopicPartitionerOnNewBatch); ok {
		t.Fatal("the wrapper has OnNewBatch")
	}
	if got := tp.Partition(&kgo.Record{Partition: 2}, 4); got != 2 {
		t.Fatalf("a chosen partition went to %d", got)
	}
	if !tp.RequiresConsistency(&kgo.Record{Partition: 2}) {
		t.Fatal("a chosen partition must index all partitions, not the writable ones")
	}
}

// A revoke waits for the user code running a record of a revoked
// partition, logs what it waits for, cancels its context only half way to
// its bound (a call that already took effect gets to report it), and past
// the bound gives up with an error log naming the partition; a record of
// another partition does not hold it.
func TestRevokeAwaitsRecordInFlight(t *testing.T) {
	var c recordContexts
	c.reset(context.Background())
	core, logs := observer.New(zap.InfoLevel)
	waiting := make(chan struct{}) // closed when the revoke logs its wait
	var once sync.Once
	log := zap.New(core, zap.Hooks(func(e zapcore.Entry) error {
		if strings.Contains(e.Message, "revoke: waiting for user code") {
			once.Do(func() { close(waiting) })
		}
		return nil
	}))
	a0 := &kgo.Record{Topic: "a", Partition: 0, Offset: 7}
	ctx := c.start(a0)
	c.await(map[string][]int32{"a": {1}}, time.Hour, "g", log) // another partition: returns at once
	returned := make(chan struct{})
	go func() {
		c.revoke(context.Background(), nil, map[string][]int32{"a": {0}})
		c.await(map[string][]int32{"a": {0}}, time.Hour, "g", log)
		c.release()
		close(returned)
	}()
	<-waiting
	if ctx.Err() != nil {
		t.Fatal("the revoke cancelled the record's context at once: a call that took effect would report a failure, and the next owner run it again")
	}
	if c.of(a0).Err() == nil {
		t.Fatal("another record of the revoked partition got a live context while the revoke waited")
	}
	select {
	case <-returned:
		t.Fatal("the revoke returned while the record's user code still ran")
	default:
	}
	c.done()
	<-returned
	if ctx.Err() == nil {
		t.Fatal("the revoke ended and left the partition's context live")
	}
	if n := logs.FilterMessageSnippet("revoke: waiting for user code").Len(); n != 1 {
		t.Errorf("%d logs of the wait, want 1", n)
	}

	a1 := &kgo.Record{Topic: "a", Partition: 1}
	ctx = c.start(a1)
	go func() {
		<-ctx.Done() // a call that waits on its context
		c.done()
	}()
	began := time.Now()
	c.revoke(context.Background(), nil, map[string][]int32{"a": {1}})
	c.await(map[string][]int32{"a": {1}}, 2*time.Second, "g", log)
	c.release()
	if took := time.Since(began); took < time.Second || logs.FilterMessageSnippet("cancelling its context").Len() != 1 {
		t.Fatalf("a call waiting on its context should return once it is cancelled, half way to the bound; the revoke took %s; logs: %v", took, logs.All())
	}
	if n := logs.FilterLevelExact(zap.ErrorLevel).Len(); n != 0 {
		t.Fatalf("%d error logs for a call that returned when cancelled", n)
	}

	c.start(&kgo.Record{Topic: "a", Partition: 2})
	c.await(map[string][]int32{"a": {2}}, 50*time.Millisecond, "g", log)
	if n := logs.FilterLevelExact(zap.ErrorLevel).FilterMessageSnippet("after rebalance_timeout").Len(); n != 1 {
		t.Fatalf("%d error logs after the bound, want 1; logs: %v", n, logs.All())
	}
}
