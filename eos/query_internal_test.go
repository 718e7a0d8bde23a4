package eos

import (
	"bytes"
	"context"
	"errors"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// A partition count past its age is asked again; while the brokers do not
// answer, Locate goes on with the last count known.
func TestPartitionCountKeepsLastKnown(t *testing.T) {
	var pc partitionCounts
	pc.counts = map[string]int32{"in": 4}
	pc.asked = map[string]time.Time{"in": time.Now().Add(-2 * partitionCountAge)}
	if n, err := pc.count(context.Background(), nil, "in"); n != 4 || err != nil {
		t.Fatalf("an old count with no admin client: %d %v, want 4 and no error", n, err)
	}
	if _, err := pc.count(context.Background(), nil, "other"); !errors.Is(err, ErrStopped) {
		t.Fatalf("an unknown count with no admin client: %v, want ErrStopped", err)
	}
}

// A refresh waiting on a broker that never answers holds up no other
// count: the lock is not held across the round trip.
func TestPartitionCountRefreshOutsideLock(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() { // accept and never answer
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			defer c.Close()
		}
	}()
	admin, err := kgo.NewClient(kgo.SeedBrokers(ln.Addr().String()))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	r := &Runner{}
	r.health.admin.Store(admin)
	var pc partitionCounts
	pc.counts = map[string]int32{"in": 4}
	pc.asked = map[string]time.Time{"in": time.Now()}

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	go func() { _, _ = pc.count(ctx, []*Runner{r}, "slow") }()
	time.Sleep(200 * time.Millisecond)
	began := time.Now()
	if n, err := pc.count(context.Background(), []*Runner{r}, "in"); n != 4 || err != nil {
		t.Fatalf("a fresh count: %d %v, want 4", n, err)
	}
	if waited := time.Since(began); waited > time.Second {
		t.Fatalf("a fresh count waited %s for another topic's refresh", waited)
	}
}

// Callers that find no count known while one refresh is under way wait
// for its answer, success or failure, instead of each asking the brokers.
func TestPartitionCountSingleFlight(t *testing.T) {
	for _, fail := range []bool{false, true} {
		var asks atomic.Int32
		release := make(chan struct{})
		pc := partitionCounts{ask: func(context.Context, []*Runner, string) (int32, error) {
			asks.Add(1)
			<-release
			if fail {
				return 0, &unavailableError{errors.New("no broker answered")}
			}
			return 6, nil
		}}
		const callers = 8
		type answer struct {
			n   int32
			err error
		}
		answers := make(chan answer, callers)
		for range callers {
			go func() {
				n, err := pc.count(context.Background(), nil, "in")
				answers <- answer{n, err}
			}()
		}
		time.Sleep(200 * time.Millisecond) // every caller is waiting
		close(release)
		for range callers {
			a := <-answers
			var ue *unavailableError
			if fail && (a.n != 0 || !errors.As(a.err, &ue)) || !fail && (a.n != 6 || a.err != nil) {
				t.Fatalf("fail %v: a caller got %d %v", fail, a.n, a.err)
			}
		}
		if n := asks.Load(); n != 1 {
			t.Fatalf("fail %v: the brokers were asked %d times for one topic at once, want 1", fail, n)
		}
	}
}

// While the brokers fail to give a partition count, callers do not each
// start a refresh: a failed attempt counts as asked, and is retried after
// partitionCountRetry, answering meanwhile with the last count known, or
// else with the failure.
func TestPartitionCountFailureRetry(t *testing.T) {
	var asks atomic.Int32
	var fail atomic.Bool
	fail.Store(true)
	pc := partitionCounts{ask: func(context.Context, []*Runner, string) (int32, error) {
		asks.Add(1)
		if fail.Load() {
			return 0, &unavailableError{errors.New("no broker answered")}
		}
		return 6, nil
	}}
	ctx := context.Background()
	var ue *unavailableError
	for range 5 {
		if n, err := pc.count(ctx, nil, "in"); n != 0 || !errors.As(err, &ue) {
			t.Fatalf("no count known, brokers failing: %d %v, want the failure", n, err)
		}
	}
	if n := asks.Load(); n != 1 {
		t.Fatalf("asked %d times for 5 callers within the retry, want 1", n)
	}
	pc.asked["in"] = pc.asked["in"].Add(-partitionCountRetry)
	if _, err := pc.count(ctx, nil, "in"); !errors.As(err, &ue) || asks.Load() != 2 {
		t.Fatalf("after the retry interval: %v, asked %d times, want the failure and 2", err, asks.Load())
	}

	pc.counts["in"] = 4
	pc.asked["in"] = time.Now().Add(-2 * partitionCountAge)
	for range 5 {
		if n, err := pc.count(ctx, nil, "in"); n != 4 || err != nil {
			t.Fatalf("an old count, brokers failing: %d %v, want 4", n, err)
		}
	}
	if n := asks.Load(); n != 3 {
		t.Fatalf("asked %d times in all, want 3: one more for an old count", n)
	}
	fail.Store(false)
	pc.asked["in"] = pc.asked["in"].Add(-partitionCountRetry)
	if n, err := pc.count(ctx, nil, "in"); n != 6 || err != nil || pc.failed["in"] != nil {
		t.Fatalf("brokers back: %d %v (failed %v), want 6", n, err, pc.failed["in"])
	}
	if n, _ := pc.count(ctx, nil, "in"); n != 6 || asks.Load() != 4 {
		t.Fatalf("a fresh count: %d, asked %d times, want 6 and 4", n, asks.Load())
	}
}

// The cursor after a range piece's last key is a new array: writing it
// must not reach into the spare capacity of the key yielded to the caller.
func TestKeyAfterOwnArray(t *testing.T) {
	k := make([]byte, 3, 8)
	copy(k, "abc")
	mine := append(k, 'x') // the caller's, sharing k's array
	next := keyAfter(k)
	if mine[3] != 'x' {
		t.Fatalf("keyAfter wrote into the caller's key: %q", mine)
	}
	if !bytes.Equal(next, []byte("abc\x00")) {
		t.Fatalf("keyAfter(abc) = %q, want abc\\x00", next)
	}
}
