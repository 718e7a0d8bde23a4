package main

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Input formats of `produce --format`.
const (
	inputText = "text"
	inputJSON = "json"
)

// eachLine calls fn with every line of r, numbered from 1, without its
// newline. Lines may be of any length: a record can be up to the broker's
// message.max.bytes, far beyond bufio.Scanner's default.
func eachLine(r io.Reader, fn func(n int, line []byte) error) error {
	br := bufio.NewReaderSize(r, 64<<10)
	for n := 1; ; n++ {
		line, err := br.ReadBytes('\n')
		if len(line) > 0 {
			if ferr := fn(n, bytes.TrimSuffix(line, []byte("\n"))); ferr != nil {
				return ferr
			}
		}
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("read input at line %d: %w", n, err)
		}
	}
}

// textRecord splits a line at the first sep into key and value, as kcat's
// -K does; with no sep, or a line without it, the whole line is the value
// and the record has no key.
func textRecord(line []byte, sep string) *kgo.Record {
	if sep != "" {
		if k, v, ok := bytes.Cut(line, []byte(sep)); ok {
			return &kgo.Record{Key: k, Value: v}
		}
	}
	return &kgo.Record{Value: line}
}

// jsonInputLine is one line of `produce --format json`. Key and value are
// text; a value that is other JSON (an object, a number) is sent as its
// compact JSON. The *_base64 fields carry bytes that are not UTF-8.
type jsonInputLine struct {
	Key         json.RawMessage `json:"key"`
	KeyBase64   *string         `json:"key_base64"`
	Value       json.RawMessage `json:"value"`
	ValueBase64 *string         `json:"value_base64"`
	Headers     json.RawMessage `json:"headers"`   // {"k":"v"} or [{"key":"k","value":"v"}]
	Timestamp   json.RawMessage `json:"timestamp"` // RFC 3339 or epoch milliseconds

	// What `consume -o json` prints besides, accepted so its output can be
	// produced again, and ignored: the new record gets its own.
	Topic         json.RawMessage `json:"topic"`
	Partition     json.RawMessage `json:"partition"`
	Offset        json.RawMessage `json:"offset"`
	ProducerID    json.RawMessage `json:"producer_id"`
	ProducerEpoch json.RawMessage `json:"producer_epoch"`
}

// jsonRecord parses one JSON object into a record. Unknown fields are an
// error, so a misspelt "vaule" is not sent as a null value.
func jsonRecord(line []byte) (*kgo.Record, error) {
	if t := bytes.TrimSpace(line); len(t) == 0 || t[0] != '{' {
		return nil, errors.New(`not a JSON object; want one per line, e.g. {"key":"k","value":"v"}`)
	}
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.DisallowUnknownFields()
	var in jsonInputLine
	if err := dec.Decode(&in); err != nil {
		msg := strings.TrimPrefix(err.Error(), "json: ")
		if strings.HasPrefix(msg, "unknown field") {
			return nil, fmt.Errorf("%s; a record has key, value, headers and timestamp", msg)
		}
		return nil, fmt.Errorf("invalid JSON: %s", msg)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, errors.New("more than one JSON value on the line; put one object per line")
	}
	r := &kgo.Record{}
	var err error
	if r.Key, err = textOrBase64("key", in.Key, in.KeyBase64); err != nil {
		return nil, err
	}
	if r.Value, err = textOrBase64("value", in.Value, in.ValueBase64); err != nil {
		return nil, err
	}
	if r.Headers, err = jsonHeaders(in.Headers); err != nil {
		return nil, err
	}
	if r.Timestamp, err = jsonTimestamp(in.Timestamp); err != nil {
		return nil, err
	}
	return r, nil
}

// textOrBase64 is a field's bytes from its text form or its base64 form;
// nil (a null key or value) when neither is given.
func textOrBase64(name string, text json.RawMessage, b64 *string) ([]byte, error) {
	if b64 != nil {
		if !isNull(text) {
			return nil, fmt.Errorf("both %s and %s_base64 are set; give one", name, name)
		}
		b, err := base64.StdEncoding.DecodeString(*b64)
		if err != nil {
			return nil, fmt.Errorf("%s_base64 is not base64: %v", name, err)
		}
		return b, nil
	}
	return jsonBytes(text)
}

// jsonBytes is a JSON string's text, nil for null or absent, and the
// compact JSON of anything else.
func jsonBytes(raw json.RawMessage) ([]byte, error) {
	if isNull(raw) {
		return nil, nil
	}
	if raw[0] == '"' {
		var s string
		err := json.Unmarshal(raw, &s)
		return []byte(s), err
	}
	var b bytes.Buffer
	err := json.Compact(&b, raw)
	return b.Bytes(), err
}

// isNull reports whether a field is absent or null.
func isNull(raw json.RawMessage) bool {
	return len(raw) == 0 || string(raw) == "null"
}

// jsonHeaders reads headers given as an object, in its order, or as a list
// of {"key","value"} objects, which may repeat a key.
func jsonHeaders(raw json.RawMessage) ([]kgo.RecordHeader, error) {
	if isNull(raw) {
		return nil, nil
	}
	if raw[0] == '[' {
		var list []struct {
			Key         string          `json:"key"`
			Value       json.RawMessage `json:"value"`
			ValueBase64 *string         `json:"value_base64"`
		}
		if err := json.Unmarshal(raw, &list); err != nil {
			return nil, fmt.Errorf("headers: want a list of {\"key\":..., \"value\":...}: %s", strings.TrimPrefix(err.Error(), "json: "))
		}
		hs := make([]kgo.RecordHeader, 0, len(list))
		for _, h := range list {
			v, err := textOrBase64("header "+h.Key+" value", h.Value, h.ValueBase64)
			if err != nil {
				return nil, err
			}
			hs = append(hs, kgo.RecordHeader{Key: h.Key, Value: v})
		}
		return hs, nil
	}
	return orderedHeaders(raw)
}

// orderedHeaders reads a JSON object of headers keeping the order they
// were written in, which a Go map would lose.
func orderedHeaders(raw json.RawMessage) ([]kgo.RecordHeader, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil, errors.New(`headers: want an object {"k":"v"} or a list [{"key":"k","value":"v"}]`)
	}
	var hs []kgo.RecordHeader
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return nil, fmt.Errorf("headers: %v", err)
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, fmt.Errorf("headers: %v", err)
		}
		b, err := jsonBytes(v)
		if err != nil {
			return nil, fmt.Errorf("header %s: %v", t, err)
		}
		hs = append(hs, kgo.RecordHeader{Key: t.(string), Value: b})
	}
	return hs, nil
}

// jsonTimestamp reads an RFC 3339 time or epoch milliseconds; the zero
// time (absent or null) lets the client stamp the record when it sends it.
func jsonTimestamp(raw json.RawMessage) (time.Time, error) {
	if isNull(raw) {
		return time.Time{}, nil
	}
	if raw[0] == '"' {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return time.Time{}, fmt.Errorf("timestamp: %v", err)
		}
		t, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			return time.Time{}, fmt.Errorf("timestamp %q is not RFC 3339 (e.g. 2024-05-01T12:00:00Z) nor epoch milliseconds", s)
		}
		return t, nil
	}
	var ms float64
	if err := json.Unmarshal(raw, &ms); err != nil || ms < 0 || ms != math.Trunc(ms) || ms > math.MaxInt64/1e6 {
		return time.Time{}, fmt.Errorf("timestamp %s is not RFC 3339 nor a whole, non-negative number of epoch milliseconds", raw)
	}
	return time.UnixMilli(int64(ms)), nil
}
