package eos

import (
	"context"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
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
	if ctx0.Err() == nil {
		t.Fatal("revoking a/0 left its context live")
	}
	if ctx1.Err() != nil {
		t.Fatal("revoking a/0 ended a/1's context")
	}
	if again := c.of(a0); again.Err() != nil {
		t.Fatal("a/0 reassigned should get a live context")
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
