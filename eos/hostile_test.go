package eos_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/eosflow/eosflow/codec"
	"github.com/eosflow/eosflow/config"
	"github.com/eosflow/eosflow/processor"
	"github.com/eosflow/eosflow/tools/conformance"
	"github.com/eosflow/eosflow/tools/kafkatest"
	"github.com/eosflow/eosflow/topology"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// hostileCodec passes values through, except that it panics on a value
// starting with "POISON" and fails on one starting with "BAD", as a
// decoder with a bug and one meeting a malformed record would.
var hostileCodec = codec.Func[[]byte]{
	EncodeFunc: func(v []byte) ([]byte, error) { return v, nil },
	DecodeFunc: func(b []byte) ([]byte, error) {
		switch {
		case bytes.HasPrefix(b, []byte("POISON")):
			var m map[string]int
			m["decoder bug"]++ // a nil map write: a runtime panic, not a panic(value)
			return nil, nil
		case bytes.HasPrefix(b, []byte("BAD")):
			return nil, errors.New("malformed record")
		}
		return b, nil
	},
}

// Hostile records on the embedded broker, with its default max.message.bytes
// (1048588): huge keys, values and headers near that limit, nil and empty
// keys and values, invalid UTF-8 everywhere, a value whose decoder panics
// (among them one near the size limit) and one it rejects. Under
// exactly-once the decodable ones reach the output once each, the other
// two go to the dead-letter topic once each, the panic's message and stack
// in its headers, and the records after the poison ones are processed
// exactly once: the runner neither crashes nor sticks on the partition.
func TestHostileRecords(t *testing.T) {
	env := kafkatest.Fake(t)
	env.CreateTopics(t, 1, "in", "out", "dlq")
	const near = 900 << 10 // under the broker's 1048588 and the producer's 1000012 batch limit, with room for dead-letter headers
	bigHeaders := make([]kgo.RecordHeader, 0, 800)
	for i := range 800 {
		bigHeaders = append(bigHeaders, kgo.RecordHeader{Key: fmt.Sprintf("h%d\xff", i), Value: bytes.Repeat([]byte{0xfe}, 1000)})
	}
	var in []*kgo.Record
	add := func(key, value []byte, headers ...kgo.RecordHeader) {
		in = append(in, &kgo.Record{Topic: "in", Key: key, Value: value, Headers: headers})
	}
	for i := range 5 {
		add([]byte("k"), fmt.Appendf(nil, "before-%d", i))
	}
	add(nil, []byte("nil key"))
	add([]byte{}, []byte("empty key"))
	add([]byte("nil value"), nil)
	add(bytes.Repeat([]byte("K"), near), []byte("huge key"))
	add([]byte("huge value"), bytes.Repeat([]byte("V"), near))
	add([]byte("huge headers"), []byte("huge headers"), bigHeaders...)
	add([]byte("\xff\xfe\xc3"), []byte("invalid \xff utf-8 \xc3"), kgo.RecordHeader{Key: "\xff", Value: []byte("\xc3\x28")})
	add([]byte("poison"), []byte("POISON small"))
	add([]byte("poison"), append([]byte("POISON huge "), bytes.Repeat([]byte("P"), near)...))
	add([]byte("bad"), []byte("BAD record"))
	const after = 200
	for i := range after {
		add([]byte("k"), fmt.Appendf(nil, "after-%d", i))
	}
	// Forged dead-letter headers on an ordinary record are its own
	// business; on a poison one they are replaced.
	in[len(in)-after-3].Headers = []kgo.RecordHeader{{Key: processor.HeaderStack, Value: []byte("forged")}}

	cl := env.Client(t, kgo.ProducerBatchMaxBytes(1_000_012), kgo.MaxBufferedBytes(64<<20))
	for _, r := range in { // one at a time, so a huge record is a batch of its own
		if err := cl.ProduceSync(context.Background(), r).FirstErr(); err != nil {
			t.Fatalf("seeding a record of %d bytes: %v", len(r.Key)+len(r.Value), err)
		}
	}

	top := topology.New()
	src := topology.Source(top, "in", hostileCodec)
	topology.To(topology.MapValues(src, "same", func(_ context.Context, v []byte) ([]byte, error) { return v, nil }), "out", codec.Bytes())
	top.OnError("in", topology.DeadLetter("dlq"))
	cfg := env.Config("app", "a", config.ExactlyOnce)
	x := conformance.Start(t, cfg, top)
	x.WaitCommitted(t, uint64(len(in)), 90*time.Second)

	// The partition still moves: one more record goes through.
	last := &kgo.Record{Topic: "in", Key: []byte("k"), Value: []byte("last")}
	if err := cl.ProduceSync(context.Background(), last).FirstErr(); err != nil {
		t.Fatal(err)
	}
	in = append(in, last)
	x.WaitCommitted(t, uint64(len(in)), 30*time.Second)

	var wantOut, wantDLQ []*kgo.Record
	for _, r := range in {
		if bytes.HasPrefix(r.Value, []byte("POISON")) || bytes.HasPrefix(r.Value, []byte("BAD")) {
			wantDLQ = append(wantDLQ, r)
		} else {
			wantOut = append(wantOut, r)
		}
	}
	out := conformance.Drain(t, env, "out", len(wantOut))
	dlq := conformance.Drain(t, env, "dlq", len(wantDLQ))
	sameRecords(t, "out", out, wantOut)
	sameRecords(t, "dlq", dlq, wantDLQ)

	for _, d := range dlq {
		dl, ok := processor.ParseDeadLetter(d.Headers)
		if !ok || dl.Node != "in" || dl.Topic != "in" {
			t.Fatalf("dead letter of %.20q: parsed %+v ok=%v", d.Value, dl, ok)
		}
		if bytes.HasPrefix(d.Value, []byte("POISON")) {
			if !strings.Contains(dl.Error, "panic: assignment to entry in nil map") || !strings.Contains(dl.Stack, "hostile_test.go") {
				t.Fatalf("poison dead letter: error %q, stack %.300q; want the panic's message and a stack through the decoder", dl.Error, dl.Stack)
			}
		} else if dl.Error == "" || !strings.Contains(dl.Error, "malformed record") || dl.Stack != "" {
			t.Fatalf("bad record's dead letter: error %q stack %q", dl.Error, dl.Stack)
		}
	}
	if s := x.R.Stats(); s.DeadLettered != uint64(len(wantDLQ)) {
		t.Fatalf("stats count %d dead letters, want %d: %+v", s.DeadLettered, len(wantDLQ), s)
	}
}

