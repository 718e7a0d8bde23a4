package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// startDevBroker runs `eosctl dev broker` until the returned stop func is
// called; stop returns the exit code.
func startDevBroker(t *testing.T, args ...string) (addr string, stop func() int) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var out, errOut syncBuffer
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, append([]string{"dev", "broker", "--listen", "127.0.0.1:0"}, args...), strings.NewReader(""), &out, &errOut)
	}()
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(out.String(), "\n") {
		select {
		case code := <-done:
			cancel()
			t.Fatalf("broker exited %d: %s", code, errOut.String())
		default:
		}
		if time.Now().After(deadline) {
			cancel()
			t.Fatalf("broker printed no address; stderr %s", errOut.String())
		}
		time.Sleep(5 * time.Millisecond)
	}
	if !strings.Contains(errOut.String(), "EOS_BROKERS=") {
		t.Errorf("no EOS_BROKERS hint: %s", errOut.String())
	}
	return strings.TrimSpace(strings.SplitN(out.String(), "\n", 2)[0]), func() int {
		cancel()
		select {
		case code := <-done:
			return code
		case <-time.After(10 * time.Second):
			t.Fatal("broker did not stop")
			return -1
		}
	}
}

func TestDevBrokerKeepsDataAcrossRestarts(t *testing.T) {
	dir := t.TempDir()
	addr, stop := startDevBroker(t, "--data-dir", dir, "--partitions", "3")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	// A transactional producer works against it and topics auto-create.
	p, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.TransactionalID("dev-test"), kgo.AllowAutoTopicCreation())
	if err != nil {
		t.Fatal(err)
	}
	if err := p.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	for _, v := range []string{"a", "b", "c"} {
		if err := p.ProduceSync(ctx, &kgo.Record{Topic: "dev", Value: []byte(v)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	if err := p.EndTransaction(ctx, kgo.TryCommit); err != nil {
		t.Fatal(err)
	}
	p.Close()
	if code := stop(); code != exitOK {
		t.Fatalf("stop exit %d", code)
	}

	addr, stop = startDevBroker(t, "--data-dir", dir)
	defer stop()
	c, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumeTopics("dev"),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	got := map[string]bool{}
	for len(got) < 3 && ctx.Err() == nil {
		c.PollFetches(ctx).EachRecord(func(r *kgo.Record) { got[string(r.Value)] = true })
	}
	if !got["a"] || !got["b"] || !got["c"] {
		t.Errorf("after restart got %v, want a, b and c", got)
	}
	ends, err := kadm.NewClient(c).ListEndOffsets(ctx, "dev")
	if err != nil {
		t.Fatal(err)
	}
	if n := len(ends["dev"]); n != 3 {
		t.Errorf("auto-created topic has %d partitions, want --partitions 3", n)
	}
}

// autoCreatedPartitions produces to topic, which does not exist yet, and
// returns how many partitions the broker gave it.
func autoCreatedPartitions(t *testing.T, addr, topic string) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// Each listing on a client of its own: kgo briefly caches metadata.
	// Listing every topic asks for none by name, so creates none.
	if ts, err := newAdmin(t, addr).ListTopics(ctx); err != nil || ts.Has(topic) {
		t.Fatalf("topic %s exists before the first produce (%v), or: %v", topic, ts.Names(), err)
	}
	p := newClient(t, addr, kgo.AllowAutoTopicCreation())
	if err := p.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte("x")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	ts, err := newAdmin(t, addr).ListTopics(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return len(ts[topic].Partitions)
}

func TestDevBrokerAutoCreatedTopicPartitions(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want int
	}{
		{nil, 3},
		{[]string{"--partitions", "5"}, 5},
		{[]string{"--partitions", "1"}, 1},
	} {
		addr, stop := startDevBroker(t, tc.args...)
		if got := autoCreatedPartitions(t, addr, "fresh"); got != tc.want {
			t.Errorf("%v: auto-created topic has %d partitions, want %d", tc.args, got, tc.want)
		}
		if code := stop(); code != exitOK {
			t.Fatalf("%v: stop exit %d", tc.args, code)
		}
	}
}

func TestDevBrokerBadFlags(t *testing.T) {
	for _, args := range [][]string{
		{"--listen", "nohost"},
		{"--listen", "0.0.0.0:9092"},
		{"--listen", "127.0.0.1:0", "--brokers-count", "0"},
		{"--listen", "127.0.0.1:0", "--partitions", "0"},
	} {
		if _, errOut, code := runCLI(t, nil, append([]string{"dev", "broker"}, args...)...); code != exitUsage {
			t.Errorf("%v: exit %d: %s", args, code, errOut)
		}
	}
}
