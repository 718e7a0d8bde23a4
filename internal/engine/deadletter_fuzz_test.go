package engine_test

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/eosflow/eosflow/codec"
	"github.com/eosflow/eosflow/config"
	"github.com/eosflow/eosflow/internal/engine"
	"github.com/eosflow/eosflow/processor"
	"github.com/eosflow/eosflow/topology"
	"github.com/twmb/franz-go/pkg/kgo"
)

// fuzzSecret is a SASL password that a failing node's error carries inside
// a printed config; no dead-letter header may show it.
const fuzzSecret = "dlq-fuzz-secret-7f3a"

// FuzzDeadLetter dead-letters a record with arbitrary key, value, headers
// (including forged dead-letter headers), timestamp and error message, from
// a node that fails or panics. The dead letter keeps the record's key and
// value, parses back (ParseDeadLetter) into exactly where it came from and
// why, owns only one copy of each dead-letter header, has valid UTF-8 text
// headers of bounded size, gives back the source's own headers through
// WithoutDeadLetter, and never shows a secret the error's config carried.
func FuzzDeadLetter(f *testing.F) {
	f.Add([]byte("k"), []byte("v"), "boom", "trace", []byte("t1"), int64(1_700_000_000_123), int64(99), false)
	f.Add([]byte(nil), []byte(nil), "", "", []byte(nil), int64(0), int64(0), false)
	f.Add([]byte{}, []byte("\xff\xfe"), "bad \xff utf-8 \xc3", "\xff", []byte("\x00"), int64(-62135596800000), int64(1<<62), true)
	f.Add([]byte("k"), []byte("v"), "boom", processor.HeaderStack, []byte("a forged stack"), int64(5), int64(7), false)
	f.Add([]byte("k"), []byte("v"), "boom", processor.HeaderError, []byte("forged"), int64(5), int64(7), true)
	f.Add([]byte("k"), bytes.Repeat([]byte("v"), 1<<20), strings.Repeat("e", 1<<20), "h", bytes.Repeat([]byte("h"), 1<<16), int64(5), int64(7), false)
	f.Add([]byte("k"), []byte("v"), strings.Repeat("é", 5000)+"\xe2\x82", "h", []byte("h"), int64(5), int64(7), true)

	f.Fuzz(func(t *testing.T, key, value []byte, msg, hkey string, hval []byte, tsMillis, offset int64, panics bool) {
		if offset < 0 {
			offset = -offset - 1 // offsets a broker hands out are not negative
		}
		cfg := config.Default()
		cfg.SASL = config.SASL{Mechanism: config.SASLPlain, Username: "u", Password: fuzzSecret}
		nodeErr := fmt.Errorf("%s (config %v)", msg, cfg)
		top := topology.New()
		in := topology.Source(top, "in", codec.Bytes())
		failing := topology.MapValues(in, "check", func(context.Context, []byte) ([]byte, error) {
			if panics {
				panic(nodeErr)
			}
			return nil, nodeErr
		})
		topology.To(failing, "out", codec.Bytes())
		top.OnError("check", topology.DeadLetter("dlq"))
		e, err := engine.New(top)
		if err != nil {
			t.Fatal(err)
		}
		ts := time.UnixMilli(tsMillis)
		src := &kgo.Record{Topic: "in", Partition: 3, Offset: offset, Key: key, Value: value, Timestamp: ts,
			Headers: []kgo.RecordHeader{{Key: hkey, Value: hval}, {Key: "trace", Value: []byte("t1")}}}
		var dead []*kgo.Record
		outcome, err := e.Process(context.Background(), src, func(r *kgo.Record) { dead = append(dead, r) })
		if err != nil || outcome != engine.DeadLettered || len(dead) != 1 {
			t.Fatalf("outcome %v, err %v, %d records out; want one dead letter", outcome, err, len(dead))
		}
		d := dead[0]
		if d.Topic != "dlq" || !bytes.Equal(d.Key, key) || !bytes.Equal(d.Value, value) || !d.Timestamp.Equal(ts) {
			t.Fatalf("dead letter topic %q key %q value len %d ts %v; want the source record's", d.Topic, d.Key, len(d.Value), d.Timestamp)
		}

		own := processor.WithoutDeadLetter(src.Headers)
		if got := processor.WithoutDeadLetter(d.Headers); !slices.EqualFunc(got, own, sameHeader) {
			t.Fatalf("headers less dead-letter ones %v, want the source's %v", got, own)
		}
		added := d.Headers[len(own):]
		if !slices.EqualFunc(d.Headers[:len(own)], own, sameHeader) {
			t.Fatalf("the source's own headers do not come first: %v", d.Headers)
		}
		seen := map[string]bool{}
		for _, h := range added {
			if seen[h.Key] {
				t.Fatalf("dead-letter header %q twice: %v", h.Key, added)
			}
			seen[h.Key] = true
			if !utf8.Valid(h.Value) {
				t.Fatalf("header %q is not valid UTF-8: %q", h.Key, h.Value)
			}
			if bytes.Contains(h.Value, []byte(fuzzSecret)) {
				t.Fatalf("header %q shows the secret: %q", h.Key, h.Value)
			}
			if limit := 64 << 10; len(h.Value) > limit {
				t.Fatalf("header %q holds %d bytes, more than %d", h.Key, len(h.Value), limit)
			}
		}
		if seen[processor.HeaderStack] != panics {
			t.Fatalf("stack header present = %v, want %v (node panicked: %v)", seen[processor.HeaderStack], panics, panics)
		}

		dl, ok := processor.ParseDeadLetter(d.Headers)
		if !ok || dl.Node != "check" || dl.Topic != "in" || dl.Partition != 3 || dl.Offset != offset || !dl.Timestamp.Equal(ts) {
			t.Fatalf("parsed %+v ok=%v; want node check from in/3@%d at %v", dl, ok, offset, ts)
		}
		if (dl.Stack != "") != panics {
			t.Fatalf("parsed stack %q, but the node panicked: %v", dl.Stack, panics)
		}
		want := nodeErr.Error()
		if panics {
			want = "panic: " + want
		}
		want = strings.ToValidUTF8(want, "\uFFFD")
		if dl.Error != want {
			prefix, _, truncated := strings.Cut(dl.Error, "… [truncated")
			if !truncated || !strings.HasPrefix(want, prefix) || len(prefix) < 1024 || len(want) <= len(dl.Error) {
				t.Fatalf("parsed error %.200q…, want %.200q…", dl.Error, want)
			}
		}
	})
}

func sameHeader(a, b kgo.RecordHeader) bool {
	return a.Key == b.Key && bytes.Equal(a.Value, b.Value)
}
