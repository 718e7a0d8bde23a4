package main

import (
	"bufio"
	"encoding/base64"
	"encoding/json"
	"io"
	"strings"
	"unicode/utf8"

	"github.com/twmb/franz-go/pkg/kgo"
)

// recordWriter prints consumed records; flush pushes out what is buffered,
// so a follower sees records as they arrive.
type recordWriter interface {
	write(r *kgo.Record) error
	flush() error
}

// consumedHeaderJSON is one header in `consume -o json`.
type consumedHeaderJSON struct {
	Key         string  `json:"key"`
	Value       *string `json:"value"`
	ValueBase64 string  `json:"value_base64,omitempty"`
}

// consumedJSON is one line of `consume -o json`. Key, value and header
// values are text when they are UTF-8; other bytes are in the *_base64
// field instead, with the text field null.
type consumedJSON struct {
	Topic         string               `json:"topic"`
	Partition     int32                `json:"partition"`
	Offset        int64                `json:"offset"`
	Timestamp     string               `json:"timestamp"` // RFC 3339, UTC, milliseconds
	ProducerID    int64                `json:"producer_id"`
	ProducerEpoch int16                `json:"producer_epoch"`
	Key           *string              `json:"key"`
	KeyBase64     string               `json:"key_base64,omitempty"`
	Value         *string              `json:"value"`
	ValueBase64   string               `json:"value_base64,omitempty"`
	Headers       []consumedHeaderJSON `json:"headers"`
}

// timestampLayout is RFC 3339 with the milliseconds Kafka keeps.
const timestampLayout = "2006-01-02T15:04:05.000Z07:00"

// consumedJSONOf is a record as `consume -o json` prints it.
func consumedJSONOf(r *kgo.Record) consumedJSON {
	j := consumedJSON{
		Topic: r.Topic, Partition: r.Partition, Offset: r.Offset,
		Timestamp:  r.Timestamp.UTC().Format(timestampLayout),
		ProducerID: r.ProducerID, ProducerEpoch: r.ProducerEpoch,
		Headers: make([]consumedHeaderJSON, 0, len(r.Headers)),
	}
	j.Key, j.KeyBase64 = textOrB64(r.Key)
	j.Value, j.ValueBase64 = textOrB64(r.Value)
	for _, h := range r.Headers {
		hj := consumedHeaderJSON{Key: h.Key}
		hj.Value, hj.ValueBase64 = textOrB64(h.Value)
		j.Headers = append(j.Headers, hj)
	}
	return j
}

// textOrB64 is b as text when it is UTF-8, else as base64; nil b (a null
// key or value) is neither.
func textOrB64(b []byte) (*string, string) {
	switch {
	case b == nil:
		return nil, ""
	case utf8.Valid(b):
		s := string(b)
		return &s, ""
	default:
		return nil, base64.StdEncoding.EncodeToString(b)
	}
}

// jsonLines writes one compact JSON object per record.
type jsonLines struct {
	w   *bufio.Writer
	enc *json.Encoder
}

func (j *jsonLines) write(r *kgo.Record) error { return j.enc.Encode(consumedJSONOf(r)) }
func (j *jsonLines) flush() error              { return j.w.Flush() }

// formatted writes records through a kcat-style layout, which franz-go's
// RecordFormatter implements.
type formatted struct {
	w   *bufio.Writer
	f   *kgo.RecordFormatter
	buf []byte
}

func (f *formatted) write(r *kgo.Record) error {
	f.buf = f.f.AppendRecord(f.buf[:0], r)
	_, err := f.w.Write(f.buf)
	return err
}
func (f *formatted) flush() error { return f.w.Flush() }

// newRecordWriter prints JSON lines with -o json, else text in layout.
func newRecordWriter(w io.Writer, asJSON bool, layout string) (recordWriter, error) {
	bw := bufio.NewWriter(w)
	if asJSON {
		enc := json.NewEncoder(bw)
		enc.SetEscapeHTML(false)
		return &jsonLines{w: bw, enc: enc}, nil
	}
	f, err := kgo.NewRecordFormatter(layout)
	if err != nil {
		return nil, usageErrorf("--format %q: %v", layout, err)
	}
	return &formatted{w: bw, f: f}, nil
}

// textLayout is the layout printed without -o json: --format, or the
// value alone (kcat's and kafka-console-consumer's default), or with
// --key-separator the key, the separator and the value.
func textLayout(format, keySep string) string {
	switch {
	case format != "":
		return format
	case keySep != "":
		return "%k" + escapeLayout(keySep) + "%v\\n"
	default:
		return "%v\\n"
	}
}

// escapeLayout quotes the characters a layout gives a meaning to, so a
// separator prints as itself.
func escapeLayout(s string) string {
	return strings.NewReplacer(`\`, `\\`, "%", "%%", "{", "%{", "}", "%}").Replace(s)
}
