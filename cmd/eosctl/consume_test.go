package main

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// seedRecords writes records to topic with a plain franz-go client, each
// to the partition it names.
func seedRecords(t *testing.T, addr, topic string, recs ...*kgo.Record) {
	t.Helper()
	cl := newClient(t, addr, kgo.DefaultProduceTopic(topic), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

// values makes keyless records with these values in partition 0.
func values(vs ...string) []*kgo.Record {
	recs := make([]*kgo.Record, len(vs))
	for i, v := range vs {
		recs[i] = &kgo.Record{Value: []byte(v)}
	}
	return recs
}

// cliResult is what one eosctl run printed and its exit code.
type cliResult struct {
	out, errOut string
	code        int
}

// startCLI runs eosctl on a goroutine, for commands that wait (--follow).
func startCLI(t *testing.T, args ...string) <-chan cliResult {
	done := make(chan cliResult, 1)
	go func() {
		out, errOut, code := runCLI(t, nil, args...)
		done <- cliResult{out, errOut, code}
	}()
	return done
}

// feedUntilDone writes a record "new-N" to partition 0 of topic every
// 100ms until the run ends: it cannot know when the run has listed the
// end offsets, so it keeps writing until the run has what it waits for.
func feedUntilDone(t *testing.T, addr, topic string, done <-chan cliResult) cliResult {
	t.Helper()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(60 * time.Second)
	for i := 0; ; i++ {
		select {
		case res := <-done:
			return res
		case <-deadline:
			t.Fatal("eosctl consume did not stop within 60s")
		case <-tick.C:
			seedRecords(t, addr, topic, values(fmt.Sprintf("new-%d", i))...)
		}
	}
}

// consumeLines runs consume without --follow and returns its stdout
// lines, failing on a non-zero exit or if it does not stop by itself at
// the end offsets.
func consumeLines(t *testing.T, addr string, args ...string) []string {
	t.Helper()
	var res cliResult
	select {
	case res = <-startCLI(t, append([]string{"--brokers", addr, "consume"}, args...)...):
	case <-time.After(60 * time.Second):
		t.Fatalf("consume %q did not stop at the end offsets within 60s", args)
	}
	if res.code != exitOK {
		t.Fatalf("consume %q: exit %d: %s", args, res.code, res.errOut)
	}
	if !strings.HasPrefix(res.errOut, "consumed ") {
		t.Errorf("consume %q: no summary on stderr: %q", args, res.errOut)
	}
	if res.out == "" {
		return nil
	}
	return strings.Split(strings.TrimSuffix(res.out, "\n"), "\n")
}

// What produce wrote, consume prints back: values, -K, a --format layout
// with headers, and -o json with every field.
func TestProduceConsumeRoundTrip(t *testing.T) {
	_, addr := newCluster(t, kfake.SeedTopics(1, "orders"))
	if _, errOut, code := runCLI(t, strings.NewReader("o-1:first\no-2:second\nkeyless\n"), "--brokers", addr,
		"produce", "orders", "-K", ":", "-H", "source=cli", "-H", "n=1"); code != exitOK {
		t.Fatalf("produce: exit %d: %s", code, errOut)
	}
	if got := consumeLines(t, addr, "orders"); !slices.Equal(got, []string{"first", "second", "keyless"}) {
		t.Errorf("text: %q", got)
	}
	if got := consumeLines(t, addr, "orders", "-K", "%{:}"); !slices.Equal(got, []string{"o-1%{:}first", "o-2%{:}second", "%{:}keyless"}) {
		t.Errorf("-K prints the separator as given: %q", got)
	}
	got := consumeLines(t, addr, "orders", "--format", `%p/%o %k\t%v %H[%h{%k=%v;}]\n`)
	want := []string{"0/0 o-1\tfirst 2[source=cli;n=1;]", "0/1 o-2\tsecond 2[source=cli;n=1;]", "0/2 \tkeyless 2[source=cli;n=1;]"}
	if !slices.Equal(got, want) {
		t.Errorf("--format:\n got %q\nwant %q", got, want)
	}

	lines := consumeLines(t, addr, "-o", "json", "orders")
	if len(lines) != 3 {
		t.Fatalf("-o json: %d lines, want 3: %q", len(lines), lines)
	}
	var first consumedJSON
	if err := json.Unmarshal([]byte(lines[0]), &first); err != nil {
		t.Fatalf("-o json line is not JSON: %v: %s", err, lines[0])
	}
	if first.Topic != "orders" || first.Partition != 0 || first.Offset != 0 || first.Key == nil || *first.Key != "o-1" ||
		first.Value == nil || *first.Value != "first" || first.ProducerID < 0 || first.ProducerEpoch < 0 || len(first.Headers) != 2 ||
		first.Headers[0].Key != "source" || *first.Headers[0].Value != "cli" {
		t.Errorf("-o json: %s", lines[0])
	}
	if ts, err := time.Parse(time.RFC3339, first.Timestamp); err != nil || time.Since(ts) > time.Hour {
		t.Errorf("timestamp %q (%v)", first.Timestamp, err)
	}
	var third map[string]any
	if err := json.Unmarshal([]byte(lines[2]), &third); err != nil || third["key"] != nil || third["offset"] != 2.0 {
		t.Errorf("keyless record: %s (%v)", lines[2], err)
	}
}

// What consume -o json prints, produce --format json takes back: keys,
// values (bytes that are not UTF-8 too), headers and timestamps survive.
func TestConsumeJSONFeedsProduce(t *testing.T) {
	_, addr := newCluster(t, kfake.SeedTopics(1, "src", "dst"))
	ts := time.Date(2024, 5, 1, 12, 0, 0, 123e6, time.UTC)
	seedRecords(t, addr, "src",
		&kgo.Record{Key: []byte("k"), Value: []byte("text"), Timestamp: ts, Headers: []kgo.RecordHeader{{Key: "h", Value: []byte("v")}}},
		&kgo.Record{Key: []byte{0xff, 0xfe}, Value: []byte{0, 0x80, 0xff}, Timestamp: ts.Add(time.Second)},
		&kgo.Record{Value: nil, Timestamp: ts.Add(2 * time.Second)},
	)
	out, errOut, code := runCLI(t, nil, "--brokers", addr, "-o", "json", "consume", "src")
	if code != exitOK {
		t.Fatalf("consume: exit %d: %s", code, errOut)
	}
	if !strings.Contains(out, `"value":null,"value_base64":"AID/"`) {
		t.Errorf("binary value not in value_base64: %s", out)
	}
	if _, errOut, code := runCLI(t, strings.NewReader(out), "--brokers", addr, "produce", "dst", "--format", "json"); code != exitOK {
		t.Fatalf("produce: exit %d: %s", code, errOut)
	}
	src, dst := producedRecords(t, addr, "src"), producedRecords(t, addr, "dst")
	if len(dst) != len(src) {
		t.Fatalf("%d records copied of %d", len(dst), len(src))
	}
	for i := range src {
		s, d := src[i], dst[i]
		if string(s.Key) != string(d.Key) || (s.Key == nil) != (d.Key == nil) || string(s.Value) != string(d.Value) ||
			(s.Value == nil) != (d.Value == nil) || headerText(s.Headers) != headerText(d.Headers) || !s.Timestamp.Equal(d.Timestamp) {
			t.Errorf("record %d: copied %q=%q %q at %s, want %q=%q %q at %s", i,
				d.Key, d.Value, headerText(d.Headers), d.Timestamp, s.Key, s.Value, headerText(s.Headers), s.Timestamp)
		}
	}
}

// read_committed (the default) hides an aborted transaction and stops at
// an open one; read_uncommitted shows both.
func TestConsumeIsolation(t *testing.T) {
	_, addr := newCluster(t, kfake.SeedTopics(1, "txns"))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	txn := newClient(t, addr, kgo.TransactionalID("consume-test"), kgo.DefaultProduceTopic("txns"))
	for _, end := range []kgo.TransactionEndTry{kgo.TryCommit, kgo.TryAbort} {
		if err := txn.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		vals := []string{"committed"}
		if end == kgo.TryAbort {
			vals = []string{"aborted-1", "aborted-2"}
		}
		if err := txn.ProduceSync(ctx, values(vals...)...).FirstErr(); err != nil {
			t.Fatal(err)
		}
		if err := txn.EndTransaction(ctx, end); err != nil {
			t.Fatal(err)
		}
	}
	if got := consumeLines(t, addr, "txns"); !slices.Equal(got, []string{"committed"}) {
		t.Errorf("read_committed after an aborted transaction: %q", got)
	}
	openTxn(t, addr, "txns", "consume-open") // never ended: the LSO stays before it
	if got := consumeLines(t, addr, "txns"); !slices.Equal(got, []string{"committed"}) {
		t.Errorf("read_committed with an open transaction: %q", got)
	}
	if got := consumeLines(t, addr, "txns", "--isolation", "read_uncommitted"); !slices.Equal(got, []string{"committed", "aborted-1", "aborted-2", "in-flight"}) {
		t.Errorf("read_uncommitted: %q", got)
	}
	pid, epoch, err := txn.ProducerID(ctx)
	if err != nil {
		t.Fatal(err)
	}
	lines := consumeLines(t, addr, "txns", "-o", "json", "--isolation", "read_uncommitted", "--max", "2")
	for _, l := range lines {
		var j consumedJSON
		// Each transaction may bump the epoch (KIP-890): up to the current one.
		if err := json.Unmarshal([]byte(l), &j); err != nil || j.ProducerID != pid || j.ProducerEpoch < 0 || j.ProducerEpoch > epoch {
			t.Errorf("want producer %d, epoch up to %d: %s (%v)", pid, epoch, l, err)
		}
	}
}

// --max, --partition and each form of --from, stopping at the end offsets.
func TestConsumeMaxAndPartitionAndFrom(t *testing.T) {
	_, addr := newCluster(t, kfake.SeedTopics(2, "orders"))
	seedRecords(t, addr, "orders", values("a0", "a1", "a2", "a3")...)
	seedRecords(t, addr, "orders", &kgo.Record{Partition: 1, Value: []byte("b0")}, &kgo.Record{Partition: 1, Value: []byte("b1")})
	for _, tc := range []struct {
		args   []string
		want   []string
		sorted bool // both partitions, which interleave
	}{
		{[]string{"-p", "0", "--max", "2"}, []string{"a0", "a1"}, false},
		{[]string{"-p", "0", "--from", "2"}, []string{"a2", "a3"}, false},
		{[]string{"-p", "0", "--from", "-1"}, []string{"a3"}, false},
		{[]string{"-p", "1"}, []string{"b0", "b1"}, false},
		{[]string{"--from", "end"}, nil, false},
		{[]string{"-p", "0", "--from", "99"}, nil, false},
		{[]string{"--from", "2000-01-01T00:00:00Z", "-f", `%p:%v\n`}, []string{"0:a0", "0:a1", "0:a2", "0:a3", "1:b0", "1:b1"}, true},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			got := consumeLines(t, addr, append([]string{"orders"}, tc.args...)...)
			if tc.sorted {
				slices.Sort(got)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
	_, errOut, code := runCLI(t, nil, "--brokers", addr, "consume", "orders", "-p", "2")
	if code != exitFailure || !strings.Contains(errOut, `topic "orders" has no partition 2`) {
		t.Errorf("-p 2 of 2: exit %d: %s", code, errOut)
	}
}

// --follow with --idle prints what is there, then stops once nothing comes.
func TestConsumeIdleStops(t *testing.T) {
	_, addr := newCluster(t, kfake.SeedTopics(1, "orders"))
	seedRecords(t, addr, "orders", values("a", "b")...)
	res := <-startCLI(t, "--brokers", addr, "consume", "orders", "--follow", "--idle", "3s")
	if res.code != exitOK || res.out != "a\nb\n" || !strings.Contains(res.errOut, "consumed 2 record(s)") || !strings.Contains(res.errOut, "no record for --idle 3s") {
		t.Errorf("exit %d, stdout %q, stderr %q", res.code, res.out, res.errOut)
	}
}

// --follow reads past the end offsets it started with, until --max.
func TestConsumeFollowStopsOnMax(t *testing.T) {
	_, addr := newCluster(t, kfake.SeedTopics(1, "orders"))
	seedRecords(t, addr, "orders", values("old-1", "old-2")...)
	res := feedUntilDone(t, addr, "orders", startCLI(t, "--brokers", addr, "consume", "orders", "--follow", "--max", "3"))
	lines := strings.Split(strings.TrimSuffix(res.out, "\n"), "\n")
	if res.code != exitOK || len(lines) != 3 || lines[0] != "old-1" || lines[1] != "old-2" || !strings.HasPrefix(lines[2], "new-") {
		t.Errorf("exit %d, stdout %q, stderr %q", res.code, res.out, res.errOut)
	}
	if !strings.Contains(res.errOut, "--max 3 reached") {
		t.Errorf("stderr: %q", res.errOut)
	}
}

// --from end --follow prints only records written after it started.
func TestConsumeFromEndFollow(t *testing.T) {
	_, addr := newCluster(t, kfake.SeedTopics(1, "orders"))
	seedRecords(t, addr, "orders", values("old-1", "old-2")...)
	res := feedUntilDone(t, addr, "orders", startCLI(t, "--brokers", addr, "consume", "orders", "--from", "end", "--follow", "--max", "1"))
	if res.code != exitOK || !strings.HasPrefix(res.out, "new-") || strings.Count(res.out, "\n") != 1 {
		t.Errorf("exit %d, stdout %q, stderr %q", res.code, res.out, res.errOut)
	}
}

// An unknown topic names the command that creates it, and is not created
// on a broker that creates topics on first use.
func TestConsumeUnknownTopicSaysHowToCreate(t *testing.T) {
	_, addr := newCluster(t, kfake.AllowAutoTopicCreation())
	_, errOut, code := runCLI(t, nil, "--brokers", addr, "consume", "nope")
	if code != exitFailure || !strings.Contains(errOut, "eosctl topic create nope") {
		t.Errorf("exit %d: %s", code, errOut)
	}
	if _, ok := topicsOn(t, addr)["nope"]; ok {
		t.Error("consume created the topic")
	}
}

// Bad flags exit 2 before connecting.
func TestConsumeUsage(t *testing.T) {
	for _, args := range [][]string{
		{"consume"},
		{"consume", "orders", "--isolation", "read_everything"},
		{"consume", "orders", "--from", "middle"},
		{"consume", "orders", "--max", "-1"},
		{"consume", "orders", "--idle", "-1s"},
		{"consume", "orders", "-p", "-1"},
		{"consume", "orders", "-f", "%v", "-K", ":"},
		{"-o", "json", "consume", "orders", "-f", "%v"},
		{"consume", "orders", "-f", "%v{nope}"},
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			_, errOut, code := runCLI(t, nil, append([]string{"--brokers", "127.0.0.1:1"}, args...)...)
			if code != exitUsage {
				t.Errorf("exit %d, want %d: %s", code, exitUsage, errOut)
			}
		})
	}
}

// Each form of --from.
func TestConsumeParseFrom(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want fromSpec
	}{
		{"beginning", fromSpec{kind: fromBeginning}},
		{"end", fromSpec{kind: fromEnd}},
		{"42", fromSpec{kind: fromOffset, n: 42}},
		{"-5", fromSpec{kind: fromBeforeEnd, n: 5}},
		{"2024-05-01T12:00:00Z", fromSpec{kind: fromTime, n: 1714564800000}},
	} {
		if got, err := parseFrom(tc.in); err != nil || got != tc.want {
			t.Errorf("parseFrom(%q) = %+v, %v; want %+v", tc.in, got, err, tc.want)
		}
	}
}