// sameRecords fails t unless got holds each of want's values once, in
// order, with its key (nil and empty count as the same, as Kafka stores
// them) and its headers first.
func sameRecords(t *testing.T, topic string, got, want []*kgo.Record) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s holds %d records, want %d", topic, len(got), len(want))
	}
	for i, w := range want {
		g := got[i]
		if !bytes.Equal(g.Value, w.Value) || !bytes.Equal(g.Key, w.Key) {
			t.Fatalf("%s record %d: key %.20q value %.20q (%d bytes), want key %.20q value %.20q (%d bytes)", topic, i, g.Key, g.Value, len(g.Value), w.Key, w.Value, len(w.Value))
		}
		own := processor.WithoutDeadLetter(w.Headers)
		if len(g.Headers) < len(own) {
			t.Fatalf("%s record %d: %d headers, want at least the source's %d", topic, i, len(g.Headers), len(own))
		}
		for j, h := range own {
			if g.Headers[j].Key != h.Key || !bytes.Equal(g.Headers[j].Value, h.Value) {
				t.Fatalf("%s record %d header %d: %q, want %q", topic, i, j, g.Headers[j].Key, h.Key)
			}
		}
	}
}

// A poison record too large for the dead-letter topic (its max.message.bytes
// below the input's) cannot be dead-lettered: Run stops with an error
// wrapping MESSAGE_TOO_LARGE that names the record and the fix, rather than
// dropping it or retrying forever; nothing of its batch becomes visible, and
// the records before it are output at most once.
func TestHostileDeadLetterTooLarge(t *testing.T) {
	env := kafkatest.Fake(t)
	env.CreateTopics(t, 1, "in", "out")
	small := "10000"
	env.CreateTopicsWith(t, 1, map[string]*string{"max.message.bytes": &small}, "dlq")
	cl := env.Client(t)
	var poisonOffset int64 = -1
	for i := range 21 {
		v := fmt.Appendf(nil, "rec-%d", i)
		if i == 10 {
			v = append([]byte("POISON "), bytes.Repeat([]byte("P"), 50_000)...)
		}
		res, err := cl.ProduceSync(context.Background(), &kgo.Record{Topic: "in", Key: []byte("k"), Value: v}).First()
		if err != nil {
			t.Fatal(err)
		}
		if i == 10 {
			poisonOffset = res.Offset
		}
	}

	top := topology.New()
	src := topology.Source(top, "in", hostileCodec)
	topology.To(src, "out", codec.Bytes())
	top.OnError("in", topology.DeadLetter("dlq"))
	x := conformance.Start(t, env.Config("app", "a", config.ExactlyOnce), top)
	err := x.Wait(t, 60*time.Second)
	if !errors.Is(err, kerr.MessageTooLarge) || !strings.Contains(err.Error(), fmt.Sprintf("dead letter of in/0@%d", poisonOffset)) || !strings.Contains(err.Error(), "max.message.bytes") {
		t.Fatalf("Run: %v; want MESSAGE_TOO_LARGE naming the dead letter of in/0@%d and max.message.bytes", err, poisonOffset)
	}
	if dlq := conformance.Drain(t, env, "dlq", 0); len(dlq) != 0 {
		t.Fatalf("dlq holds %d records", len(dlq))
	}
	seen := map[string]bool{}
	for _, r := range conformance.Drain(t, env, "out", 0) {
		v := string(r.Value)
		var i int
		if _, err := fmt.Sscanf(v, "rec-%d", &i); err != nil || i >= 10 || seen[v] {
			t.Fatalf("out holds %.20q (again: %v): only the records before the poison one, once each, may be there", v, seen[v])
		}
		seen[v] = true
	}
}
