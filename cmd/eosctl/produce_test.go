package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

// producedRecords reads every record of topic with a plain franz-go
// client (not eosctl consume), sorted by partition and offset; it checks
// that the count matches the end offsets, so nothing extra was written.
func producedRecords(t *testing.T, addr, topic string) []*kgo.Record {
	t.Helper()
	ends, err := newAdmin(t, addr).ListEndOffsets(context.Background(), topic)
	if err != nil {
		t.Fatal(err)
	}
	var want int64
	ends.Each(func(o kadm.ListedOffset) { want += o.Offset })
	cl := newClient(t, addr, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var recs []*kgo.Record
	for ctx.Err() == nil && int64(len(recs)) < want {
		recs = append(recs, cl.PollFetches(ctx).Records()...)
	}
	if int64(len(recs)) != want {
		t.Fatalf("read %d records of %s, its end offsets sum to %d", len(recs), topic, want)
	}
	slices.SortFunc(recs, func(a, b *kgo.Record) int {
		if a.Partition != b.Partition {
			return int(a.Partition - b.Partition)
		}
		return int(a.Offset - b.Offset)
	})
	return recs
}

// headerText prints headers as k=v;k=v for comparisons.
func headerText(hs []kgo.RecordHeader) string {
	var s []string
	for _, h := range hs {
		s = append(s, h.Key+"="+string(h.Value))
	}
	return strings.Join(s, ";")
}

// Text lines split at -K into key and value (a line without it has no key),
// with the --header headers on every record and one summary line.
func TestProduceLinesWithKeysAndHeaders(t *testing.T) {
	_, addr := newCluster(t, kfake.SeedTopics(3, "orders"))
	in := "o-1:first\no-2:with:colons\nno separator\n\n:empty key\no-1:second"
	out, errOut, code := runCLI(t, strings.NewReader(in), "--brokers", addr, "produce", "orders",
		"-K", ":", "--header", "source=cli", "-H", "trace=a=b")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if out != "" {
		t.Errorf("stdout without -o json: %q", out)
	}
	if !strings.HasPrefix(errOut, "produced 6 record(s) to orders partition(s) ") || strings.Count(errOut, "\n") != 1 {
		t.Errorf("summary: %q", errOut)
	}
	type kv struct{ key, value string }
	var got []kv
	byKey := map[string]int32{}
	for _, r := range producedRecords(t, addr, "orders") {
		key := "<nil>"
		if r.Key != nil {
			key = string(r.Key)
		}
		got = append(got, kv{key, string(r.Value)})
		if h := headerText(r.Headers); h != "source=cli;trace=a=b" {
			t.Errorf("record %s: headers %q", r.Value, h)
		}
		if p, ok := byKey[key]; ok && p != r.Partition && r.Key != nil {
			t.Errorf("key %s in partitions %d and %d", key, p, r.Partition)
		}
		byKey[key] = r.Partition
	}
	slices.SortFunc(got, func(a, b kv) int { return strings.Compare(a.value, b.value) })
	want := []kv{{"<nil>", ""}, {"", "empty key"}, {"o-1", "first"}, {"<nil>", "no separator"}, {"o-1", "second"}, {"o-2", "with:colons"}}
	if !slices.Equal(got, want) {
		t.Errorf("records:\n got %v\nwant %v", got, want)
	}
}

// JSON lines: headers as an object (in order) or a list, RFC 3339 and
// epoch-millisecond timestamps, non-string values, base64 keys, blank lines.
func TestProduceJSONInput(t *testing.T) {
	_, addr := newCluster(t, kfake.SeedTopics(1, "events"))
	lines := []string{
		`{"key":"a","value":"plain","headers":{"z":"1","a":"2"},"timestamp":"2024-05-01T12:00:00.250Z"}`,
		``,
		`{"key":"b","value":{"amount": 3, "ok": true},"headers":[{"key":"h","value":"x"},{"key":"h","value":"y"}],"timestamp":1714564800000}`,
		`{"value":null}`,
		`{"key_base64":"/wA=","value":"bytes key"}`,
	}
	file := filepath.Join(t.TempDir(), "events.jsonl")
	if err := os.WriteFile(file, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	out, errOut, code := runCLI(t, nil, "--brokers", addr, "-o", "json", "produce", "events", "--format", "json", "--file", file)
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var sum producedJSON
	if err := json.Unmarshal([]byte(out), &sum); err != nil || sum.Topic != "events" || sum.Records != 4 || !slices.Equal(sum.Partitions, []int32{0}) {
		t.Errorf("-o json summary %+v (%v): %s", sum, err, out)
	}
	recs := producedRecords(t, addr, "events")
	if len(recs) != 4 {
		t.Fatalf("%d records, want 4 (the blank line skipped)", len(recs))
	}
	if r := recs[0]; string(r.Key) != "a" || string(r.Value) != "plain" || headerText(r.Headers) != "z=1;a=2" ||
		!r.Timestamp.Equal(time.Date(2024, 5, 1, 12, 0, 0, 250e6, time.UTC)) {
		t.Errorf("RFC 3339 line: key %q value %q headers %q at %s", r.Key, r.Value, headerText(r.Headers), r.Timestamp)
	}
	if r := recs[1]; string(r.Value) != `{"amount":3,"ok":true}` || headerText(r.Headers) != "h=x;h=y" || r.Timestamp.UnixMilli() != 1714564800000 {
		t.Errorf("epoch-ms line: value %q headers %q at %d", r.Value, headerText(r.Headers), r.Timestamp.UnixMilli())
	}
	if r := recs[2]; r.Key != nil || r.Value != nil || r.Timestamp.IsZero() {
		t.Errorf("null line: key %q value %q, timestamp %s (want null, null, stamped on send)", r.Key, r.Value, r.Timestamp)
	}
	if r := recs[3]; string(r.Key) != "\xff\x00" || string(r.Value) != "bytes key" {
		t.Errorf("base64 key: %q %q", r.Key, r.Value)
	}
}

// A bad JSON line stops produce with its line number; the lines before it
// are in the topic and nothing after it is.
func TestProduceBadJSONLineNamesIt(t *testing.T) {
	for _, tc := range []struct {
		name, line, want string
	}{
		{"syntax", `{"value": "x"`, "line 3: invalid JSON"},
		{"not an object", `"just a string"`, "line 3: not a JSON object"},
		{"misspelt field", `{"vaule":"x"}`, `line 3: unknown field "vaule"`},
		{"bad timestamp", `{"value":"x","timestamp":"yesterday"}`, `line 3: timestamp "yesterday" is not RFC 3339`},
		{"bad headers", `{"value":"x","headers":"h=v"}`, "line 3: headers: want an object"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, addr := newCluster(t, kfake.SeedTopics(1, "events"))
			in := `{"value":"one"}` + "\n" + `{"value":"two"}` + "\n" + tc.line + "\n" + `{"value":"four"}` + "\n"
			_, errOut, code := runCLI(t, strings.NewReader(in), "--brokers", addr, "produce", "events", "--format", "json")
			if code != exitFailure {
				t.Fatalf("exit %d, want %d: %s", code, exitFailure, errOut)
			}
			if !strings.Contains(errOut, tc.want) || !strings.Contains(errOut, "2 record(s) were produced") {
				t.Errorf("stderr lacks %q and the count produced: %s", tc.want, errOut)
			}
			var vals []string
			for _, r := range producedRecords(t, addr, "events") {
				vals = append(vals, string(r.Value))
			}
			if !slices.Equal(vals, []string{"one", "two"}) {
				t.Errorf("topic holds %q, want the lines before the bad one", vals)
			}
		})
	}
}

// --partition puts every record there, in order; a partition the topic
// lacks is an error.
func TestProducePartition(t *testing.T) {
	_, addr := newCluster(t, kfake.SeedTopics(3, "orders"))
	_, errOut, code := runCLI(t, strings.NewReader("a:1\nb:2\nc:3\nd:4\n"), "--brokers", addr, "produce", "orders", "-K", ":", "--partition", "2")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if !strings.Contains(errOut, "produced 4 record(s) to orders partition(s) 2 in ") {
		t.Errorf("summary: %s", errOut)
	}
	var vals []string
	for _, r := range producedRecords(t, addr, "orders") {
		if r.Partition != 2 {
			t.Errorf("record %s in partition %d, want 2", r.Value, r.Partition)
		}
		vals = append(vals, string(r.Value))
	}
	if !slices.Equal(vals, []string{"1", "2", "3", "4"}) {
		t.Errorf("partition 2 holds %q, want 1..4 in order", vals)
	}

	_, errOut, code = runCLI(t, strings.NewReader("x\n"), "--brokers", addr, "produce", "orders", "--partition", "3")
	if code != exitFailure || !strings.Contains(errOut, `topic "orders" has no partition 3; it has 3 partition(s)`) {
		t.Errorf("--partition 3 of 3: exit %d: %s", code, errOut)
	}
}

// --rate paces records; the test checks only that all arrive, in order,
// not how long it took.
func TestProduceRateKeepsEveryRecordInOrder(t *testing.T) {
	_, addr := newCluster(t, kfake.SeedTopics(1, "paced"))
	var in strings.Builder
	for i := range 20 {
		fmt.Fprintf(&in, "v%02d\n", i)
	}
	_, errOut, code := runCLI(t, strings.NewReader(in.String()), "--brokers", addr, "produce", "paced", "--rate", "200")
	if code != exitOK {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	recs := producedRecords(t, addr, "paced")
	for i, r := range recs {
		if want := fmt.Sprintf("v%02d", i); string(r.Value) != want {
			t.Fatalf("record %d is %q, want %q", i, r.Value, want)
		}
	}
	if len(recs) != 20 {
		t.Errorf("%d records, want 20", len(recs))
	}
}

// An unknown topic names the command that creates it, and is not created
// on a broker that creates topics on first use (as eosctl dev broker).
func TestProduceUnknownTopicSaysHowToCreate(t *testing.T) {
	// A broker that creates topics on first use, as eosctl dev broker.
	_, addr := newCluster(t, kfake.AllowAutoTopicCreation())
	_, errOut, code := runCLI(t, strings.NewReader("x\n"), "--brokers", addr, "produce", "nope")
	if code != exitFailure || !strings.Contains(errOut, `topic "nope" does not exist`) || !strings.Contains(errOut, "eosctl topic create nope") {
		t.Errorf("exit %d: %s", code, errOut)
	}
	if _, ok := topicsOn(t, addr)["nope"]; ok {
		t.Error("produce created the topic")
	}
}

// An address nothing listens on fails at once, naming it.
func TestProduceUnreachableBroker(t *testing.T) {
	_, errOut, code := runCLI(t, strings.NewReader("x\n"), "--brokers", "127.0.0.1:1", "--timeout", "5s", "produce", "orders")
	if code != exitFailure || !strings.Contains(errOut, "cannot reach broker(s) 127.0.0.1:1") {
		t.Errorf("exit %d: %s", code, errOut)
	}
}

// Bad flags exit 2 before connecting; a missing --file exits 1.
func TestProduceUsage(t *testing.T) {
	for _, args := range [][]string{
		{},
		{"a", "b"},
		{"my topic"},
		{"orders", "--format", "xml"},
		{"orders", "--format", "json", "-K", ":"},
		{"orders", "--header", "no-equals"},
		{"orders", "--header", "=v"},
		{"orders", "--rate", "-1"},
		{"orders", "--rate", "NaN"},
		{"orders", "--partition", "-2"},
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			_, errOut, code := runCLI(t, nil, append([]string{"--brokers", "127.0.0.1:1", "produce"}, args...)...)
			if code != exitUsage {
				t.Errorf("exit %d, want %d: %s", code, exitUsage, errOut)
			}
		})
	}
	_, errOut, code := runCLI(t, nil, "--brokers", "127.0.0.1:1", "produce", "orders", "--file", filepath.Join(t.TempDir(), "missing"))
	if code != exitFailure || !strings.Contains(errOut, "cannot read --file") {
		t.Errorf("missing --file: exit %d: %s", code, errOut)
	}
}
